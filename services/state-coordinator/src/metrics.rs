//! What the coordinator records: its OpenTofu backend's requests (the state API's latency
//! objective is the p99 of [`BACKEND_REQUEST_DURATION`] for GET and POST, see README), the
//! latency of a state write (seal, put, commit) and of a read (fetch, open), generations
//! committed, fences set and the sealed cache's hits. The storage edges record their own S3 and KMS calls
//! (`cairn_storage::metrics`).
use cairn_service::Metric;
use cairn_service::metrics::HttpMetricsLayer;

/// Requests to the HTTP backend, by method and HTTP status.
pub const BACKEND_REQUESTS: &str = "cairn_state_backend_requests_total";
/// HTTP backend latency, by method, until the response body was sent.
pub const BACKEND_REQUEST_DURATION: &str = "cairn_state_backend_request_duration_seconds";
/// A state write (`via`: `run`, tofu's POST, from its checks read; `recovery`, a rollback):
/// the body checked beside its copy sealed and put, then
/// the committing transaction.
pub const WRITE_DURATION: &str = "cairn_state_write_duration_seconds";
/// A state read: the object fetched (or read ahead) and opened.
pub const READ_DURATION: &str = "cairn_state_read_duration_seconds";
/// Generations committed, by `via` (`run`: tofu's POST; `recovery`: a rollback).
pub const GENERATIONS_COMMITTED: &str = "cairn_state_generations_committed_total";
/// States fenced (`recovery_required` set on proof of damage).
pub const FENCES: &str = "cairn_state_fences_total";
/// GETs that found their generation's object in the sealed cache, by `result`: `hit` (the
/// store confirmed the version, the kept bytes were used) or `unconfirmed` (it did not; the
/// object was read from the store).
pub const SEALED_CACHE_READS: &str = "cairn_state_sealed_cache_reads_total";

/// The backend's methods, each its own label value.
const BACKEND_METHODS: &[&str] = &["GET", "POST", "LOCK", "UNLOCK", "DELETE"];

/// The layer on the backend's router.
pub const BACKEND_LAYER: HttpMetricsLayer =
    HttpMetricsLayer::new(BACKEND_REQUESTS, BACKEND_REQUEST_DURATION, BACKEND_METHODS);

/// What this crate records.
pub const METRICS: &[Metric] = &[
    Metric::counter(
        BACKEND_REQUESTS,
        "OpenTofu HTTP backend requests, by method and HTTP status",
    ),
    Metric::histogram(
        BACKEND_REQUEST_DURATION,
        "OpenTofu HTTP backend latency in seconds, by method (the state API's objective)",
    ),
    Metric::histogram(
        WRITE_DURATION,
        "state write latency in seconds (seal, put, commit), by via (run, recovery) and outcome",
    ),
    Metric::histogram(
        READ_DURATION,
        "state read latency in seconds (fetch, open), by outcome",
    ),
    Metric::counter(
        GENERATIONS_COMMITTED,
        "state generations committed, by via (run, recovery)",
    ),
    Metric::counter(FENCES, "states fenced: recovery required"),
    Metric::counter(
        SEALED_CACHE_READS,
        "GETs whose object was kept in the sealed cache, by result (hit, unconfirmed)",
    ),
];
