//! The Cairn deployments service: instances of templates on targets, and deployments that
//! converge them step by step (`cairn.deployments.v1`). It calls tenancy and templates over
//! gRPC with a service token, never their crates; jobs go to `cairn.deployq` and events to
//! `cairn.events.>` through outboxes written in the change's transaction. See
//! ARCHITECTURE.md §2, §7 and §9.

pub mod app;
pub mod background;
pub mod config;
pub mod coordinator;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod metrics;
pub mod peers;
pub mod server;
pub mod store;

pub use config::Config;
pub use server::{Server, StartError};
