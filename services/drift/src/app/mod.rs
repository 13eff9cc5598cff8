//! Use cases. Authorization lives here; the gRPC handlers authenticate and convert, the
//! background tasks feed events and results in.

pub mod api;
mod events;
pub mod scans;
pub mod tracking;

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::Notify;

use crate::coordinator::CoordinatorClient;
use crate::domain::schedule::Schedule;

/// How scans are scheduled and bounded.
#[derive(Debug, Clone)]
pub struct Settings {
    pub schedule: Schedule,
    /// Scans in flight per target.
    pub max_per_target: i32,
    /// Due resources one tick claims at most.
    pub batch: i64,
    /// An open scan older than this is ended as timed out.
    pub scan_timeout: Duration,
    /// This replica's name on its scans.
    pub replica: String,
    /// When a scan that could not be requested (the coordinator away) is tried again.
    pub retry_after: Duration,
}

/// Everything the use cases need.
#[derive(Clone)]
pub struct App {
    pub pool: PgPool,
    pub coord: CoordinatorClient,
    /// Wakes the event outbox relay after a commit that wrote events.
    pub events_notify: Arc<Notify>,
    /// Wakes the message relay after a commit that enqueued a run request.
    pub messages_notify: Arc<Notify>,
    /// Wakes the scheduler (a scan triggered or finished).
    pub scheduler_notify: Arc<Notify>,
    pub settings: Arc<Settings>,
}

/// Largest page a list returns; 0 asks for the default.
pub const MAX_PAGE: u32 = 500;

pub fn page_size(requested: u32) -> i64 {
    i64::from(if requested == 0 {
        100
    } else {
        requested.min(MAX_PAGE)
    })
}
