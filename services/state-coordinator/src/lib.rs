//! The Cairn state coordinator: owns every OpenTofu state (generations, envelope
//! encryption, locks, runs and attempts, the `recovery_required` fence) and serves the
//! OpenTofu HTTP backend plus the `cairn.state.v1` gRPC API. See ARCHITECTURE.md §4.

pub mod app;
pub mod background;
pub mod config;
pub mod domain;
pub mod error;
pub mod failpoints;
pub mod grpc;
pub mod http_backend;
pub mod metrics;
pub mod server;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;

pub use config::Config;
pub use server::{Edges, Server, StartError};
