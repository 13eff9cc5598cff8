//! The Cairn runner: the only process that runs OpenTofu and so changes infrastructure.

pub mod config;
pub mod coordinator;
pub mod credentials;
pub mod executor;
pub mod pipeline;
pub mod plan_tags;
pub mod run;
pub mod secrets;
pub mod serve;
pub mod summarize;
