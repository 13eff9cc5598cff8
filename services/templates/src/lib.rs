//! The Cairn templates service: versioned template documents, their validation against the
//! module library, and their resolution into immutable `ResolvedInfrastructure` snapshots
//! (`cairn.templates.v1`). It calls no other service. See ARCHITECTURE.md §2 and §6.

pub mod app;
pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod server;
pub mod store;

pub use config::Config;
pub use server::{Server, StartError};
