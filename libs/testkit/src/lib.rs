//! Test harness shared by every service's tests: a fresh database, NATS namespace, bucket
//! and KMS key per test, signing keys and tokens, quiet tracing, temp dirs, and a TCP proxy
//! that injects faults (cut, delay, reset) in front of any of the real services, a test
//! certificate authority for TLS tests, reading a `/metrics` scrape ([`metrics`]), and
//! checking a binary's `--help` ([`help`]).
//!
//! Everything here panics with a message naming the cause, because its callers are tests:
//! a missing `CAIRN_TEST_*` variable fails the test instead of skipping it. Spawning a
//! service stays in that service's `tests/api/helpers.rs`.

pub mod aws;
pub mod db;
pub mod env;
pub mod fault_proxy;
pub mod fixtures;
pub mod grpc;
pub mod help;
pub mod metrics;
pub mod nats;
pub mod otlp;
pub mod temp;
pub mod test_ca;
pub mod test_tracing;
pub mod tokens;

pub use aws::{TestAws, kms_client_for, s3_client_for, sdk_config_for};
pub use db::fresh_database;
pub use fault_proxy::{Fault, FaultProxy};
pub use fixtures::tofu_fixtures;
pub use grpc::{Authed, Bearer, connect as connect_grpc};
pub use help::assert_help_lists;
pub use nats::{NatsServer, TestNats, connect_nats, connect_nats_without_streams, stored};
pub use otlp::{OtlpReceiver, ReceivedSpan};
pub use temp::{TempDir, temp_dir};
pub use test_ca::{TestCa, TestCert};
pub use test_tracing::init_tracing;
pub use tokens::TestKeys;
