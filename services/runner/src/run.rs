//! One run from admission to finish: `AdmitRun` and `GetRunConfig`, `TakePlan` for an apply of
//! a saved plan, the pipeline with the lease renewed while it runs, `PutPlan` after a plan
//! (with the masked plan JSON; the stored plan's sha256 checked), `Quarantine` of an
//! `errored.tfstate`, and `FinishRun`, whose refusal reason reclassifies a failure.

use std::time::{Duration, SystemTime};

use crate::coordinator::{Admission, CoordinatorClient, CoordinatorError};
use crate::pipeline::{ErrorClass, Pipeline, PipelineError, RunKind, RunOutcome, RunResult};

/// What a finished run reports.
#[derive(Debug)]
pub struct RunReport {
    /// The attempt that ran.
    pub attempt: u32,
    /// The state generation the attempt started from (`AdmitRun`).
    pub base_generation: u64,
    /// When the attempt was admitted (by this runner's clock).
    pub started_at: SystemTime,
    /// What the pipeline produced, reclassified with the coordinator's refusal reason.
    pub result: RunResult,
    /// The generation current after `FinishRun`.
    pub final_generation: u64,
    /// The run applied a saved plan it took from the coordinator.
    pub took_saved_plan: bool,
    /// The coordinator's id of the saved plan (a successful plan run).
    pub plan_id: Option<String>,
    /// sha256 (lowercase hex) of the saved plan (a successful plan run), as the coordinator
    /// stored it and checked against the plan file's bytes.
    pub plan_sha256: Option<String>,
    /// The coordinator's id of the quarantined `errored.tfstate`, if tofu left one.
    pub quarantine_id: Option<String>,
}

/// Why a run could not be driven to its finish.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A coordinator call failed.
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    /// The pipeline could not run.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
}

impl RunError {
    /// The class of the failed run: transient (the executor or a coordinator call failed),
    /// except where the coordinator error says otherwise (a plan stored under another
    /// sha256 is an internal error: no class, never retried).
    pub fn class(&self) -> Option<ErrorClass> {
        match self {
            Self::Coordinator(e) => e.run_class(),
            Self::Pipeline(_) => Some(ErrorClass::Transient),
        }
    }
}

/// Admits `run_id`, runs it and finishes it. The lease is renewed every `renew_every` while
/// tofu runs.
#[tracing::instrument(skip_all, fields(run_id = run_id))]
pub async fn execute_run(
    client: &CoordinatorClient,
    pipeline: &Pipeline<'_>,
    run_id: &str,
    renew_every: Duration,
) -> Result<RunReport, RunError> {
    let admission = client.admit(run_id).await?;
    execute_admitted(client, pipeline, &admission, renew_every).await
}

/// Runs an admitted run and finishes it. Only the first attempt of an apply takes its saved
/// plan: a later attempt plans afresh (its predecessor may have applied the plan already),
/// and an interrupted one runs nothing, so neither consumes the plan.
#[tracing::instrument(
    name = "run",
    skip_all,
    fields(
        run_id = %admission.run.run_id,
        attempt = admission.run.attempt,
        kind = %admission.config.kind,
        target = %admission.config.target_id,
    )
)]
pub async fn execute_admitted(
    client: &CoordinatorClient,
    pipeline: &Pipeline<'_>,
    admission: &Admission,
    renew_every: Duration,
) -> Result<RunReport, RunError> {
    let run = &admission.run;
    let config = &admission.config;
    let saved = if config.kind == RunKind::Apply
        && admission.plan_run_id.is_some()
        && !run.interrupted
        && run.attempt == 1
    {
        Some(client.take_plan(run).await?.0)
    } else {
        None
    };

    let work = pipeline.run(run, config, saved.as_ref());
    tokio::pin!(work);
    let mut renewals =
        tokio::time::interval_at(tokio::time::Instant::now() + renew_every, renew_every);
    let mut result = loop {
        tokio::select! {
            result = &mut work => break result?,
            _ = renewals.tick() => {
                if let Err(e) = client.renew(run).await {
                    tracing::warn!(error = %e, "cannot renew the run's lease");
                }
            }
        }
    };

    let mut stored = None;
    if config.kind == RunKind::Plan
        && result.outcome == RunOutcome::Succeeded
        && let Some(saved) = &result.saved_plan
    {
        stored = Some(
            client
                .put_plan(run, saved, result.masked_plan.as_ref())
                .await?,
        );
    }
    let mut quarantine_id = None;
    if let Some(state) = result.errored_state.take() {
        quarantine_id = Some(client.quarantine(run, state).await?);
    }
    let (final_generation, refusal) = client.finish(run, result.outcome, &result.message).await?;
    result.apply_refusal_reason(refusal);
    let (plan_id, plan_sha256) = stored.map(|s| (s.plan_id, s.plan_sha256)).unzip();
    Ok(RunReport {
        attempt: run.attempt,
        base_generation: run.base_generation,
        started_at: admission.admitted_at,
        took_saved_plan: saved.is_some(),
        result,
        final_generation,
        plan_id,
        plan_sha256,
        quarantine_id,
    })
}
