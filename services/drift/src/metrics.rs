//! What drift records: findings opened and resolved.
use cairn_service::Metric;

/// Drift findings, by `event`: `detected` (a new open finding) or `resolved`.
pub const FINDINGS: &str = "cairn_drift_findings_total";

/// What this crate records.
pub const METRICS: &[Metric] = &[Metric::counter(
    FINDINGS,
    "drift findings, by event (detected, resolved)",
)];

/// Counts a finding `event`: `detected` or `resolved`.
pub(crate) fn finding(event: &'static str) {
    metrics::counter!(FINDINGS, "event" => event).increment(1);
}
