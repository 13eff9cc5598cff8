//! The step drivers: each reads its step's runs and does the next thing (start a run, wait
//! for it, end the step), so a resumed job continues exactly where the last one stopped.
//! Every end of a step is a compare-and-set on its status, in one transaction with what it
//! records (the plan summary, the instance's resource, the resource event).
use std::sync::Arc;

use cairn_proto::state as spb;
use cairn_templating::render::{UpstreamOutputs, render};
use cairn_templating::snapshot::ResolvedResource;
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;
use uuid::Uuid;

use super::runs_io::{RunSpec, ending, facts};
use super::{Driven, Job, Outputs, ok_status};
use crate::app::{App, events};
use crate::domain::workflow::{Ending, GONE, INTERRUPTED, NO_CHANGES, PlanFacts, backoff, retried};
use crate::domain::{DeploymentKind, StepKind, StepStatus};
use crate::error::{Error, Result};
use crate::store::instances::{self, ResourceUpdate};
use crate::store::runs::{self, RunRow};
use crate::store::steps::{self, StepPlan, StepRow};

/// A rendered root config of a resource and the state it goes to.
struct Rendered {
    state_id: Uuid,
    tf_json: Vec<u8>,
    config_hash: String,
}

fn failure_text(r: &RunRow) -> String {
    let m = r.message.as_deref().unwrap_or("").trim();
    let class = r.error_class.as_deref().unwrap_or("");
    match (m.is_empty(), class.is_empty()) {
        (true, true) => r.outcome.clone().unwrap_or_default(),
        (true, false) => class.to_owned(),
        (false, _) => m.to_owned(),
    }
}

fn jitter() -> f64 {
    f64::from(Uuid::new_v4().as_u128() as u16) / 65536.0
}

impl App {
    fn resource_of<'a>(&self, job: &'a Job, name: &str) -> Result<&'a ResolvedResource> {
        job.snapshot
            .as_ref()
            .and_then(|s| s.resource(name))
            .ok_or_else(|| Error::internal(format!("resource {name:?} is not in the snapshot")))
    }

    fn context(&self, job: &Job, r: &ResolvedResource) -> spb::ExecutionContext {
        spb::ExecutionContext {
            tenant_id: job.d.tenant_id.to_string(),
            target_id: job.d.target_id.to_string(),
            target_settings: job.target.settings.clone().into_iter().collect(),
            credential_ref: job.target.credential_ref.clone(),
            sensitive_variable_refs: r.sensitive_variables.clone().into_iter().collect(),
        }
    }

    /// The state of a resource's physical name (the job's cache, else the coordinator).
    async fn state_of(&self, job: &Job, physical_name: &str) -> Result<Uuid> {
        let cell = job.cache.state(physical_name);
        let id = cell
            .get_or_try_init(|| {
                self.coord
                    .state_for(job.d.tenant_id, job.d.instance_id, physical_name)
            })
            .await?;
        Ok(*id)
    }

    /// Creates (idempotently) the states of the snapshot's new resources, one at a time
    /// in the snapshot's order, while the phase goes on: a step renders once its
    /// upstreams applied, and then finds its own state's id waiting. One at a time: each
    /// creation asks the key manager for the state's config key, and more at once slowed
    /// the first runs' own `CreateState`, `RegisterRun` and admission (README, Benchmarks).
    /// Stops when the returned handle is dropped (the phase ended); a creation that fails
    /// here is tried again by the step itself.
    pub(super) fn warm_states(&self, job: &Job) -> AbortOnDropHandle<()> {
        // Resources that have a state already (applied before) are left to their steps.
        let names: Vec<String> = job
            .snapshot
            .iter()
            .flat_map(|s| s.resources.iter())
            .filter(|r| {
                job.resources
                    .get(&r.name)
                    .is_none_or(|x| x.state_id.is_none())
            })
            .map(|r| r.physical_name.clone())
            .collect();
        let (cache, coord) = (Arc::clone(&job.cache), self.coord.clone());
        let (tenant, instance) = (job.d.tenant_id, job.d.instance_id);
        let span =
            tracing::info_span!(parent: None, "warm_states", deployment_id = %job.d.deployment_id);
        let work = async move {
            for name in names {
                let cell = cache.state(&name);
                let created = cell
                    .get_or_try_init(|| coord.state_for(tenant, instance, &name))
                    .await;
                if let Err(err) = created {
                    tracing::debug!(error = %cairn_bus::Chain(&err), state = %name, "creating a state ahead failed; its step creates it");
                }
            }
        };
        AbortOnDropHandle::new(tokio::spawn(work.instrument(span)))
    }

    /// The current outputs of a state (the job's cache, else the coordinator).
    async fn outputs_of(&self, job: &Job, state_id: Uuid) -> Result<Outputs> {
        let cell = job.cache.outputs(state_id);
        let outputs = cell
            .get_or_try_init(|| self.coord.outputs(state_id))
            .await?;
        Ok(outputs.clone())
    }

    /// Starts reading the outputs of a resource whose apply just succeeded, when a
    /// resource of the snapshot takes inputs from it: the read goes on while its step
    /// ends and its dependents start, which then wait for it (or read again, should it
    /// fail).
    fn warm_outputs(&self, job: &Job, r: &ResolvedResource, state_id: Uuid) {
        job.cache.put_state(&r.physical_name, state_id);
        let wanted = job
            .snapshot
            .as_ref()
            .is_some_and(|s| s.resources.iter().any(|x| x.depends_on.contains(&r.name)));
        if !wanted {
            return;
        }
        let cell = job.cache.outputs(state_id);
        let (coord, name) = (self.coord.clone(), r.name.clone());
        let span = tracing::info_span!(
            parent: None,
            "warm_outputs",
            deployment_id = %job.d.deployment_id,
            resource = %name,
            %state_id
        );
        tokio::spawn(
            async move {
                if let Err(err) = cell.get_or_try_init(|| coord.outputs(state_id)).await {
                    tracing::debug!(error = %cairn_bus::Chain(&err), "reading outputs ahead failed; the dependents read them again");
                }
            }
            .instrument(span),
        );
    }

    /// Renders `r` with its upstreams' current outputs (read at once, from the job's
    /// cache or the coordinator).
    async fn render(
        &self,
        job: &Job,
        r: &ResolvedResource,
    ) -> Result<std::result::Result<Rendered, String>> {
        let reads = r.depends_on.iter().map(|dep| async move {
            let spec = self.resource_of(job, dep)?;
            let state = self.state_of(job, &spec.physical_name).await?;
            Ok::<_, Error>((dep.clone(), self.outputs_of(job, state).await?))
        });
        // Its own state alongside (created on first use: the run goes to it).
        let (upstream, state_id) = futures::future::try_join(
            futures::future::try_join_all(reads),
            self.state_of(job, &r.physical_name),
        )
        .await?;
        let upstream: UpstreamOutputs = upstream.into_iter().collect();
        let rendered = match render(r, &upstream) {
            Ok(x) => x,
            Err(e) => return Ok(Err(format!("cannot render the root config: {e}"))),
        };
        Ok(Ok(Rendered {
            state_id,
            tf_json: rendered.tf_json.into_bytes(),
            config_hash: rendered.config_hash,
        }))
    }

    /// The step's runs, by sequence.
    async fn step_runs(&self, step: &StepRow) -> Result<Vec<RunRow>> {
        Ok(cairn_db::bounded!(&self.pool, |conn| {
            runs::runs_of_step(conn, step.step_id).await
        })?)
    }

    async fn end_step(
        &self,
        step: &StepRow,
        status: StepStatus,
        reason: &str,
        class: &str,
    ) -> Result<()> {
        cairn_db::bounded!(&self.pool, |conn| {
            steps::step_end(conn, step.step_id, status.as_str(), reason, class).await
        })?;
        Ok(())
    }

    async fn end_with_plan(
        &self,
        step: &StepRow,
        f: &PlanFacts,
        status: StepStatus,
        reason: &str,
    ) -> Result<()> {
        let step_id = step.step_id;
        let risk = f.risk.as_str();
        let replaced = f.replace.clone();
        let (add, change, destroy) = (
            i32::try_from(f.add).unwrap_or(i32::MAX),
            i32::try_from(f.change).unwrap_or(i32::MAX),
            i32::try_from(f.destroy).unwrap_or(i32::MAX),
        );
        cairn_db::transaction!(&self.pool, |conn| {
            steps::step_plan(
                conn,
                step_id,
                &StepPlan {
                    add,
                    change,
                    destroy,
                    replaced: &replaced,
                    risk,
                },
            )
            .await?;
            steps::step_end(conn, step_id, status.as_str(), reason, "").await?;
            Ok::<_, Error>(())
        })?;
        Ok(())
    }

    async fn record_plan(&self, step: &StepRow, f: &PlanFacts) -> Result<()> {
        let plan = StepPlan {
            add: i32::try_from(f.add).unwrap_or(i32::MAX),
            change: i32::try_from(f.change).unwrap_or(i32::MAX),
            destroy: i32::try_from(f.destroy).unwrap_or(i32::MAX),
            replaced: &f.replace,
            risk: f.risk.as_str(),
        };
        cairn_db::bounded!(&self.pool, |conn| {
            steps::step_plan(conn, step.step_id, &plan).await
        })?;
        Ok(())
    }

    /// A plan or probe step of the plan phase.
    pub(super) async fn drive_plan(&self, job: &Job, step: StepRow) -> Result<Driven> {
        let preview = job.kind == DeploymentKind::Preview;
        loop {
            let runs = self.step_runs(&step).await?;
            let step_kind = self
                .step_now(step.step_id)
                .await?
                .map(|s| s.kind)
                .unwrap_or_else(|| step.kind.clone());
            let tries = i32::try_from(runs.len()).unwrap_or(i32::MAX);
            match runs.last() {
                Some(r) if !r.finished() => {
                    if self.run_go(job, &step, r, tries).await?.is_none() {
                        return Ok(Driven::Cancelled);
                    }
                }
                None => {
                    let r = self.resource_of(job, &step.resource)?;
                    if let Some(dep) = r.depends_on.iter().find(|d| {
                        job.resources
                            .get(*d)
                            .is_none_or(|x| x.last_applied_run_id.is_none())
                    }) {
                        let reason = if preview {
                            format!(
                                "upstream {dep} does not exist yet: it is planned once it is applied"
                            )
                        } else {
                            format!("planned in the apply phase: upstream {dep} is created first")
                        };
                        self.end_step(&step, StepStatus::Skipped, &reason, "")
                            .await?;
                        return Ok(Driven::Ended);
                    }
                    let rendered = match self.render(job, r).await? {
                        Ok(x) => x,
                        Err(why) => {
                            self.end_step(&step, StepStatus::Failed, &why, "config")
                                .await?;
                            return Ok(Driven::Ended);
                        }
                    };
                    let kind = if preview || step_kind == "probe" {
                        spb::RunKind::Preview
                    } else {
                        spb::RunKind::Plan
                    };
                    let spec = RunSpec {
                        kind,
                        state_id: rendered.state_id,
                        root_config: rendered.tf_json,
                        config_hash: rendered.config_hash,
                        context: self.context(job, r),
                        plan_run_id: None,
                    };
                    if self.run_start(job, &step, 0, 1, spec).await?.is_none() {
                        return Ok(Driven::Cancelled);
                    }
                }
                Some(last) => {
                    let e = ending(last);
                    if e == Ending::Succeeded {
                        let f = facts(last);
                        if step_kind == "probe" {
                            if !f.has_changes() {
                                self.end_with_plan(&step, &f, StepStatus::Succeeded, NO_CHANGES)
                                    .await?;
                                return Ok(Driven::Ended);
                            }
                            if preview {
                                self.end_with_plan(
                                    &step,
                                    &f,
                                    StepStatus::Succeeded,
                                    "changed outside Cairn: the next deployment plans it",
                                )
                                .await?;
                                return Ok(Driven::Ended);
                            }
                            // It changed outside Cairn (deleted: a create): a real plan now.
                            cairn_db::bounded!(&self.pool, |conn| {
                                steps::step_probe_to_plan(conn, step.step_id).await
                            })?;
                            let spec = RunSpec {
                                kind: spb::RunKind::Plan,
                                state_id: last.state_id,
                                root_config: last.root_config.clone(),
                                config_hash: last.config_hash.clone(),
                                context: prost::Message::decode(last.context.as_slice())
                                    .map_err(|e| Error::internal(e.to_string()))?,
                                plan_run_id: None,
                            };
                            if self
                                .run_start(job, &step, runs.len(), tries + 1, spec)
                                .await?
                                .is_none()
                            {
                                return Ok(Driven::Cancelled);
                            }
                            continue;
                        }
                        let reason = if f.has_changes() { "" } else { NO_CHANGES };
                        self.end_with_plan(&step, &f, StepStatus::Succeeded, reason)
                            .await?;
                        return Ok(Driven::Ended);
                    }
                    let plan_tries = u32::try_from(runs.len()).unwrap_or(u32::MAX);
                    if retried(e, "plan", false, plan_tries, self.flow.retries) {
                        tokio::time::sleep(backoff(self.flow.retry_backoff, plan_tries, jitter()))
                            .await;
                        let spec = RunSpec {
                            kind: super::runs_io::run_kind(&last.kind),
                            state_id: last.state_id,
                            root_config: last.root_config.clone(),
                            config_hash: last.config_hash.clone(),
                            context: prost::Message::decode(last.context.as_slice())
                                .map_err(|e| Error::internal(e.to_string()))?,
                            plan_run_id: None,
                        };
                        if self
                            .run_start(job, &step, runs.len(), tries + 1, spec)
                            .await?
                            .is_none()
                        {
                            return Ok(Driven::Cancelled);
                        }
                        continue;
                    }
                    let status = if e == Ending::Cancelled {
                        StepStatus::Cancelled
                    } else {
                        StepStatus::Failed
                    };
                    let what = if step_kind == "probe" {
                        "probe"
                    } else {
                        "plan"
                    };
                    self.end_step(
                        &step,
                        status,
                        &format!("{what} failed: {}", failure_text(last)),
                        last.error_class.as_deref().unwrap_or(""),
                    )
                    .await?;
                    return Ok(Driven::Ended);
                }
            }
        }
    }

    pub(super) async fn drive(&self, job: &Job, step: StepRow, kind: StepKind) -> Result<Driven> {
        match kind {
            StepKind::Apply => self.drive_apply(job, step).await,
            StepKind::Destroy => self.drive_destroy(job, step).await,
            StepKind::Verify => self.drive_verify(job, step).await,
            _ => Err(Error::internal(format!(
                "no driver for {kind} steps in a DAG"
            ))),
        }
    }

    /// The plan-phase run this resource's apply can build on: the latest successful plan
    /// of its plan step, or its probe's preview.
    async fn prior_of(&self, job: &Job, resource: &str) -> Result<Option<RunRow>> {
        let step = cairn_db::bounded!(&self.pool, |conn| {
            steps::step_of_resource(conn, job.d.deployment_id, resource, &["plan", "probe"]).await
        })?;
        let Some(s) = step.as_ref() else {
            return Ok(None);
        };
        if s.status != StepStatus::Succeeded.as_str() {
            return Ok(None);
        }
        Ok(self
            .step_runs(s)
            .await?
            .into_iter()
            .rev()
            .find(|r| r.outcome.as_deref() == Some("succeeded")))
    }

    /// The approved plans of the resource (plans an approval bound).
    async fn approved_of(&self, job: &Job, resource: &str) -> Result<Vec<RunRow>> {
        let steps = self.steps_now(job.d.deployment_id).await?;
        let ids: Vec<Uuid> = steps
            .iter()
            .filter(|s| s.resource == resource)
            .map(|s| s.step_id)
            .collect();
        Ok(self
            .runs_now(job.d.deployment_id)
            .await?
            .into_iter()
            .filter(|r| ids.contains(&r.step_id) && r.kind == "plan" && !r.approved_hash.is_empty())
            .collect())
    }

    /// An apply step: apply the saved plan, or plan now (first plan, or the config changed
    /// since the plan phase, or a retry) and apply that; a resource that did not exist
    /// applies without a saved plan.
    async fn drive_apply(&self, job: &Job, step: StepRow) -> Result<Driven> {
        let r = self.resource_of(job, &step.resource)?.clone();
        loop {
            let runs = self.step_runs(&step).await?;
            let applies = runs.iter().filter(|x| x.kind == "apply").count();
            let tries = i32::try_from(applies.max(1)).unwrap_or(i32::MAX);
            let Some(last) = runs.last() else {
                // All three at once: a cancel asked for meanwhile still starts nothing.
                let (cancel, rendered, prior) = futures::future::try_join3(
                    self.cancel_asked(job),
                    self.render(job, &r),
                    self.prior_of(job, &step.resource),
                )
                .await?;
                if cancel {
                    return Ok(Driven::Cancelled);
                }
                let rendered = match rendered {
                    Ok(x) => x,
                    Err(why) => {
                        self.end_step(&step, StepStatus::Failed, &why, "config")
                            .await?;
                        return Ok(Driven::Ended);
                    }
                };
                let exists = job
                    .resources
                    .get(&step.resource)
                    .is_some_and(|x| x.last_applied_run_id.is_some() && x.status != "destroyed");
                let same = prior
                    .as_ref()
                    .filter(|p| p.config_hash == rendered.config_hash);
                let mut spec = RunSpec {
                    kind: spb::RunKind::Plan,
                    state_id: rendered.state_id,
                    root_config: rendered.tf_json,
                    config_hash: rendered.config_hash,
                    context: self.context(job, &r),
                    plan_run_id: None,
                };
                match same {
                    Some(p) if !facts(p).has_changes() => {
                        self.end_step(&step, StepStatus::Skipped, NO_CHANGES, "")
                            .await?;
                        return Ok(Driven::Ended);
                    }
                    Some(p) if p.kind == "plan" => {
                        spec.kind = spb::RunKind::Apply;
                        spec.plan_run_id = Some(p.run_id);
                    }
                    _ if !exists => spec.kind = spb::RunKind::Apply,
                    _ => {}
                }
                if self.run_start(job, &step, 0, 1, spec).await?.is_none() {
                    return Ok(Driven::Cancelled);
                }
                continue;
            };
            if !last.finished() {
                if self.run_go(job, &step, last, tries).await?.is_none() {
                    return Ok(Driven::Cancelled);
                }
                continue;
            }
            let e = ending(last);
            match (last.kind.as_str(), e) {
                ("plan", Ending::Succeeded) => {
                    let f = facts(last);
                    if !f.has_changes() {
                        if applies > 0 {
                            // The failed try applied after all: converged.
                            return self.applied(job, &step, &r, last).await;
                        }
                        self.end_with_plan(&step, &f, StepStatus::Skipped, NO_CHANGES)
                            .await?;
                        return Ok(Driven::Ended);
                    }
                    self.record_plan(&step, &f).await?;
                    if job.production && f.risk.escalates() && last.approved_hash.is_empty() {
                        let approved = self.approved_of(job, &step.resource).await?;
                        if !approved.iter().any(|a| facts(a).same_changes(&f)) {
                            return Ok(Driven::Parked);
                        }
                    }
                    if self.cancel_asked(job).await? {
                        return Ok(Driven::Cancelled);
                    }
                    let spec = RunSpec {
                        kind: spb::RunKind::Apply,
                        state_id: last.state_id,
                        root_config: last.root_config.clone(),
                        config_hash: last.config_hash.clone(),
                        context: prost::Message::decode(last.context.as_slice())
                            .map_err(|e| Error::internal(e.to_string()))?,
                        plan_run_id: Some(last.run_id),
                    };
                    let next_try = i32::try_from(applies + 1).unwrap_or(i32::MAX);
                    if self
                        .run_start(job, &step, runs.len(), next_try, spec)
                        .await?
                        .is_none()
                    {
                        return Ok(Driven::Cancelled);
                    }
                }
                ("apply", Ending::Succeeded) => {
                    // Its dependents render from its outputs next: read them meanwhile.
                    self.warm_outputs(job, &r, last.state_id);
                    return self.applied(job, &step, &r, last).await;
                }
                (kind, e) => {
                    let destructive = match last.plan_run_id {
                        Some(p) => runs
                            .iter()
                            .chain(self.prior_of(job, &step.resource).await?.iter())
                            .find(|x| x.run_id == p)
                            .map(|x| facts(x).destructive())
                            .unwrap_or(true),
                        None => false,
                    };
                    // Every failed run of the step is one try, whichever kind it was (a
                    // retry plans again first, and that plan may fail too).
                    let failures = runs
                        .iter()
                        .filter(|x| x.finished() && ending(x) != Ending::Succeeded)
                        .count();
                    let t = u32::try_from(failures.max(1)).unwrap_or(u32::MAX);
                    if retried(e, kind, destructive, t, self.flow.retries)
                        && !self.cancel_asked(job).await?
                    {
                        tokio::time::sleep(backoff(self.flow.retry_backoff, t, jitter())).await;
                        tracing::info!(resource = %step.resource, tries = t, "retrying a transient failure: planning again");
                        let rendered = match self.render(job, &r).await? {
                            Ok(x) => x,
                            Err(why) => {
                                self.end_step(&step, StepStatus::Failed, &why, "config")
                                    .await?;
                                return Ok(Driven::Ended);
                            }
                        };
                        let spec = RunSpec {
                            kind: spb::RunKind::Plan,
                            state_id: rendered.state_id,
                            root_config: rendered.tf_json,
                            config_hash: rendered.config_hash,
                            context: self.context(job, &r),
                            plan_run_id: None,
                        };
                        let next_try = i32::try_from(failures + 1).unwrap_or(i32::MAX);
                        if self
                            .run_start(job, &step, runs.len(), next_try.max(tries), spec)
                            .await?
                            .is_none()
                        {
                            return Ok(Driven::Cancelled);
                        }
                        continue;
                    }
                    let (status, reason) = match e {
                        Ending::Interrupted if job.production => {
                            (StepStatus::Failed, INTERRUPTED.to_owned())
                        }
                        Ending::Cancelled => (
                            StepStatus::Cancelled,
                            format!("{kind} cancelled: {}", failure_text(last)),
                        ),
                        _ => (
                            StepStatus::Failed,
                            format!("{kind} failed: {}", failure_text(last)),
                        ),
                    };
                    self.end_step(
                        &step,
                        status,
                        &reason,
                        last.error_class.as_deref().unwrap_or(""),
                    )
                    .await?;
                    return Ok(Driven::Ended);
                }
            }
        }
    }

    /// The apply step converged: the step SUCCEEDED, the instance's resource and the
    /// `resource.applied` event, in one transaction (once).
    async fn applied(
        &self,
        job: &Job,
        step: &StepRow,
        r: &ResolvedResource,
        run: &RunRow,
    ) -> Result<Driven> {
        let position = job
            .snapshot
            .as_ref()
            .and_then(|s| s.resources.iter().position(|x| x.name == r.name))
            .unwrap_or(0);
        let update = ResourceUpdate {
            instance_id: job.d.instance_id,
            name: &r.name,
            module: &r.module,
            state_id: run.state_id,
            status: "applied",
            last_generation: run.final_generation.unwrap_or(0),
            last_applied_run_id: Some(run.run_id),
            position: i32::try_from(position + 1).unwrap_or(i32::MAX),
        };
        let (d, step_id, run_id, state_id) = (&job.d, step.step_id, run.run_id, run.state_id);
        let done = cairn_db::transaction!(&self.pool, |conn| {
            if !steps::step_end(conn, step_id, StepStatus::Succeeded.as_str(), "", "").await? {
                return Ok::<_, Error>(false);
            }
            instances::resource_upsert(conn, &update).await?;
            events::resource(conn, d, &r.name, state_id, run_id, "applied").await?;
            Ok(true)
        })?;
        if done {
            self.committed();
            tracing::info!(resource = %r.name, %run_id, "resource applied");
        }
        Ok(Driven::Ended)
    }

    /// A destroy step: the resource's last applied root config, as a DESTROY run; never
    /// retried.
    async fn drive_destroy(&self, job: &Job, step: StepRow) -> Result<Driven> {
        let Some(res) = job.resources.get(&step.resource).cloned() else {
            self.end_step(
                &step,
                StepStatus::Skipped,
                "never applied: nothing to destroy",
                "",
            )
            .await?;
            return Ok(Driven::Ended);
        };
        let (Some(last_run), Some(state_id)) = (res.last_applied_run_id, res.state_id) else {
            self.end_step(
                &step,
                StepStatus::Skipped,
                "never applied: nothing to destroy",
                "",
            )
            .await?;
            return Ok(Driven::Ended);
        };
        if res.status == "destroyed" {
            self.end_step(&step, StepStatus::Skipped, "already destroyed", "")
                .await?;
            return Ok(Driven::Ended);
        }
        loop {
            let runs = self.step_runs(&step).await?;
            match runs.last() {
                None => {
                    if self.cancel_asked(job).await? {
                        return Ok(Driven::Cancelled);
                    }
                    let c = self.coord.registered_config(last_run).await?;
                    let spec = RunSpec {
                        kind: spb::RunKind::Destroy,
                        state_id,
                        root_config: c.root_config,
                        config_hash: c.config_hash,
                        context: c.context.unwrap_or_default(),
                        plan_run_id: None,
                    };
                    if self.run_start(job, &step, 0, 1, spec).await?.is_none() {
                        return Ok(Driven::Cancelled);
                    }
                }
                Some(r) if !r.finished() => {
                    if self.run_go(job, &step, r, 1).await?.is_none() {
                        return Ok(Driven::Cancelled);
                    }
                }
                Some(r) if ending(r) == Ending::Succeeded => {
                    let update = ResourceUpdate {
                        instance_id: job.d.instance_id,
                        name: &res.name,
                        module: &res.module,
                        state_id,
                        status: "destroyed",
                        last_generation: r.final_generation.unwrap_or(res.last_generation),
                        last_applied_run_id: None,
                        position: 0,
                    };
                    let position = sqlx::query_scalar::<_, i32>(
                        "SELECT position FROM instance_resources WHERE instance_id = $1 AND name = $2",
                    )
                    .bind(job.d.instance_id)
                    .bind(&res.name)
                    .fetch_optional(&self.pool)
                    .await?
                    .unwrap_or(0);
                    let update = ResourceUpdate { position, ..update };
                    let (d, step_id, run_id) = (&job.d, step.step_id, r.run_id);
                    let done = cairn_db::transaction!(&self.pool, |conn| {
                        if !steps::step_end(conn, step_id, StepStatus::Succeeded.as_str(), "", "")
                            .await?
                        {
                            return Ok::<_, Error>(false);
                        }
                        instances::resource_upsert(conn, &update).await?;
                        events::resource(conn, d, &res.name, state_id, run_id, "destroyed").await?;
                        Ok(true)
                    })?;
                    if done {
                        self.committed();
                    }
                    return Ok(Driven::Ended);
                }
                Some(r) => {
                    let status = if ending(r) == Ending::Cancelled {
                        StepStatus::Cancelled
                    } else {
                        StepStatus::Failed
                    };
                    self.end_step(
                        &step,
                        status,
                        &format!("destroy failed: {}", failure_text(r)),
                        r.error_class.as_deref().unwrap_or(""),
                    )
                    .await?;
                    return Ok(Driven::Ended);
                }
            }
        }
    }

    /// A verify step: a read-only preview of what was applied; a `create` means the
    /// resource is gone at the provider.
    async fn drive_verify(&self, job: &Job, step: StepRow) -> Result<Driven> {
        let apply = cairn_db::bounded!(&self.pool, |conn| {
            steps::step_of_resource(conn, job.d.deployment_id, &step.resource, &["apply"]).await
        })?;
        let Some(apply) = apply
            .as_ref()
            .filter(|a| a.status == StepStatus::Succeeded.as_str())
        else {
            let reason = match &apply {
                Some(a) if ok_status(a) => "not applied in this deployment: no changes",
                _ => "not applied",
            };
            self.end_step(&step, StepStatus::Skipped, reason, "")
                .await?;
            return Ok(Driven::Ended);
        };
        let applied_run = self
            .step_runs(apply)
            .await?
            .into_iter()
            .rev()
            .find(|r| r.outcome.as_deref() == Some("succeeded"));
        let Some(applied_run) = applied_run else {
            self.end_step(&step, StepStatus::Skipped, "not applied", "")
                .await?;
            return Ok(Driven::Ended);
        };
        loop {
            let runs = self.step_runs(&step).await?;
            match runs.last() {
                None => {
                    let spec = RunSpec {
                        kind: spb::RunKind::Preview,
                        state_id: applied_run.state_id,
                        root_config: applied_run.root_config.clone(),
                        config_hash: applied_run.config_hash.clone(),
                        context: prost::Message::decode(applied_run.context.as_slice())
                            .map_err(|e| Error::internal(e.to_string()))?,
                        plan_run_id: None,
                    };
                    if self.run_start(job, &step, 0, 1, spec).await?.is_none() {
                        return Ok(Driven::Cancelled);
                    }
                }
                Some(r) if !r.finished() => {
                    if self.run_go(job, &step, r, 1).await?.is_none() {
                        return Ok(Driven::Cancelled);
                    }
                }
                Some(r) if ending(r) == Ending::Succeeded => {
                    let f = facts(r);
                    if f.known && f.creates() {
                        self.end_with_plan(&step, &f, StepStatus::Failed, GONE)
                            .await?;
                    } else {
                        let reason = if f.has_changes() {
                            "in place, with pending changes"
                        } else {
                            ""
                        };
                        self.end_with_plan(&step, &f, StepStatus::Succeeded, reason)
                            .await?;
                    }
                    return Ok(Driven::Ended);
                }
                Some(r) => {
                    let status = if ending(r) == Ending::Cancelled {
                        StepStatus::Cancelled
                    } else {
                        StepStatus::Failed
                    };
                    self.end_step(
                        &step,
                        status,
                        &format!("verify failed: {}", failure_text(r)),
                        r.error_class.as_deref().unwrap_or(""),
                    )
                    .await?;
                    return Ok(Driven::Ended);
                }
            }
        }
    }
}
