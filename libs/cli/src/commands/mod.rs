//! The commands, grouped by what they act on.
pub mod account;
pub mod deploy;
pub mod drift;
pub mod ops;
pub mod resources;
pub mod webhooks;
