//! The workflow end to end: a real coordinator, tenancy, templates and runner (tofu-sim
//! through the process executor) with the deployments service and its worker, in-process.
//! Each test runs on a runtime with two workers, as the services do in production: on one
//! thread every service of the rig (and the test's own polling) waits for every other.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../api/helpers.rs"]
mod helpers;
mod rig;

mod approval;
mod concurrency;
mod crash;
mod deploy;
mod drift;
mod failures;
mod lifecycle;
mod metrics;
mod outputs;
mod pipeline;
mod traces;
