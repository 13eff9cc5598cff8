//! The Cairn runner: the only process that runs OpenTofu and so changes infrastructure.

pub mod executor;
pub mod summarize;
