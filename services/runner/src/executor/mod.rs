//! Running one OpenTofu command of a run: the [`Executor`] contract and its two
//! implementations, a throwaway Docker container per command ([`DockerExecutor`]) and a child
//! process in its own process group ([`ProcessExecutor`]).
//!
//! A run's commands share one work directory (`prepare_run` creates it, `cleanup_run` removes
//! it) holding the root config, `.terraform/`, the lock file and the plan file; the module
//! library appears read-only at `modules/` inside it. Output leaves the executor only as
//! redacted lines ([`Redactor`]).

mod docker;
mod error;
mod lines;
mod process;
mod redact;
mod spec;
mod workdir;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

pub use docker::{DockerConfig, DockerExecutor};
pub use error::ExecutorError;
pub use process::{ProcessConfig, ProcessExecutor};
pub use redact::Redactor;
pub use spec::{
    CommandOutcome, CommandSpec, LogLine, OutputStream, RunId, RunnerInstance, RunnerInstanceError,
    Secret,
};

/// Label naming the run a container or volume belongs to.
pub const LABEL_RUN_ID: &str = "cairn.run_id";
/// Label naming the runner instance that created a container or volume.
pub const LABEL_RUNNER_INSTANCE: &str = "cairn.runner_instance";
/// Label naming the attempt of the run a container belongs to.
pub const LABEL_ATTEMPT: &str = "cairn.attempt";

/// Containers another runner instance left here for one attempt of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignAttempt {
    /// The instance that created them.
    pub instance: RunnerInstance,
    /// The run.
    pub run_id: RunId,
    /// The attempt (`None`: containers of a runner that did not label attempts).
    pub attempt: Option<u32>,
}

/// A boxed future, so that [`Executor`] can be used as `dyn Executor`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs the tofu commands of runs. Every method is safe to call again after a failure.
pub trait Executor: Send + Sync {
    /// Creates the run's (empty) work directory; a leftover one of an earlier attempt is
    /// emptied first.
    fn prepare_run<'a>(&'a self, run_id: &'a RunId) -> BoxFuture<'a, Result<(), ExecutorError>>;

    /// The run's work directory as the runner sees it, to write the root config into and read
    /// the plan file, the lock file or `errored.tfstate` from.
    fn work_dir(&self, run_id: &RunId) -> PathBuf;

    /// Runs one tofu command to its end, its timeout or its cancellation.
    fn run(&self, spec: CommandSpec) -> BoxFuture<'_, Result<CommandOutcome, ExecutorError>>;

    /// Removes the run's work directory and anything of the run still around.
    fn cleanup_run<'a>(&'a self, run_id: &'a RunId) -> BoxFuture<'a, Result<(), ExecutorError>>;

    /// Removes what `instance` left behind: its containers or process groups, its work
    /// volumes and work directories (a new attempt of a run always starts afresh). Never
    /// touches another instance's. Call it before this instance runs anything. Returns how
    /// many containers, process groups and volumes were removed.
    fn reap_orphans<'a>(
        &'a self,
        instance: &'a RunnerInstance,
    ) -> BoxFuture<'a, Result<usize, ExecutorError>>;

    /// The attempts of runs of other instances with something left here (containers). The
    /// caller decides, by asking the coordinator which attempt of the run is live, which of
    /// them [`Executor::reap_foreign`] may remove. The process executor sees only its own
    /// instance and returns none.
    fn foreign_attempts<'a>(
        &'a self,
        own: &'a RunnerInstance,
    ) -> BoxFuture<'a, Result<Vec<ForeignAttempt>, ExecutorError>> {
        let _ = own;
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Removes the containers `instance` left for one dead attempt of a run (all of the run's
    /// when the attempt is `None`), then the run's work volume of that instance unless a
    /// container of it is left. Only for an attempt that is not the run's live one: never a
    /// live runner's.
    fn reap_foreign<'a>(
        &'a self,
        dead: &'a ForeignAttempt,
    ) -> BoxFuture<'a, Result<usize, ExecutorError>> {
        let _ = dead;
        Box::pin(async { Ok(0) })
    }
}
