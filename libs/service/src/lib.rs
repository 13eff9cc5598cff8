//! The one way a Cairn service starts, serves, stops and fails. A service writes only what
//! is its own (config fields, edges, handlers, app, store, domain) and hands the rest here:
//!
//! - [`access`]: tenant scoping and role checks on loaded records (another tenant's is
//!   NOT_FOUND).
//! - `accept`: how every listener takes a connection (`TCP_NODELAY`).
//! - [`args`]: the `CAIRN_*` settings every service shares ([`DbArgs`], [`NatsArgs`],
//!   [`JwksArgs`], [`PeerArgs`] (tenancy, the coordinator and the service token), and
//!   [`SharedArgs`]: profile, server TLS, client TLS ([`ClientTlsArgs`]:
//!   `CAIRN_TLS_CA`, `CAIRN_TLS_CLIENT_CERT`/`_KEY`, read when parsed, for the peer channels
//!   and the OTLP exporter), health listener, metrics, traces ([`TraceArgs`]: the exporter's
//!   channel and its profile fact), which libs/service applies) and the one duration parser;
//!   services flatten them into their clap config, so `--help` lists every setting, and
//!   nothing re-reads the environment.
//! - [`tls`]: [`ServerTls`] from `CAIRN_TLS_CERT`/`CAIRN_TLS_KEY` (mTLS with
//!   `CAIRN_TLS_CLIENT_CA`), reloaded on SIGHUP without dropping connections.
//! - [`profile`]: [`Profile`] (`CAIRN_PROFILE`): the one place production refuses a
//!   configuration [`Fact`] (plaintext listeners, plaintext trace export off the host, local
//!   key file, …).
//! - [`http`]: [`http::HttpListener`], an axum listener (the coordinator's HTTP backend,
//!   every service's metrics) with the same TLS.
//! - [`tasks`]: [`Tasks`], a cancellation token with the tasks it stops.
//! - [`grpc`]: [`GrpcServer`], a bound listener serving health, reflection, request ids, a
//!   span, metrics and a timeout per request, the auth layer and graceful shutdown.
//! - [`health`]: [`HealthArgs`] (`CAIRN_HEALTH_ADDR`): the plaintext, health-only listener
//!   for probes without TLS (kubelet's `grpc:` probe), answering from the gRPC listener's
//!   statuses; the one plaintext listener production allows.
//! - [`metrics`]: Prometheus metrics ([`MetricsArgs`]: `CAIRN_METRICS_ADDR`): the one
//!   process-wide recorder, the `/metrics` listener, the per-call gRPC layer and the HTTP
//!   one (the coordinator's backend), the [`Metric`] catalogue each crate lists its own in.
//! - [`run`](mod@run): [`run()`] for `main.rs`: runtime, the profile's settings-only rules,
//!   telemetry (its OTLP channel built here with the client TLS), signal handlers, start,
//!   wait; the whole error chain printed once and exit 2 when start-up fails; the service's
//!   own one-off subcommands ([`Command::Tool`]).
//! - [`service_impl`]: [`grpc_service!`], the `Service` impl and accessors of a service's
//!   `Server`, written once.
//! - [`peers`]: [`peer_client`], the SDK's typed clients as a service uses them to call
//!   the others (its token, no answer-size limit).
//! - [`startup`]: the start-up steps services with a schema, outboxes and peers take alike
//!   (schema, the outboxes' relays, the service token and peer channels, the JWT keys) and
//!   [`StartupError`], which a service's own start-up error wraps.
//! - [`error`]: [`BaseError`], what every service's error shares, and its one exhaustive
//!   mapping to `tonic::Status` (a bus failure mapped by its type); [`ServiceError`] for a
//!   service whose only other failures are its peers' answers; [`base_error_conversions!`]
//!   for a service's own enum.

mod accept;
pub mod access;
pub mod args;
pub mod error;
pub mod grpc;
pub mod health;
pub mod http;
pub mod metrics;
pub mod peers;
pub mod profile;
pub mod run;
pub mod service_impl;
pub mod startup;
pub mod tasks;
pub mod tls;

pub use args::{
    ClientTlsArgs, DbArgs, JwksArgs, NatsArgs, PeerArgs, PemFile, PemFileError, SharedArgs,
    TraceArgs, duration,
};
pub use error::{BaseError, PeerError, ServiceError, status_with_reason};
pub use grpc::{Addresses, GrpcServer, Listen, ServeError};
pub use health::HealthArgs;
pub use metrics::{Metric, MetricsArgs};
pub use peers::{peer_call_options, peer_client};
pub use profile::{Fact, ListenArgs, Profile, Refusal};
pub use run::{Command, NoTool, Service, Tool, run};
pub use startup::{RelayWakers, StartupError};
pub use tasks::Tasks;
pub use tls::{ServerTls, TlsArgs, TlsError};

pub use error::reason_of;

/// What [`base_error_conversions!`] expands to refers to these.
#[doc(hidden)]
pub mod __private {
    pub use cairn_auth;
    pub use cairn_bus;
    pub use cairn_contract;
    pub use cairn_db;
    pub use sqlx;
    pub use tokio_util::sync::CancellationToken;
}
