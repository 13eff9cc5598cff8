//! The drift service end to end: a real state coordinator (moto S3/KMS), a real runner
//! (Docker executor, tofu-sim image) on the target `local`, NATS under a test prefix, and
//! one or two drift replicas. The tests play the deployments service's part on the bus:
//! they plan and apply through the runner, then publish `resource.applied` and deployment
//! events as the workflow does. Each test runs on a runtime with two workers, as the services
//! do in production: on one thread every service of the rig waits for every other.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bounds;
mod claim;
mod deleted;
mod metrics;
mod outage;
mod race;
mod replicas;
mod rig;
mod scans;
