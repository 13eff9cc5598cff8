//! The commands, grouped by what they act on.
pub mod account;
pub mod deploy;
pub mod ops;
pub mod resources;
