//! The OpenTofu contract, pure: typed models of what OpenTofu writes and reads, with no I/O.
//!
//! For now this is the state file: [`inspect_state`] is what the state coordinator calls on
//! every state it receives; [`state::StateV4`] is the full version 4 model.

pub mod envelope;
pub mod error;
mod fields;
pub mod header;
pub mod inspect;
pub mod outputs;
pub mod state;

pub use error::{DocumentKind, StateError};
pub use header::StateHeader;
pub use inspect::{StateDocument, inspect_state};
pub use outputs::{OutputValue, PublicOutput, public_outputs};
pub use state::StateV4;
