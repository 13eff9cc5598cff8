//! Cairn's observability plumbing: the tracing subscriber every binary installs, the quiet
//! one tests install, request ids on HTTP and gRPC requests, shutdown signals, the one
//! error-chain formatter ([`Chain`]) and the metric catalogue type ([`metrics::Metric`]).
//! [`trace`]: the OTLP exporter (`CAIRN_OTLP_ENDPOINT`, on the [`OtlpExport`] channel its
//! caller built with its TLS settings) and [`TraceContext`], the W3C
//! context that services hand each other in gRPC metadata, NATS headers and database rows.

mod chain;
mod filter;
pub mod metrics;
pub mod request_id;
pub mod shutdown;
mod subscriber;
mod testing;
pub mod trace;

pub use chain::Chain;
pub use request_id::{REQUEST_ID_HEADER, RequestId, RequestIdLayer, RequestIdService};
pub use shutdown::ShutdownSignals;
pub use subscriber::{TelemetryError, init, init_with_otlp};
pub use testing::init_for_tests;
pub use trace::{OtlpExport, TraceContext};
