//! API tests: a real deployments service on port 0 against a fresh PostgreSQL database and
//! its own NATS prefix, with real tenancy and templates services started in-process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod deployments;
mod helpers;
mod instances;
mod logs;
mod plans;
mod watch;
