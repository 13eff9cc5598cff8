//! The Cairn runner: the only process that runs OpenTofu and so changes infrastructure.
//!
//! The path of a run, in two hops from here:
//! [`serve`] (its `queue` takes a request off `cairn.runq.<target>`) → [`run`] (admit, take
//! the saved plan, renew the lease, finish) → [`pipeline`] (the steps: `init`, `validate`,
//! `plan`/`apply`, `output`, and the stale-plan policy) → [`executor`] (one tofu command in a
//! container or a process).
//!
//! - [`cli`]: the command line (`serve`, `summarize-plan`).
//! - [`config`]: the `CAIRN_*` settings of `serve`.
//! - [`serve`]: the service ([`serve::Runner`], a `cairn_service::Service`): start-up, the
//!   run queues (and each target's validation requests, [`serve::validate`]), cancel
//!   requests, the admin API, the two-phase stop.
//! - [`run`]: one run from admission to `FinishRun`.
//! - [`pipeline`]: one admitted run through its tofu commands; the run model and the
//!   classification of failures.
//! - [`executor`]: running one command: Docker or a process, redacted output.
//! - [`coordinator`]: the state coordinator's `Runs` API, as the runner calls it.
//! - [`credentials`], [`secrets`]: the credential registry and the secret manager behind it.
//! - [`sts`]: AWS targets: assuming the target's role (STS `AssumeRole`) before each command,
//!   and target validation (`GetCallerIdentity`).
//! - [`plan_tags`]: what a saved plan was made from, to tell a stale one.
//! - [`spool`]: `errored.tfstate` files kept on the runner's disk until the coordinator
//!   confirmed them.
//! - [`summarize`]: the summary of a plan JSON file (`summarize-plan`).
//! - [`metrics`]: runs by kind and outcome, tofu command durations, the run queues.

pub mod cli;
pub mod config;
pub mod coordinator;
pub mod credentials;
pub mod executor;
pub mod metrics;
pub mod pipeline;
pub mod plan_tags;
pub mod run;
pub mod secrets;
pub mod serve;
pub mod spool;
pub mod sts;
pub mod summarize;
