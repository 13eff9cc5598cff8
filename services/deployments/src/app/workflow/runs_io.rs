//! A step's runs: persisted (the exact registration) before RegisterRun is sent, requested
//! through the message outbox in the transaction that marks the step RUNNING once one of the
//! job's run permits is free (a run holds it until its result), and awaited until the result
//! consumer wrote their first result — with the coordinator's GetRun as the fallback when a
//! result is missing, and a failure when no runner admits the run in time. A run prepared
//! while the permits are taken waits registered, so a permit freed goes to a run that needs
//! only its request.
use std::time::Instant;

use cairn_contract::RunId;
use cairn_proto::runner as rpb;
use cairn_proto::state as spb;
use cairn_sdk::run_result;
use prost::Message;
use uuid::Uuid;

use super::Job;
use crate::app::App;
use crate::domain::workflow::{Ending, PlanFacts, Risk};
use crate::error::{Error, Result};
use crate::store::runs::{self, NewRun, Requested, RunResultRow, RunRow};
use crate::store::steps::StepRow;

/// What a run is made of.
pub struct RunSpec {
    pub kind: spb::RunKind,
    pub state_id: Uuid,
    pub root_config: Vec<u8>,
    pub config_hash: String,
    pub context: spb::ExecutionContext,
    pub plan_run_id: Option<Uuid>,
}

pub fn kind_name(kind: spb::RunKind) -> &'static str {
    match kind {
        spb::RunKind::Plan => "plan",
        spb::RunKind::Apply => "apply",
        spb::RunKind::Destroy => "destroy",
        spb::RunKind::Preview | spb::RunKind::Drift | spb::RunKind::Unspecified => "preview",
    }
}

pub fn run_kind(name: &str) -> spb::RunKind {
    match name {
        "plan" => spb::RunKind::Plan,
        "apply" => spb::RunKind::Apply,
        "destroy" => spb::RunKind::Destroy,
        _ => spb::RunKind::Preview,
    }
}

/// How a finished run ended, for the retry rules.
pub fn ending(r: &RunRow) -> Ending {
    match (r.outcome.as_deref(), r.error_class.as_deref()) {
        (Some("succeeded"), _) => Ending::Succeeded,
        (Some("cancelled"), _) => Ending::Cancelled,
        (Some("timed_out"), _) => Ending::TimedOut,
        (Some("interrupted"), _) => Ending::Interrupted,
        (_, Some("transient")) => Ending::Transient,
        // A lost lease may have left the state incomplete: a failure, never retried.
        (_, Some("lease_lost")) => Ending::Failed,
        _ => Ending::Failed,
    }
}

/// What a finished plan or preview run found (unknown when its summary was lost).
pub fn facts(r: &RunRow) -> PlanFacts {
    let Some(summary) = r
        .summary
        .as_deref()
        .and_then(|b| rpb::PlanSummary::decode(b).ok())
    else {
        return PlanFacts::unknown();
    };
    let risk = match rpb::Risk::try_from(summary.risk) {
        Ok(rpb::Risk::Low) => Risk::Low,
        Ok(rpb::Risk::High) => Risk::High,
        _ => Risk::Unknown,
    };
    let mut changes: Vec<(String, Vec<String>)> = summary
        .resources
        .iter()
        .map(|c| (c.address.clone(), c.actions.clone()))
        .collect();
    changes.sort();
    PlanFacts {
        add: summary.add,
        change: summary.change,
        destroy: summary.destroy,
        replace: summary.replace,
        risk,
        changes,
        known: true,
    }
}

/// A result message's content as the step row stores it.
pub fn result_row(r: &rpb::RunResult) -> RunResultRow {
    RunResultRow {
        attempt: i32::try_from(r.attempt).unwrap_or(i32::MAX),
        outcome: run_result::outcome_name(r.outcome).to_owned(),
        error_class: run_result::error_class_name(r.error_class)
            .unwrap_or_default()
            .to_owned(),
        message: r.message.clone(),
        summary: r.summary.as_ref().map(Message::encode_to_vec),
        plan_sha256: r.plan_sha256.clone(),
        base_generation: i64::try_from(r.base_generation).unwrap_or(i64::MAX),
        final_generation: i64::try_from(r.final_generation).unwrap_or(i64::MAX),
        run_started_at: r.started_at.as_ref().and_then(timestamp),
        run_finished_at: r.finished_at.as_ref().and_then(timestamp),
    }
}

fn timestamp(t: &prost_types::Timestamp) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?)
}

impl App {
    /// Persists a new run of `step` (the next sequence number after `previous` runs), then
    /// goes on with it ([`App::run_go`]; another worker's run, should it have won).
    pub(super) async fn run_start(
        &self,
        job: &Job,
        step: &StepRow,
        previous: usize,
        tries: i32,
        spec: RunSpec,
    ) -> Result<Option<RunRow>> {
        let run_id = RunId::new().uuid();
        let context = spec.context.encode_to_vec();
        let seq = i32::try_from(previous + 1).unwrap_or(i32::MAX);
        let new = NewRun {
            run_id,
            step_id: step.step_id,
            deployment_id: job.d.deployment_id,
            seq,
            kind: kind_name(spec.kind),
            state_id: spec.state_id,
            root_config: &spec.root_config,
            config_hash: &spec.config_hash,
            context: &context,
            plan_run_id: spec.plan_run_id,
        };
        let row = cairn_db::bounded!(&self.pool, |conn| {
            Ok::<_, Error>(match runs::run_insert(conn, &new).await? {
                Some(row) => row,
                None => {
                    // Another worker persisted this try first: continue with its run.
                    let all = runs::runs_of_step(conn, step.step_id).await?;
                    all.into_iter()
                        .find(|r| r.seq == seq)
                        .ok_or_else(|| Error::aborted("run of the step changed meanwhile"))?
                }
            })
        })?;
        self.run_go(job, step, &row, tries).await
    }

    /// Registers the persisted run (identical bytes on every call) unless it was requested
    /// before, waits for one of the job's run permits, requests it through the outbox in
    /// the transaction that marks the step RUNNING (unless that was done before), and waits
    /// for its result, holding the permit until then. None: the deployment's cancel was
    /// asked for before the run was requested, and it never will be.
    pub(super) async fn run_go(
        &self,
        job: &Job,
        step: &StepRow,
        row: &RunRow,
        tries: i32,
    ) -> Result<Option<RunRow>> {
        let requested = row.status == "requested";
        if !requested {
            self.run_register(job, row).await?;
        }
        let _permit = job
            .runs
            .acquire()
            .await
            .map_err(|e| Error::internal(format!("run permits: {e}")))?;
        if !requested && !self.run_request(job, step, row, tries).await? {
            return Ok(None);
        }
        self.run_wait(job, row.run_id).await.map(Some)
    }

    async fn run_register(&self, job: &Job, row: &RunRow) -> Result<()> {
        let context = spb::ExecutionContext::decode(row.context.as_slice())
            .map_err(|e| Error::internal(format!("stored context of run {}: {e}", row.run_id)))?;
        self.coord
            .register(spb::RegisterRunRequest {
                run_id: row.run_id.to_string(),
                state_id: row.state_id.to_string(),
                kind: run_kind(&row.kind) as i32,
                environment: job.d.environment.clone(),
                root_config: row.root_config.clone(),
                config_hash: row.config_hash.clone(),
                context: Some(context),
                plan_run_id: row.plan_run_id.map(|p| p.to_string()).unwrap_or_default(),
            })
            .await?;
        Ok(())
    }

    /// The registered run's request, in the outbox with the step marked RUNNING; false when
    /// the deployment's cancel was asked for (nothing requested).
    async fn run_request(
        &self,
        job: &Job,
        step: &StepRow,
        row: &RunRow,
        tries: i32,
    ) -> Result<bool> {
        let target = job.d.target_id.to_string();
        let subject = cairn_bus::Namespace::root()
            .runq(&target)
            .map_err(|e| Error::internal(e.to_string()))?;
        let request = rpb::RunRequest {
            run_id: row.run_id.to_string(),
            target_id: target,
        }
        .encode_to_vec();
        let (run_id, step_id) = (row.run_id, step.step_id);
        let went = cairn_db::transaction!(&self.pool, |conn| {
            let went = runs::run_request(conn, step_id, run_id, tries).await?;
            match went {
                Requested::StepEnded => {
                    return Err(Error::aborted(format!("step {step_id} ended meanwhile")));
                }
                Requested::Now => {
                    cairn_bus::message_outbox_insert(conn, &subject, &run_id.to_string(), &request)
                        .await?;
                }
                Requested::Before | Requested::Cancelled => {}
            }
            Ok::<_, Error>(went)
        })?;
        if went == Requested::Cancelled {
            tracing::info!(%run_id, kind = %row.kind, "not requested: the deployment's cancel was asked for");
            return Ok(false);
        }
        self.jobs_notify.notify_one();
        tracing::info!(%run_id, kind = %row.kind, "run requested");
        Ok(true)
    }

    /// Waits until the run has its result. Sends the deployment's cancel to the run when
    /// one was asked for; asks the coordinator when the result is slow to come; fails the
    /// run when no runner admitted it within the admit timeout.
    async fn run_wait(&self, job: &Job, run_id: Uuid) -> Result<RunRow> {
        let flow = &self.flow;
        let mut last_check = Instant::now();
        let mut finished_seen: Option<Instant> = None;
        let watch = self.run_wakers.watch(run_id);
        loop {
            let notified = watch.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let waited =
                cairn_db::bounded!(&self.pool, |conn| { runs::run_waited(conn, run_id).await })?
                    .ok_or_else(|| Error::internal(format!("run {run_id} vanished")))?;
            let (row, cancel) = (waited.run, waited.cancel_reason);
            if row.finished() {
                return Ok(row);
            }
            if last_check.elapsed() >= flow.result_fallback {
                last_check = Instant::now();
                if let Some(reason) = &cancel {
                    self.send_cancel(run_id, reason).await;
                }
                match self.coord.run(run_id).await {
                    Ok(status) if status.finished => {
                        // The result should be on its way; after one more interval the
                        // coordinator's account is taken instead.
                        match finished_seen {
                            Some(at) if at.elapsed() >= flow.result_fallback => {
                                self.run_result_from_coordinator(&row, &status).await?;
                                continue;
                            }
                            Some(_) => {}
                            None => finished_seen = Some(Instant::now()),
                        }
                    }
                    Ok(status) if status.attempt == 0 => {
                        let waited = row
                            .requested_at
                            .map(|t| (chrono::Utc::now() - t).to_std().unwrap_or_default())
                            .unwrap_or_default();
                        if waited >= flow.admit_timeout {
                            let message = format!(
                                "not admitted by a runner within {}: no runner serves target {} (or the coordinator is in after-restore mode)",
                                humantime(flow.admit_timeout),
                                job.d.target_id
                            );
                            let r = RunResultRow {
                                outcome: "failed".into(),
                                error_class: "not_admitted".into(),
                                message,
                                ..Default::default()
                            };
                            cairn_db::bounded!(&self.pool, |conn| {
                                runs::run_result(conn, run_id, &r).await
                            })?;
                            continue;
                        }
                    }
                    Ok(_) => {}
                    Err(err) => {
                        tracing::warn!(%run_id, error = %cairn_bus::Chain(&err), "asking the coordinator about a run failed");
                    }
                }
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(flow.result_poll) => {}
            }
        }
    }

    /// Writes the run's result from the coordinator's GetRun (and, for a plan, its saved
    /// plan's hash), when the runner's result did not arrive.
    async fn run_result_from_coordinator(
        &self,
        row: &RunRow,
        status: &crate::coordinator::RunStatus,
    ) -> Result<()> {
        let mut r = RunResultRow {
            attempt: i32::try_from(status.attempt).unwrap_or(i32::MAX),
            outcome: match status.status.as_str() {
                "succeeded" | "cancelled" | "timed_out" | "interrupted" => status.status.clone(),
                _ => "failed".to_owned(),
            },
            message: format!(
                "the run's result did not arrive; the coordinator reports it {}",
                status.status
            ),
            base_generation: i64::try_from(status.base_generation).unwrap_or(i64::MAX),
            ..Default::default()
        };
        if row.kind == "plan"
            && let Some(plan) = self.coord.masked_plan(row.run_id).await?
        {
            r.plan_sha256 = plan.plan_sha256;
            r.base_generation = i64::try_from(plan.base_generation).unwrap_or(i64::MAX);
        }
        cairn_db::bounded!(&self.pool, |conn| {
            runs::run_result(conn, row.run_id, &r).await
        })?;
        tracing::warn!(run_id = %row.run_id, status = %status.status, "run result taken from the coordinator");
        Ok(())
    }

    /// Publishes a cancel request for the run on core NATS (best effort: the run's
    /// runner, whichever it is, subscribes to it; repeated while the run is in flight).
    pub(crate) async fn send_cancel(&self, run_id: Uuid, reason: &str) {
        let Ok(subject) = self.ns.runctl(&run_id.to_string()) else {
            return;
        };
        let msg = rpb::CancelRun {
            run_id: run_id.to_string(),
            reason: reason.to_owned(),
        };
        match cairn_bus::publish_core(&self.nats, &subject, &msg).await {
            Ok(()) => {
                let marked: Result<_, sqlx::Error> = cairn_db::bounded!(&self.pool, |conn| {
                    runs::run_cancel_sent(conn, run_id).await
                });
                if let Err(err) = marked {
                    tracing::warn!(%run_id, error = %err, "recording that the cancel was sent failed");
                }
                tracing::info!(%run_id, "cancel sent");
            }
            Err(err) => {
                tracing::warn!(%run_id, error = %cairn_bus::Chain(&err), "sending a cancel failed")
            }
        }
    }
}

fn humantime(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else if secs > 0 {
        format!("{secs}s")
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::workflow::retried;

    fn row_with(result: &RunResultRow) -> RunRow {
        RunRow {
            run_id: Uuid::nil(),
            step_id: Uuid::nil(),
            deployment_id: Uuid::nil(),
            seq: 1,
            kind: "apply".into(),
            state_id: Uuid::nil(),
            root_config: Vec::new(),
            config_hash: String::new(),
            context: Vec::new(),
            plan_run_id: None,
            status: "finished".into(),
            requested_at: None,
            cancel_sent: false,
            approved_hash: String::new(),
            attempt: Some(result.attempt),
            outcome: Some(result.outcome.clone()),
            error_class: Some(result.error_class.clone()),
            message: Some(result.message.clone()),
            summary: None,
            plan_sha256: None,
            base_generation: None,
            final_generation: None,
            result_at: None,
        }
    }

    fn failed_with(class: rpb::ErrorClass) -> RunResultRow {
        result_row(&rpb::RunResult {
            outcome: spb::RunOutcome::Failed as i32,
            error_class: class as i32,
            attempt: 1,
            ..Default::default()
        })
    }

    #[test]
    fn a_lost_lease_is_its_own_class_and_never_retried() {
        let r = failed_with(rpb::ErrorClass::LeaseLost);
        assert_eq!(r.error_class, "lease_lost");
        let e = ending(&row_with(&r));
        assert_eq!(e, Ending::Failed);
        assert!(!retried(e, "apply", false, 1, 3));
        // A transient failure, by contrast, is tried again.
        let t = ending(&row_with(&failed_with(rpb::ErrorClass::Transient)));
        assert_eq!(t, Ending::Transient);
        assert!(retried(t, "apply", false, 1, 3));
    }
}
