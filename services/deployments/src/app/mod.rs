//! Use cases, one file per resource. Authorization lives here; the gRPC handlers
//! authenticate and convert, then call these functions.

pub mod approvals;
pub mod deployments;
pub mod drift;
mod events;
pub mod instances;
pub mod logs;
mod outputs;
pub mod plans;
pub mod watch;
pub mod workflow;

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
    /// Wakes the message relay after a commit that enqueued a job or a run request.
    pub jobs_notify: Arc<Notify>,
    /// Wakes the watchers of a deployment when its events commit.
    pub watch: Arc<watch::WatchHub>,
    /// The coordinator: states, runs, outputs, masked plans.
    pub coord: crate::coordinator::CoordinatorClient,
    /// The workflow's settings.
    pub flow: Arc<workflow::FlowSettings>,
    /// Wakes the workflow's waiter of a run when its result was written.
    pub run_wakers: Arc<workflow::wakers::RunWakers>,
    /// Core NATS (cancel requests on `cairn.runctl.<run_id>`) and the namespace.
    pub nats: async_nats::Client,
    pub ns: cairn_bus::Namespace,
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
