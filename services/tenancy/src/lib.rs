//! Cairn tenancy: tenants, users and roles, API tokens and access-token issuing (EdDSA
//! JWTs), targets, the append-only audit log and signed webhooks. See ARCHITECTURE.md §2, §3,
//! §8 and §9.

pub mod app;
pub mod background;
pub mod cli;
pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod keys;
pub mod metrics;
pub mod nats_tool;
pub mod rate_limit;
pub mod server;
pub mod store;
pub mod webhook_config;
pub mod webhook_http;

pub use cairn_service::DbArgs;
pub use config::Config;
pub use server::{Server, StartError};
pub use webhook_config::WebhookArgs;
