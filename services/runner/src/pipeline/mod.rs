//! One admitted run driven through its tofu commands, with the outcome classified for the
//! coordinator and the workflow. [`Pipeline::run`] is the driver; the rest is split by what
//! it does:
//!
//! - [`model`]: the run as the coordinator granted it ([`AdmittedRun`], [`RunConfig`],
//!   [`SavedPlan`]) and what running it produced ([`RunOutcome`], [`RunResult`]).
//! - `steps`: the command sequence (`init`, `validate`, then `plan` or `apply` and
//!   `output`) and the [`StalePlanPolicy`].
//! - `command`: running one command: its environment (backend, run token, credentials) and
//!   its log lines.
//! - [`backend_tls`]: the CA and client identity tofu verifies an https backend with
//!   ([`BackendTls`]).
//! - `workdir`: the files of the run's work directory ([`ROOT_CONFIG_FILE`], [`PLAN_FILE`], …).
//! - `classify`: why a run failed ([`ErrorClass`]), from tofu's output or the coordinator's
//!   refusal reason.
//! - `outputs`: what leaves the run: the plan summary, the masked plan, the public outputs.

pub mod backend_tls;
mod classify;
mod command;
pub mod model;
mod outputs;
mod steps;
mod workdir;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use backend_tls::BackendTls;
pub use classify::{ErrorClass, class_of_refusal};
pub use command::HTTP_RETRY_MAX;
pub use model::{
    AdmittedRun, BackendAddresses, Environment, RunConfig, RunKind, RunOutcome, RunResult,
    SavedPlan,
};
pub use steps::StalePlanPolicy;
pub use workdir::{ERRORED_STATE_FILE, LOCK_FILE, PLAN_FILE, ROOT_CONFIG_FILE};

use crate::credentials::CredentialRegistry;
use crate::executor::{Executor, ExecutorError, LogLine};
use crate::plan_tags::LibraryHashError;
use crate::sts::StsError;
use command::Job;

/// How a pipeline is run.
#[derive(Debug, Clone)]
pub struct PipelineSettings {
    /// The limit of each tofu command (`CAIRN_TOFU_TIMEOUT`).
    pub timeout: Duration,
    /// Cancelling this stops the running command and the pipeline.
    pub cancel: CancellationToken,
    /// How many of the last log lines go with the result.
    pub log_tail: usize,
    /// Where every redacted log line is copied as it comes (the run's log stream).
    pub log_sink: Option<mpsc::Sender<LogLine>>,
    /// The module library as the runner sees it, for the plan tags.
    pub module_library: PathBuf,
    /// The operator's `CAIRN_EXECUTOR_EXTRA_ENV`: given to every command (not secret).
    pub extra_env: Vec<(String, String)>,
    /// What verifies the coordinator's https backend, given to every command of a run whose
    /// backend is https (none set: tofu's system roots).
    pub backend_tls: BackendTls,
}

/// Why a pipeline could not be run at all (as opposed to a tofu command failing).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The executor failed, or a work directory file could not be written or read.
    #[error(transparent)]
    Executor(#[from] ExecutorError),
    /// The module library could not be hashed.
    #[error(transparent)]
    LibraryHash(#[from] LibraryHashError),
    /// An AWS target's role could not be assumed for a command: the run fails with the
    /// error's class (AccessDenied and other refusals are config errors, never retried).
    #[error(transparent)]
    AwsSession(StsError),
}

/// Drives one admitted run through an executor.
pub struct Pipeline<'a> {
    exec: &'a dyn Executor,
    registry: &'a CredentialRegistry,
    settings: PipelineSettings,
}

impl<'a> Pipeline<'a> {
    /// A pipeline running on `exec` with credentials from `registry`.
    pub fn new(
        exec: &'a dyn Executor,
        registry: &'a CredentialRegistry,
        settings: PipelineSettings,
    ) -> Self {
        Self {
            exec,
            registry,
            settings,
        }
    }

    /// A copy of this pipeline whose commands are also stopped (SIGINT, the grace period,
    /// SIGKILL) when the returned token is cancelled; cancelling this one's token still
    /// stops them too.
    pub fn stoppable(&self) -> (Pipeline<'a>, CancellationToken) {
        let mut settings = self.settings.clone();
        settings.cancel = self.settings.cancel.child_token();
        let stop = settings.cancel.clone();
        let copy = Pipeline {
            exec: self.exec,
            registry: self.registry,
            settings,
        };
        (copy, stop)
    }

    /// Runs the run to its end; the work directory is removed afterwards. `saved_plan` is the
    /// plan an apply applies (none: the apply plans itself). An interrupted attempt runs
    /// nothing; credentials that cannot be resolved fail the run before any command.
    #[tracing::instrument(
        name = "pipeline",
        skip_all,
        fields(
            run_id = %admitted.run_id,
            attempt = admitted.attempt,
            kind = %config.kind,
            target = %config.target_id,
        )
    )]
    pub async fn run(
        &self,
        admitted: &AdmittedRun,
        config: &RunConfig,
        saved_plan: Option<&SavedPlan>,
    ) -> Result<RunResult, PipelineError> {
        if admitted.interrupted {
            return Ok(RunResult::new(
                RunOutcome::Interrupted,
                Some(ErrorClass::Interrupted),
                format!(
                    "attempt {} of a run that must not be repeated: nothing was run",
                    admitted.attempt
                ),
            ));
        }
        let (env, aws) = match self.secret_env(admitted, config).await {
            Ok(resolved) => resolved,
            Err(e) => {
                let class = if e.is_transient() {
                    ErrorClass::Transient
                } else {
                    ErrorClass::Config
                };
                return Ok(RunResult::failed(class, e.chain()));
            }
        };
        let run_id = admitted.run_id;
        self.exec.prepare_run(&run_id).await?;
        let mut job = Job {
            admitted,
            config,
            env,
            aws,
            tail: VecDeque::new(),
        };
        let result = self.steps(&mut job, saved_plan).await;
        let errored =
            workdir::read_optional(&self.exec.work_dir(&run_id).join(ERRORED_STATE_FILE)).await;
        let cleanup = self
            .exec
            .cleanup_run(&run_id)
            .await
            .map_err(PipelineError::from);
        let errored = errored?;
        let mut result = match (result, cleanup) {
            (Ok(result), Ok(())) => result,
            // STS refused or failed before a command: that command did not run; the run
            // fails with STS's answer.
            (Err(PipelineError::AwsSession(e)), Ok(())) if errored.is_none() => {
                let class = if e.is_transient() {
                    ErrorClass::Transient
                } else {
                    ErrorClass::Config
                };
                RunResult::failed(class, e.chain())
            }
            // An errored.tfstate is never dropped, even when the runner failed after tofu
            // left it: the run fails (transient) and carries it to the quarantine.
            (Err(e), _) | (Ok(_), Err(e)) if errored.is_some() => RunResult::failed(
                ErrorClass::Transient,
                format!(
                    "the runner could not complete the run: {}",
                    cairn_telemetry::Chain(&e)
                ),
            ),
            (Err(e), _) | (Ok(_), Err(e)) => return Err(e),
        };
        result.errored_state = errored;
        result.log_tail = job.tail.into_iter().collect();
        Ok(result)
    }
}
