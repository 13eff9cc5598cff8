//! What deployments records: deployments finished by status (at the one terminal
//! transition), and gauges of the active ones and the approvals waiting, refreshed from the
//! database with the approval expiry (every replica reports the same totals: take `max`).
use cairn_service::Metric;

/// Deployments that reached a terminal status, by `status`.
pub const FINISHED: &str = "cairn_deployments_finished_total";
/// Deployments now queued, running or awaiting approval, by `status`.
pub const ACTIVE: &str = "cairn_deployments_active";
/// Deployments waiting for an approval.
pub const APPROVALS_WAITING: &str = "cairn_deployments_approvals_waiting";
/// Times the watch hub gave its listening connection up because it delivered not even the
/// hub's own heartbeat (app::watch).
pub const EVENT_LISTENER_SILENT: &str = "cairn_deployments_event_listener_silent_total";

/// What this crate records.
pub const METRICS: &[Metric] = &[
    Metric::counter(FINISHED, "deployments finished, by terminal status"),
    Metric::gauge(
        ACTIVE,
        "deployments queued, running or awaiting approval, by status",
    ),
    Metric::gauge(APPROVALS_WAITING, "deployments waiting for an approval"),
    Metric::counter(
        EVENT_LISTENER_SILENT,
        "watch listener connections given up as silent",
    ),
];
