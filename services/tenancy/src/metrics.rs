//! What tenancy records: webhook delivery attempts by result.
use cairn_service::Metric;

/// Webhook delivery attempts settled, by `result`: `delivered`, `retry` (scheduled again),
/// `failed` (given up) or `released` (the sender stopped before an answer).
pub const WEBHOOK_DELIVERIES: &str = "cairn_tenancy_webhook_deliveries_total";

/// What this crate records.
pub const METRICS: &[Metric] = &[Metric::counter(
    WEBHOOK_DELIVERIES,
    "webhook delivery attempts, by result (delivered, retry, failed, released)",
)];
