//! Pure types and rules of the state coordinator: no SQL, gRPC, AWS or HTTP here. The run
//! vocabulary shared with the runners and the workflow (ids, run kinds, environments,
//! refusal reasons) is `cairn_contract`'s.

pub mod content_md5;
pub mod object_keys;
pub mod run;
pub mod state_key;
pub mod token;
pub mod write_rules;

pub use run::{ExecutionContext, Outcome};
pub use token::RunToken;
