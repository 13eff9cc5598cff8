//! The Cairn runner: the only process that runs OpenTofu and so changes infrastructure.

pub mod coordinator;
pub mod credentials;
pub mod executor;
pub mod pipeline;
pub mod plan_tags;
pub mod run;
pub mod summarize;
