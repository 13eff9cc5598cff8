//! The command sequence of a run — `init`, `validate`, then `plan` (`-out`, `show -json`) for
//! plan-like runs or `apply` (of a saved plan, or of a fresh plan) and `output` — and the
//! stale-plan policy: a saved plan whose tags changed fails in production and is planned again
//! elsewhere.

use std::path::Path;

use super::classify::{ErrorClass, Stage, failure};
use super::command::{Command, Job, Ran};
use super::model::{Environment, RunKind, RunOutcome, RunResult, SavedPlan};
use super::outputs::{drift_findings, plan_view, public_outputs};
use super::workdir::{self, LOCK_FILE, PLAN_FILE, ROOT_CONFIG_FILE};
use super::{Pipeline, PipelineError};
use crate::plan_tags::{self, PlanTags};

/// What an apply does with a saved plan made from something that has changed since (the
/// state's generation, the config, tofu, the providers, the module library).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StalePlanPolicy {
    /// Fail as [`ErrorClass::StalePlan`] before tofu runs: nothing is applied.
    Fail,
    /// Warn, plan again and apply the new plan.
    PlanAgain,
}

impl StalePlanPolicy {
    /// Production (by the one production rule: `prod` and `Production` too) fails; every
    /// other environment plans again.
    pub fn for_environment(environment: &Environment) -> Self {
        if environment.is_production() {
            Self::Fail
        } else {
            Self::PlanAgain
        }
    }
}

/// A step's value, or the failed result that ends the run.
type Step<T> = Result<Result<T, RunResult>, PipelineError>;

/// The value of a [`Step`], or `return Ok(failed)` from the enclosing function.
macro_rules! step {
    ($step:expr) => {
        match $step? {
            Ok(value) => value,
            Err(failed) => return Ok(failed),
        }
    };
}

impl Pipeline<'_> {
    /// Every command of the run, in order, in its prepared work directory.
    pub(super) async fn steps(
        &self,
        job: &mut Job<'_>,
        saved_plan: Option<&SavedPlan>,
    ) -> Result<RunResult, PipelineError> {
        let dir = self.exec.work_dir(&job.admitted.run_id);
        workdir::write(&dir.join(ROOT_CONFIG_FILE), &job.config.root_config).await?;
        if let Some(saved) = saved_plan {
            workdir::write(&dir.join(PLAN_FILE), &saved.plan).await?;
            workdir::write(&dir.join(LOCK_FILE), &saved.lock_file).await?;
        }
        step!(
            self.checked(job, Command::logged(["init", "-input=false"]), Stage::Init)
                .await
        );
        step!(
            self.checked(job, Command::logged(["validate", "-json"]), Stage::Validate)
                .await
        );
        if job.config.kind.is_plan_only() {
            self.plan_only(job, &dir).await
        } else {
            self.apply(job, saved_plan).await
        }
    }

    /// A plan, preview or drift scan; a plan run also keeps its plan for `PutPlan`.
    async fn plan_only(&self, job: &mut Job<'_>, dir: &Path) -> Result<RunResult, PipelineError> {
        let kind = job.config.kind;
        // Preview and drift plans (and read-only tokens) do not lock the state.
        let no_lock = kind != RunKind::Plan || job.admitted.read_only;
        let mut result = step!(self.plan(job, no_lock).await);
        if kind == RunKind::Plan {
            let plan = workdir::read(&dir.join(PLAN_FILE)).await?;
            let lock_file = workdir::read_optional(&dir.join(LOCK_FILE))
                .await?
                .unwrap_or_default();
            let tags = step!(self.current_tags(job, dir).await);
            result.saved_plan = Some(SavedPlan {
                plan,
                lock_file,
                tags,
            });
        }
        Ok(result)
    }

    /// An apply or a destroy, then the root outputs. An apply with no saved plan (a resource
    /// being created, or attempt 2+ of an apply whose first attempt may have used it) plans
    /// afresh and applies exactly that plan, so the result carries its summary: a saved plan
    /// is never applied twice.
    async fn apply(
        &self,
        job: &mut Job<'_>,
        saved_plan: Option<&SavedPlan>,
    ) -> Result<RunResult, PipelineError> {
        let kind = job.config.kind;
        let mut replanned = None;
        let mut stale_tags = Vec::new();
        let mut apply_fresh_plan = false;
        if kind == RunKind::Apply && saved_plan.is_none() {
            if job.admitted.attempt > 1 {
                let note = format!(
                    "attempt {}: planning afresh (an earlier attempt was interrupted)",
                    job.admitted.attempt
                );
                self.note(job, &note).await;
            }
            replanned = Some(step!(self.plan(job, false).await));
            apply_fresh_plan = true;
        }
        if let Some(saved) = saved_plan
            && kind == RunKind::Apply
        {
            let dir = self.exec.work_dir(&job.admitted.run_id);
            let now = step!(self.current_tags(job, &dir).await);
            stale_tags = saved.tags.changed(&now);
            if !stale_tags.is_empty() {
                let which = stale_tags.join(", ");
                match StalePlanPolicy::for_environment(&job.config.environment) {
                    StalePlanPolicy::Fail => {
                        let mut failed = RunResult::failed(
                            ErrorClass::StalePlan,
                            format!(
                                "the saved plan is stale ({which} changed): nothing was applied"
                            ),
                        );
                        failed.stale_tags = stale_tags;
                        return Ok(failed);
                    }
                    StalePlanPolicy::PlanAgain => {
                        tracing::warn!(changed = %which, "saved plan is stale; planning again");
                        let warning = format!(
                            "warning: the saved plan is stale ({which} changed): planning again before applying"
                        );
                        self.note(job, &warning).await;
                        replanned = Some(step!(self.plan(job, false).await));
                    }
                }
            }
        }

        let mut args = vec!["apply", "-input=false", "-auto-approve"];
        if kind == RunKind::Destroy {
            args.push("-destroy");
        } else if saved_plan.is_some() || apply_fresh_plan {
            args.push(PLAN_FILE);
        }
        step!(self.checked(job, Command::logged(args), Stage::Run).await);
        // Applied: a session STS refuses now only costs the outputs.
        let ran = match self.command(job, Command::quiet(["output", "-json"])).await {
            Err(PipelineError::AwsSession(e)) => {
                tracing::warn!(error = %e.chain(), "no AWS session for `output`");
                None
            }
            other => Some(other?),
        };
        let mut result = RunResult::new(RunOutcome::Succeeded, None, "applied");
        result.stale_tags = stale_tags;
        if let Some(replanned) = replanned {
            result.message = if saved_plan.is_some() {
                "planned again and applied".into()
            } else {
                "planned and applied".into()
            };
            result.summary = replanned.summary;
            result.masked_plan = replanned.masked_plan;
        }
        if let Some(ran) = ran.filter(|ran| ran.outcome.success()) {
            result.outputs = public_outputs(&ran.stdout.concat());
        } else {
            result.message = "applied; the outputs could not be read".into();
        }
        Ok(result)
    }

    /// Runs `command`; a failure ends the run.
    async fn checked(&self, job: &mut Job<'_>, command: Command, stage: Stage) -> Step<Ran> {
        let what = command.name().to_owned();
        let ran = self.command(job, command).await?;
        Ok(match failure(&ran, &what, stage) {
            Some(failed) => Err(failed),
            None => Ok(ran),
        })
    }

    /// `plan -out` and `show -json`: the summary and masked plan, or the failed result.
    async fn plan(&self, job: &mut Job<'_>, no_lock: bool) -> Step<RunResult> {
        let mut args = vec![
            "plan".to_owned(),
            "-input=false".to_owned(),
            format!("-out={PLAN_FILE}"),
            "-detailed-exitcode".to_owned(),
        ];
        if no_lock {
            args.push("-lock=false".to_owned());
        }
        let ran = self.command(job, Command::logged(args)).await?;
        // -detailed-exitcode: 2 is success with changes.
        if (ran.outcome.exit_code != Some(2) || ran.outcome.stopped())
            && let Some(failed) = failure(&ran, "plan", Stage::Run)
        {
            return Ok(Err(failed));
        }
        let show = Command::quiet(["show", "-json", PLAN_FILE]);
        let ran = match self.checked(job, show, Stage::Run).await? {
            Ok(ran) => ran,
            Err(failed) => return Ok(Err(failed)),
        };
        let plan_json = ran.stdout.concat();
        let (summary, masked_plan) = plan_view(&plan_json);
        let mut result = RunResult::new(RunOutcome::Succeeded, None, "planned");
        result.summary = Some(summary);
        if job.config.kind.is_plan_only() {
            result.drift_findings = drift_findings(&plan_json);
        }
        result.masked_plan = masked_plan;
        Ok(Ok(result))
    }

    /// The tags of what a plan made now in the work directory `dir` is made from.
    async fn current_tags(&self, job: &mut Job<'_>, dir: &Path) -> Step<PlanTags> {
        let version = Command::quiet(["version", "-json"]);
        let ran = match self.checked(job, version, Stage::Run).await? {
            Ok(ran) => ran,
            Err(failed) => return Ok(Err(failed)),
        };
        let tofu_version = plan_tags::tofu_version(&ran.stdout.concat()).unwrap_or_default();
        let lock_file = workdir::read_optional(&dir.join(LOCK_FILE))
            .await?
            .unwrap_or_default();
        Ok(Ok(PlanTags {
            config_hash: job.config.config_hash.clone(),
            base_generation: job.admitted.base_generation,
            tofu_version,
            provider_lock_hash: plan_tags::sha256_hex(&lock_file),
            module_library_hash: plan_tags::module_library_hash(&self.settings.module_library)?,
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn stale_plans_fail_in_production_by_any_of_its_names() {
        let policy =
            |name: &str| StalePlanPolicy::for_environment(&Environment::parse(name).unwrap());
        for name in ["production", "prod", "Production", "PROD", " Prod "] {
            assert_eq!(policy(name), StalePlanPolicy::Fail, "{name}");
        }
        for name in ["staging", "dev", "preprod", "production-eu"] {
            assert_eq!(policy(name), StalePlanPolicy::PlanAgain, "{name}");
        }
    }
}
