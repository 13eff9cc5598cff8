//! The deployment workflow, a saga (STYLE.md "Workflows"): a job names a deployment; the
//! worker reads everything else from its tables and resumes where the deployment is. Every
//! step transition is a transaction guarded by a compare-and-set on the step's status; each
//! run's registration is persisted before it is sent, so a redelivered job re-sends the same
//! bytes and a converged resource is never applied twice.
//!
//! Phases of a DEPLOY: plan (plans of changed resources, probes of converged ones), approval
//! (production with high or unknown risk, or a resource that could not be planned, parks the
//! deployment AWAITING_APPROVAL: no job, no slot), apply (the DAG, bounded parallelism),
//! destroys of removed resources (reverse order), verify, finish. A DESTROY: approval (in
//! production), destroys in reverse order. A PREVIEW: the plan phase with read-only runs.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use cairn_contract::Environment;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::OnceCell;
use uuid::Uuid;

use super::App;
use super::events;
use crate::domain::workflow::{NO_CHANGES, PlanSetEntry, approval_needed, plan_set_hash};
use crate::domain::{DeploymentKind, DeploymentStatus, InstanceStatus, StepKind, StepStatus};
use crate::error::{Error, Result};
use crate::peers::TargetInfo;
use crate::store::deployments::{self as dstore, DeploymentRow};
use crate::store::instances::{self, ResourceRow};
use crate::store::runs::{self, RunRow};
use crate::store::slots;
use crate::store::steps::{self, StepRow};

mod drive;
pub mod runs_io;
pub mod wakers;

pub use runs_io::result_row;

/// The workflow's settings (from the service's config).
#[derive(Debug, Clone)]
pub struct FlowSettings {
    pub parallelism: usize,
    pub retries: u32,
    pub retry_backoff: Duration,
    pub admit_timeout: Duration,
    pub approval_ttl: Duration,
    /// How often a waiting step looks at its run's row without being woken.
    pub result_poll: Duration,
    /// After how long without a result the coordinator is asked (and cancels re-sent).
    pub result_fallback: Duration,
    /// How long a deployment over its target's slot limit waits before its job is tried
    /// again.
    pub slot_wait: Duration,
}

impl FlowSettings {
    /// Steps of a phase driven at once: as many again as runs may be in flight, so when a
    /// run ends, the next is rendered, persisted and registered already and needs only its
    /// request (its step stays PENDING until then).
    pub fn drivers(&self) -> usize {
        self.parallelism.saturating_mul(2)
    }
}

/// What became of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    /// Finished, parked for approval or nothing to do: acknowledge it.
    Done,
    /// Over the target's slot limit: deliver it again after this.
    Wait(Duration),
}

/// A deployment being worked on, with what its steps need.
pub struct Job {
    pub d: DeploymentRow,
    pub kind: DeploymentKind,
    pub target: TargetInfo,
    pub production: bool,
    /// The snapshot it converges to (deploy and preview).
    pub snapshot: Option<cairn_templating::Snapshot>,
    /// The instance's resources as recorded before and during this deployment.
    pub resources: BTreeMap<String, ResourceRow>,
    /// What the coordinator answered that holds for the rest of the job.
    pub cache: Arc<JobCache>,
    /// One per run in flight (`parallelism` of them): a run takes one before it is
    /// requested and holds it until its result. Steps beyond that prepare their runs
    /// meanwhile ([`FlowSettings::drivers`]).
    pub runs: tokio::sync::Semaphore,
}

/// Outputs of a state, as the renderer reads them.
pub type Outputs = BTreeMap<String, serde_json::Value>;

/// A job's memory of coordinator answers, so a step's render does not ask again: only a
/// cache (a resumed job starts with an empty one and asks).
/// - The state id of a physical name: a state is created once per key and never removed,
///   so the id never changes. The apply phase creates the states of its steps ahead
///   (`App::warm_states`), so a step's render does not wait for its `CreateState`.
/// - The outputs of a state, read in the current phase: nothing changes an upstream's
///   outputs during the plan phase (nothing applies), and in the apply phase they are read
///   only once its apply run succeeded, after which nothing in this deployment (the only
///   active one of the instance) writes its state again. Forgotten when the apply phase
///   starts. One read per state: readers of a state being read wait for that read.
///   One creation per name: steps asking for a state being created wait for it.
#[derive(Debug, Default)]
pub struct JobCache {
    states: Mutex<HashMap<String, Arc<OnceCell<Uuid>>>>,
    outputs: Mutex<HashMap<Uuid, Arc<OnceCell<Outputs>>>>,
}

impl JobCache {
    /// A panic elsewhere cannot leave these maps half-written (one insert or clear).
    fn states(&self) -> MutexGuard<'_, HashMap<String, Arc<OnceCell<Uuid>>>> {
        self.states.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn outputs_map(&self) -> MutexGuard<'_, HashMap<Uuid, Arc<OnceCell<Outputs>>>> {
        self.outputs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where the state id of `physical_name` is (or will be, once created or read).
    pub fn state(&self, physical_name: &str) -> Arc<OnceCell<Uuid>> {
        Arc::clone(self.states().entry(physical_name.to_owned()).or_default())
    }

    pub fn put_state(&self, physical_name: &str, state_id: Uuid) {
        // A cell already set holds the same id (one state per key, never removed).
        let _ = self.state(physical_name).set(state_id);
    }

    /// Where the outputs of `state_id` are (or will be, once read) in this phase.
    pub fn outputs(&self, state_id: Uuid) -> Arc<OnceCell<Outputs>> {
        Arc::clone(self.outputs_map().entry(state_id).or_default())
    }

    fn forget_outputs(&self) {
        self.outputs_map().clear();
    }
}

/// How a step's driver left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driven {
    Ended,
    /// Needs an approval of its new plan first (the step stays RUNNING).
    Parked,
    /// A cancel was asked for and the step did not start anything new.
    Cancelled,
}

/// The drivers of a phase's steps in flight. One task (the job's) polls them all, so it
/// must not await anything else without polling them too: [`Flight::alongside`]. What a
/// driver returns is taken into account as soon as it returns.
struct Flight<F> {
    inflight: FuturesUnordered<F>,
    parked: bool,
    cancelled: bool,
    /// Drivers that returned since this was last reset.
    ended: usize,
}

impl<F: Future<Output = Result<Driven>>> Flight<F> {
    fn new() -> Self {
        Flight {
            inflight: FuturesUnordered::new(),
            parked: false,
            cancelled: false,
            ended: 0,
        }
    }

    fn take(&mut self, r: Result<Driven>) -> Result<()> {
        self.ended += 1;
        match r? {
            Driven::Parked => self.parked = true,
            Driven::Cancelled => self.cancelled = true,
            Driven::Ended => {}
        }
        Ok(())
    }

    /// Awaits `work` while the drivers go on.
    async fn alongside<T>(&mut self, work: impl Future<Output = Result<T>>) -> Result<T> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                biased;
                out = &mut work => return out,
                Some(r) = self.inflight.next(), if !self.inflight.is_empty() => self.take(r)?,
            }
        }
    }

    /// Waits until the next driver returns; false when none is in flight.
    async fn next(&mut self) -> Result<bool> {
        match self.inflight.next().await {
            Some(r) => self.take(r).map(|()| true),
            None => Ok(false),
        }
    }
}

pub(crate) fn ok_status(s: &StepRow) -> bool {
    s.status == StepStatus::Succeeded.as_str()
        || (s.status == StepStatus::Skipped.as_str() && s.reason == NO_CHANGES)
}

fn ended(s: &StepRow) -> bool {
    s.status != StepStatus::Pending.as_str() && s.status != StepStatus::Running.as_str()
}

impl App {
    /// Works on the deployment's job until it ends, parks or must wait for a slot.
    #[tracing::instrument(skip_all, fields(deployment_id = %deployment_id))]
    pub async fn run_job(&self, deployment_id: Uuid) -> Result<JobOutcome> {
        let found = cairn_db::bounded!(&self.pool, |conn| {
            dstore::deployment_by_id(conn, deployment_id).await
        })?;
        let Some(d) = found else {
            return Ok(JobOutcome::Done);
        };
        let status =
            DeploymentStatus::parse(&d.status).map_err(|e| Error::internal(e.to_string()))?;
        let kind = DeploymentKind::parse(&d.kind).map_err(|e| Error::internal(e.to_string()))?;
        if !matches!(status, DeploymentStatus::Queued | DeploymentStatus::Running) {
            // Finished, or parked for approval (Approve enqueues it again).
            return Ok(JobOutcome::Done);
        }
        if d.cancel_requested_at.is_some() && status == DeploymentStatus::Queued {
            self.finish_cancelled(&d, "svc:deployments").await?;
            return Ok(JobOutcome::Done);
        }
        let target = self
            .peers
            .target(
                cairn_contract::TenantId::from(d.tenant_id),
                &crate::domain::Ref::Id(d.target_id),
            )
            .await?;
        let max = i32::try_from(target.max_concurrent_deployments).unwrap_or(i32::MAX);
        let takes_slot = kind != DeploymentKind::Preview && max > 0;
        let from = [
            DeploymentStatus::Queued.as_str(),
            DeploymentStatus::Running.as_str(),
        ];
        let started = cairn_db::transaction!(&self.pool, |conn| {
            if takes_slot && !slots::slot_take(conn, d.target_id, d.deployment_id, max).await? {
                return Ok::<_, Error>(None);
            }
            Ok(dstore::deployment_move(
                conn,
                d.deployment_id,
                &from,
                DeploymentStatus::Running.as_str(),
                None,
            )
            .await?)
        })?;
        let Some(d) = started else {
            if takes_slot {
                tracing::debug!("target's deployment slots are taken: waiting");
                return Ok(JobOutcome::Wait(self.flow.slot_wait));
            }
            return Ok(JobOutcome::Done);
        };
        let production = Environment::parse(&d.environment)
            .map(|e| e.is_production())
            .unwrap_or(false);
        let snapshot = match d.snapshot_id {
            Some(id) => Some(self.peers.snapshot_document(id).await?),
            None => None,
        };
        let resources = cairn_db::bounded!(&self.pool, |conn| {
            instances::resources_of(conn, &[d.instance_id]).await
        })?
        .into_iter()
        .map(|r| (r.name.clone(), r))
        .collect();
        let mut job = Job {
            d,
            kind,
            target,
            production,
            snapshot,
            resources,
            cache: Arc::default(),
            runs: tokio::sync::Semaphore::new(self.flow.parallelism),
        };
        match kind {
            DeploymentKind::Deploy => self.deploy(&mut job).await?,
            DeploymentKind::Destroy => self.destroy(&mut job).await?,
            DeploymentKind::Preview => self.preview(&mut job).await?,
        }
        Ok(JobOutcome::Done)
    }

    pub(crate) async fn steps_now(&self, deployment_id: Uuid) -> Result<Vec<StepRow>> {
        Ok(cairn_db::bounded!(&self.pool, |conn| {
            steps::steps_of(conn, deployment_id).await
        })?)
    }

    pub(crate) async fn step_now(&self, step_id: Uuid) -> Result<Option<StepRow>> {
        Ok(cairn_db::bounded!(&self.pool, |conn| {
            steps::step_get(conn, step_id).await
        })?)
    }

    pub(crate) async fn runs_now(&self, deployment_id: Uuid) -> Result<Vec<RunRow>> {
        Ok(cairn_db::bounded!(&self.pool, |conn| {
            runs::runs_of(conn, deployment_id).await
        })?)
    }

    async fn cancel_asked(&self, job: &Job) -> Result<bool> {
        let d = cairn_db::bounded!(&self.pool, |conn| {
            dstore::deployment_by_id(conn, job.d.deployment_id).await
        })?;
        Ok(d.is_some_and(|d| d.cancel_requested_at.is_some()))
    }

    async fn deploy(&self, job: &mut Job) -> Result<()> {
        if self.plan_phase(job).await? == Driven::Cancelled {
            return self.finish_cancelled(&job.d, "svc:deployments").await;
        }
        if self.approval_phase(job).await? {
            return Ok(());
        }
        match self.dag(job, StepKind::Apply).await? {
            Driven::Parked => return self.park_for_replan(job).await,
            Driven::Cancelled => return self.finish_cancelled(&job.d, "svc:deployments").await,
            Driven::Ended => {}
        }
        if self.dag(job, StepKind::Destroy).await? == Driven::Cancelled {
            return self.finish_cancelled(&job.d, "svc:deployments").await;
        }
        if self.dag(job, StepKind::Verify).await? == Driven::Cancelled {
            return self.finish_cancelled(&job.d, "svc:deployments").await;
        }
        self.finish(job).await
    }

    async fn destroy(&self, job: &mut Job) -> Result<()> {
        if self.approval_phase(job).await? {
            return Ok(());
        }
        if self.dag(job, StepKind::Destroy).await? == Driven::Cancelled {
            return self.finish_cancelled(&job.d, "svc:deployments").await;
        }
        self.finish(job).await
    }

    async fn preview(&self, job: &mut Job) -> Result<()> {
        if self.plan_phase(job).await? == Driven::Cancelled {
            return self.finish_cancelled(&job.d, "svc:deployments").await;
        }
        self.finish(job).await
    }

    /// Plans and probes, all at once (bounded); each ends.
    async fn plan_phase(&self, job: &Job) -> Result<Driven> {
        let steps = self.steps_now(job.d.deployment_id).await?;
        let todo: Vec<StepRow> = steps
            .into_iter()
            .filter(|s| (s.kind == "plan" || s.kind == "probe") && !ended(s))
            .collect();
        let mut flight = Flight::new();
        let mut queue = todo.into_iter();
        loop {
            flight.ended = 0;
            while flight.inflight.len() < self.flow.drivers() && !flight.cancelled {
                let Some(s) = queue.next() else { break };
                if flight.alongside(self.cancel_asked(job)).await? {
                    flight.cancelled = true;
                    break;
                }
                flight.inflight.push(self.drive_plan(job, s));
            }
            if flight.ended == 0 && !flight.next().await? {
                break;
            }
        }
        let cancelled = flight.cancelled;
        drop(flight);
        Ok(if cancelled || self.cancel_asked(job).await? {
            Driven::Cancelled
        } else {
            Driven::Ended
        })
    }

    pub(crate) fn plan_set_of(
        steps: &[StepRow],
        all_runs: &[RunRow],
    ) -> (Vec<PlanSetEntry>, Vec<Uuid>) {
        Self::plan_set(steps, all_runs)
    }

    /// The latest successful plan run of each resource (plan steps, and apply steps that
    /// planned again): what an approval is bound to.
    fn plan_set(steps: &[StepRow], all_runs: &[RunRow]) -> (Vec<PlanSetEntry>, Vec<Uuid>) {
        let mut latest: BTreeMap<String, &RunRow> = BTreeMap::new();
        for s in steps
            .iter()
            .filter(|s| s.kind == "plan" || s.kind == "apply")
        {
            for r in all_runs.iter().filter(|r| {
                r.step_id == s.step_id
                    && r.kind == "plan"
                    && r.outcome.as_deref() == Some("succeeded")
            }) {
                let newer = latest
                    .get(&s.resource)
                    .is_none_or(|l| l.created_at_key() < r.created_at_key());
                if newer {
                    latest.insert(s.resource.clone(), r);
                }
            }
        }
        let entries = latest
            .iter()
            .map(|(resource, r)| PlanSetEntry {
                resource: resource.clone(),
                plan_run_id: r.run_id.to_string(),
                plan_sha256: r.plan_sha256.clone().unwrap_or_default(),
                base_generation: u64::try_from(r.base_generation.unwrap_or(0)).unwrap_or(0),
            })
            .collect();
        let ids = latest.values().map(|r| r.run_id).collect();
        (entries, ids)
    }

    /// Decides the approval step; true when the deployment was parked.
    async fn approval_phase(&self, job: &Job) -> Result<bool> {
        let steps = self.steps_now(job.d.deployment_id).await?;
        let Some(approval) = steps.iter().find(|s| s.kind == "approval") else {
            return Ok(false);
        };
        if ended(approval) {
            return Ok(false);
        }
        let all_runs = self.runs_now(job.d.deployment_id).await?;
        let (entries, hash, decision) = if job.kind == DeploymentKind::Destroy {
            let entries: Vec<PlanSetEntry> = steps
                .iter()
                .filter(|s| s.kind == "destroy")
                .filter_map(|s| job.resources.get(&s.resource))
                .map(|r| PlanSetEntry {
                    resource: r.name.clone(),
                    plan_run_id: r
                        .last_applied_run_id
                        .map(|u| u.to_string())
                        .unwrap_or_default(),
                    plan_sha256: "destroy".to_owned(),
                    base_generation: u64::try_from(r.last_generation).unwrap_or(0),
                })
                .collect();
            let hash = plan_set_hash(&entries);
            let decision = if job.production {
                Ok(format!(
                    "destroying every resource of production instance {}",
                    job.d.instance_name
                ))
            } else {
                Err(format!(
                    "environment {} is not production: no approval needed",
                    job.d.environment
                ))
            };
            (entries, hash, decision)
        } else {
            let (entries, _) = Self::plan_set(&steps, &all_runs);
            let hash = plan_set_hash(&entries);
            let mut risks = Vec::new();
            let mut unplannable = Vec::new();
            for s in steps
                .iter()
                .filter(|s| s.kind == "plan" || s.kind == "probe")
            {
                if s.status == StepStatus::Failed.as_str() {
                    unplannable.push(s.resource.clone());
                    continue;
                }
                if s.kind == "plan"
                    && let Some(r) = all_runs.iter().rev().find(|r| {
                        r.step_id == s.step_id
                            && r.kind == "plan"
                            && r.outcome.as_deref() == Some("succeeded")
                    })
                {
                    let f = runs_io::facts(r);
                    if f.has_changes() {
                        risks.push((s.resource.clone(), f.risk));
                    }
                }
            }
            let decision =
                approval_needed(job.production, &job.d.environment, &risks, &unplannable);
            (entries, hash, decision)
        };
        let _ = entries;
        match decision {
            Ok(why) => {
                self.park(job, &hash, &why).await?;
                Ok(true)
            }
            Err(why) => {
                let (deployment_id, step_id) = (job.d.deployment_id, approval.step_id);
                cairn_db::transaction!(&self.pool, |conn| {
                    dstore::deployment_set_hash(conn, deployment_id, &hash).await?;
                    steps::step_end(conn, step_id, StepStatus::Skipped.as_str(), &why, "").await?;
                    Ok::<_, Error>(())
                })?;
                Ok(false)
            }
        }
    }

    /// Parks the running deployment for approval of `hash`: no job, no slot.
    async fn park(&self, job: &Job, hash: &str, why: &str) -> Result<()> {
        let deployment_id = job.d.deployment_id;
        let from = [DeploymentStatus::Running.as_str()];
        let parked = cairn_db::transaction!(&self.pool, |conn| {
            let Some(row) = dstore::deployment_move(
                conn,
                deployment_id,
                &from,
                DeploymentStatus::AwaitingApproval.as_str(),
                Some(hash),
            )
            .await?
            else {
                return Ok::<_, Error>(false);
            };
            slots::slot_release(conn, deployment_id).await?;
            let steps = steps::steps_of(conn, deployment_id).await?;
            events::deployment(conn, &row, &steps, "awaiting_approval", "svc:deployments").await?;
            Ok(true)
        })?;
        if parked {
            self.committed();
            tracing::info!(%deployment_id, plan_set_hash = %hash, why, "deployment awaits approval");
        }
        Ok(())
    }

    /// A production step planned again with a high or unknown risk: park for an approval
    /// bound to the new plans.
    async fn park_for_replan(&self, job: &Job) -> Result<()> {
        let steps = self.steps_now(job.d.deployment_id).await?;
        let all_runs = self.runs_now(job.d.deployment_id).await?;
        let (entries, _) = Self::plan_set(&steps, &all_runs);
        let hash = plan_set_hash(&entries);
        self.park(
            job,
            &hash,
            "a resource planned again in the apply phase with high or unknown risk",
        )
        .await
    }

    /// Runs the steps of `kind` as a DAG: a step starts when every step it depends on (of
    /// the same kind) ended well; one whose dependency failed is skipped saying which. The
    /// steps in flight go on while the scheduler reads and writes (see [`alongside`]), and
    /// a step's dependents start as soon as its driver returns.
    async fn dag(&self, job: &mut Job, kind: StepKind) -> Result<Driven> {
        let _warming = if kind == StepKind::Apply {
            // Upstreams apply now: outputs read before are not theirs any more.
            job.cache.forget_outputs();
            Some(self.warm_states(job))
        } else {
            None
        };
        let mut started: HashSet<Uuid> = HashSet::new();
        let mut flight = Flight::new();
        loop {
            flight.ended = 0;
            // The steps and the cancel flag, read at once.
            let (steps, cancel) = flight
                .alongside(futures::future::try_join(
                    self.steps_now(job.d.deployment_id),
                    self.cancel_asked(job),
                ))
                .await?;
            let mine: Vec<&StepRow> = steps.iter().filter(|s| s.kind == kind.as_str()).collect();
            let by_name: BTreeMap<&str, &StepRow> =
                mine.iter().map(|s| (s.resource.as_str(), *s)).collect();
            let mut progressed = false;
            if cancel && !flight.parked {
                flight.cancelled = true;
            }
            for s in &mine {
                if ended(s) || started.contains(&s.step_id) {
                    continue;
                }
                let mut waiting = false;
                let mut failed_dep = None;
                if kind != StepKind::Verify {
                    for dep in &s.depends_on {
                        match by_name.get(dep.as_str()) {
                            Some(u) if !ended(u) => waiting = true,
                            Some(u) if !ok_status(u) => {
                                failed_dep = Some(dep.clone());
                                break;
                            }
                            _ => {}
                        }
                    }
                }
                if let Some(dep) = failed_dep.filter(|_| !flight.cancelled) {
                    let reason = if kind == StepKind::Destroy {
                        format!("dependent {dep} was not destroyed")
                    } else {
                        format!("upstream {dep} failed")
                    };
                    let skip = async {
                        cairn_db::bounded!(&self.pool, |conn| {
                            steps::step_end(
                                conn,
                                s.step_id,
                                StepStatus::Skipped.as_str(),
                                &reason,
                                "",
                            )
                            .await
                        })?;
                        Ok(())
                    };
                    flight.alongside(skip).await?;
                    progressed = true;
                    continue;
                }
                if waiting
                    || flight.parked
                    || flight.cancelled
                    || flight.inflight.len() >= self.flow.drivers()
                {
                    continue;
                }
                started.insert(s.step_id);
                let step = (*s).clone();
                flight.inflight.push(self.drive(job, step, kind));
            }
            // Steps that ended while the scheduler worked: look again at once; else wait
            // for the next one to end.
            if flight.ended == 0 && !flight.next().await? && !progressed {
                break;
            }
        }
        let (parked, cancelled) = (flight.parked, flight.cancelled);
        drop(flight);
        // What applied is known again for the next phase.
        let instance_id = job.d.instance_id;
        job.resources = cairn_db::bounded!(&self.pool, |conn| {
            instances::resources_of(conn, &[instance_id]).await
        })?
        .into_iter()
        .map(|r| (r.name.clone(), r))
        .collect();
        Ok(if cancelled {
            Driven::Cancelled
        } else if parked {
            Driven::Parked
        } else {
            Driven::Ended
        })
    }

    /// Ends the deployment from its steps: SUCCEEDED when none failed, else FAILED with a
    /// summary of what applied, failed and was skipped.
    async fn finish(&self, job: &Job) -> Result<()> {
        let steps = self.steps_now(job.d.deployment_id).await?;
        let failed: Vec<String> = steps
            .iter()
            .filter(|s| s.status == StepStatus::Failed.as_str())
            .map(|s| format!("{} {}", s.kind, s.resource))
            .collect();
        let skipped_bad: Vec<String> = steps
            .iter()
            .filter(|s| {
                s.status == StepStatus::Skipped.as_str() && s.reason.starts_with("upstream")
            })
            .map(|s| s.resource.clone())
            .collect();
        let applied: Vec<&str> = steps
            .iter()
            .filter(|s| (s.kind == "apply" || s.kind == "destroy") && s.status == "succeeded")
            .map(|s| s.resource.as_str())
            .collect();
        let ok = failed.is_empty() && skipped_bad.is_empty();
        let verb = if job.kind == DeploymentKind::Destroy {
            "destroyed"
        } else {
            "applied"
        };
        let mut summary = format!("{verb} {}", applied.len());
        if !applied.is_empty() {
            summary.push_str(&format!(" ({})", applied.join(", ")));
        }
        if !failed.is_empty() {
            summary.push_str(&format!("; failed: {}", failed.join(", ")));
        }
        if !skipped_bad.is_empty() {
            summary.push_str(&format!("; skipped: {}", skipped_bad.join(", ")));
        }
        if job.kind == DeploymentKind::Preview {
            let planned = steps
                .iter()
                .filter(|s| s.kind == "plan" || s.kind == "probe")
                .count();
            summary = format!("previewed {planned} resources");
            if !failed.is_empty() {
                summary.push_str(&format!("; failed: {}", failed.join(", ")));
            }
        }
        let status = if ok {
            DeploymentStatus::Succeeded
        } else {
            DeploymentStatus::Failed
        };
        let instance = match (job.kind, ok) {
            (DeploymentKind::Deploy, true) => {
                Some((InstanceStatus::Active, Some(job.d.snapshot_id)))
            }
            (DeploymentKind::Destroy, true) => Some((InstanceStatus::Destroyed, Some(None))),
            (DeploymentKind::Preview, _) => None,
            (_, false) => Some((InstanceStatus::Failed, None)),
        };
        let from = [DeploymentStatus::Running.as_str()];
        self.finish_with(
            &job.d,
            &from,
            status,
            &summary,
            instance,
            StepStatus::Skipped,
            "svc:deployments",
        )
        .await
    }

    /// Ends a deployment CANCELLED: its open steps CANCELLED, the instance back to what it
    /// was (or FAILED when something was applied or destroyed meanwhile).
    pub(crate) async fn finish_cancelled(&self, d: &DeploymentRow, actor: &str) -> Result<()> {
        // The cancel request (and its reason) may be newer than the row the job read.
        let current = cairn_db::bounded!(&self.pool, |conn| {
            dstore::deployment_by_id(conn, d.deployment_id).await
        })?;
        let d = current.as_ref().unwrap_or(d);
        let steps = self.steps_now(d.deployment_id).await?;
        let changed = steps
            .iter()
            .any(|s| (s.kind == "apply" || s.kind == "destroy") && s.status == "succeeded");
        let reason = if d.cancel_reason.is_empty() {
            "cancelled".to_owned()
        } else {
            d.cancel_reason.clone()
        };
        let kind = DeploymentKind::parse(&d.kind).map_err(|e| Error::internal(e.to_string()))?;
        let before = InstanceStatus::parse(&d.instance_status_before)
            .map_err(|e| Error::internal(e.to_string()))?;
        let instance = match kind {
            DeploymentKind::Preview => None,
            _ if changed => Some((InstanceStatus::Failed, None)),
            _ => Some((before, None)),
        };
        let from = [
            DeploymentStatus::Queued.as_str(),
            DeploymentStatus::Running.as_str(),
        ];
        self.finish_with(
            d,
            &from,
            DeploymentStatus::Cancelled,
            &reason,
            instance,
            StepStatus::Cancelled,
            actor,
        )
        .await
    }

    /// The one terminal transition: the deployment (compare-and-set from an active
    /// status), its open steps, its slot, its instance and its event, in one transaction.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn finish_with(
        &self,
        d: &DeploymentRow,
        from: &[&str],
        status: DeploymentStatus,
        summary: &str,
        instance: Option<(InstanceStatus, Option<Option<Uuid>>)>,
        open_steps: StepStatus,
        actor: &str,
    ) -> Result<()> {
        let open_reason = match open_steps {
            StepStatus::Cancelled => summary.to_owned(),
            _ => format!("not run: the deployment {status}"),
        };
        let event = status.as_str().to_owned();
        let finished = cairn_db::transaction!(&self.pool, |conn| {
            let Some(row) =
                dstore::deployment_finish(conn, d.deployment_id, from, status.as_str(), summary)
                    .await?
            else {
                return Ok::<_, Error>(false);
            };
            steps::steps_end_open(conn, d.deployment_id, open_steps.as_str(), &open_reason).await?;
            slots::slot_release(conn, d.deployment_id).await?;
            if let Some((st, snapshot)) = instance
                && !instances::instance_finish(
                    conn,
                    d.instance_id,
                    d.deployment_id,
                    st.as_str(),
                    snapshot,
                )
                .await?
            {
                tracing::warn!(instance_id = %d.instance_id, "the deployment did not hold its instance");
            }
            let steps = steps::steps_of(conn, d.deployment_id).await?;
            events::deployment(conn, &row, &steps, &event, actor).await?;
            Ok(true)
        })?;
        if finished {
            metrics::counter!(crate::metrics::FINISHED, "status" => status.as_str()).increment(1);
            self.committed();
            tracing::info!(deployment_id = %d.deployment_id, %status, summary, "deployment finished");
        }
        Ok(())
    }
}

impl RunRow {
    /// Orders runs of a deployment by when they were made (run ids are time-ordered).
    fn created_at_key(&self) -> Uuid {
        self.run_id
    }
}
