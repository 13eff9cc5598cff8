//! What the storage edges record: the latency of each S3 and KMS call, by operation and
//! outcome (`ok`, `error`), timed around the whole SDK call (its retries included).
use cairn_telemetry::metrics::Metric;

/// Latency of S3 calls (`put`, `get`, `head`, `delete`, `list`: every page; `self_check`).
pub const S3_REQUEST_DURATION: &str = "cairn_storage_s3_request_duration_seconds";
/// Latency of KMS calls (`generate_data_key`, `decrypt`).
pub const KMS_REQUEST_DURATION: &str = "cairn_storage_kms_request_duration_seconds";

/// What this crate records.
pub const METRICS: &[Metric] = &[
    Metric::histogram(
        S3_REQUEST_DURATION,
        "S3 call latency in seconds, by operation and outcome",
    ),
    Metric::histogram(
        KMS_REQUEST_DURATION,
        "KMS call latency in seconds, by operation and outcome",
    ),
];

/// Runs one call of `operation`, timed in `metric`.
pub(crate) async fn timed<T, E>(
    metric: &'static str,
    operation: &'static str,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    cairn_telemetry::metrics::timed(metric, &[("operation", operation)], call).await
}
