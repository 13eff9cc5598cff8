//! The Cairn drift service (`cairn.drift.v1`, ARCHITECTURE.md §8): every applied resource
//! planned again, read-only, from the root config it was applied with, spread over
//! `CAIRN_DRIFT_CHECK_INTERVAL`, bounded per target, never while a deployment of its
//! instance is in progress; drift status and findings per resource, ignore rules per
//! instance, `instance.drift_detected` / `drift_resolved` events.
//!
//! - [`domain`]: the schedule (phases, slots) and the verdict of a scan (pure).
//! - [`store`]: all SQL: the tracking projection, scans and per-target slots, findings.
//! - [`app`]: the use cases: the projection's event handler, the scheduler's tick, the
//!   dispatch of a scan, a scan's result, the API's reads and writes with their
//!   authorization.
//! - [`background`]: the consumers (`cairn.events.>`, `cairn.runres.*`) and the scheduler.
//! - [`coordinator`]: the coordinator's service-only reads and run registration.
//! - [`grpc`]: the `Drift` handlers.

pub mod app;
pub mod background;
pub mod config;
pub mod coordinator;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod metrics;
pub mod server;
pub mod store;

pub use config::Config;
pub use server::{Server, StartError};
