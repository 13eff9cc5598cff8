//! Use cases of the coordinator, one file per resource. Authorization lives here; the
//! transports (gRPC, HTTP backend) authenticate and convert, then call these functions.

pub mod access;
pub mod backend;
pub mod beside;
pub mod config_keys;
pub mod events;
pub mod outputs;
pub mod payload;
pub mod plans;
pub mod quarantine;
pub mod read_ahead;
pub mod recovery;
pub mod runs;
pub mod sealed_cache;
pub mod spare_keys;
pub mod states;
pub mod verify;

use std::sync::Arc;
use std::time::Duration;

use cairn_storage::{DataKeyCache, KeyManager, ObjectStore};
use sqlx::PgPool;
use tokio::sync::Notify;

use crate::failpoints::Failpoints;

/// Tunables of the coordinator (from `Config`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Lease of an admitted attempt; renewed by the runner while tofu runs.
    pub lease: Duration,
    /// Largest state document accepted.
    pub max_state_bytes: usize,
    /// Largest saved plan or root config accepted.
    pub max_plan_bytes: usize,
    /// How long an unused saved plan is kept.
    pub plan_ttl: Duration,
    /// The base URL runners use to reach the HTTP backend (`http://host:port`).
    pub public_http_url: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(120),
            max_state_bytes: 64 * 1024 * 1024,
            max_plan_bytes: 256 * 1024 * 1024,
            plan_ttl: Duration::from_secs(7 * 24 * 3600),
            public_http_url: "http://127.0.0.1:8453".to_owned(),
        }
    }
}

/// Everything the use cases need.
#[derive(Clone)]
pub struct App {
    pub pool: PgPool,
    pub objects: Arc<dyn ObjectStore>,
    pub keys: Arc<dyn KeyManager>,
    pub key_cache: Arc<DataKeyCache>,
    /// Data keys generated for writes that were then refused, for the state's next write.
    pub spare_keys: Arc<spare_keys::SpareKeys>,
    /// The key each state's run root configs are sealed with, reused within bounds.
    pub config_keys: Arc<config_keys::ConfigKeys>,
    /// What a backend request may start before its database read answers.
    pub read_ahead: Arc<read_ahead::ReadAhead>,
    /// Public outputs of generations read before.
    pub outputs_cache: Arc<outputs::PublicOutputsCache>,
    /// The sealed object of each state's current generation, kept for its next GET.
    pub sealed_cache: Arc<sealed_cache::SealedCache>,
    /// Low-priority threads for the work beside a write's critical path.
    pub beside: Arc<beside::BesideWork>,
    /// Wakes the outbox relay after a commit.
    pub outbox_notify: Arc<Notify>,
    pub settings: Arc<Settings>,
    pub failpoints: Failpoints,
}
