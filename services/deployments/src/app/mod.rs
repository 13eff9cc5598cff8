//! Use cases, one file per resource. Authorization lives here; the gRPC handlers
//! authenticate and convert, then call these functions.

pub mod deployments;
mod events;
pub mod instances;

use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::Notify;

use crate::peers::Peers;

/// Everything the use cases need.
#[derive(Clone)]
pub struct App {
    pub pool: PgPool,
    pub peers: Peers,
    /// Wakes the event outbox relay after a commit that wrote events.
    pub events_notify: Arc<Notify>,
    /// Wakes the job relay after a commit that enqueued a job.
    pub jobs_notify: Arc<Notify>,
}

impl App {
    /// After a commit that wrote events (and maybe jobs): publish them now.
    fn committed(&self) {
        self.events_notify.notify_one();
        self.jobs_notify.notify_one();
    }
}

/// Largest page a list returns; 0 asks for the default.
pub const MAX_PAGE: u32 = 500;

pub fn page_size(requested: u32) -> u32 {
    if requested == 0 {
        100
    } else {
        requested.min(MAX_PAGE)
    }
}
