//! Cairn's observability plumbing: the tracing subscriber every binary installs, the quiet
//! one tests install, request ids on HTTP and gRPC requests, shutdown signals, the one
//! error-chain formatter ([`Chain`]) and the metric catalogue type ([`metrics::Metric`]).

mod chain;
mod filter;
pub mod metrics;
pub mod request_id;
pub mod shutdown;
mod subscriber;
mod testing;

pub use chain::Chain;
pub use request_id::{REQUEST_ID_HEADER, RequestId, RequestIdLayer, RequestIdService};
pub use shutdown::ShutdownSignals;
pub use subscriber::{TelemetryError, init};
pub use testing::init_for_tests;
