//! The `RunResult` message published on `cairn.runres.<run_id>`: built from a finished run's
//! report, or for a run that could not be admitted at all. It carries ids, a summary and
//! the saved plan's sha256, never the plan or its JSON (those go to the coordinator only).

use std::time::SystemTime;

use cairn_proto::runner as pb;
use cairn_tofu::{DriftFinding, PlanSummary, Risk};

use crate::coordinator::outcome_to_proto;
use crate::pipeline::{ErrorClass, RunOutcome};
use crate::run::RunReport;

/// Where a result comes from.
#[derive(Debug, Clone)]
pub struct Origin<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The target whose queue carried the request.
    pub target_id: &'a str,
    /// This runner instance.
    pub instance: &'a str,
}

/// What is known of the attempt a result reports.
#[derive(Debug, Clone, Copy, Default)]
pub struct Attempt {
    /// Its number (0: none was admitted).
    pub attempt: u32,
    /// The state generation it started from (0 when unknown).
    pub base_generation: u64,
    /// When it was admitted (`None` when unknown: nothing was admitted, or the result of a
    /// finished run is published again).
    pub started_at: Option<SystemTime>,
}

/// `Nats-Msg-Id` of an attempt's result: the stream drops a re-published duplicate.
pub fn result_msg_id(run_id: &str, attempt: u32) -> String {
    format!("{run_id}/{attempt}")
}

/// The result of a run driven to its finish.
pub fn from_report(origin: &Origin<'_>, report: &RunReport) -> pb::RunResult {
    let r = &report.result;
    pb::RunResult {
        run_id: origin.run_id.to_owned(),
        attempt: report.attempt,
        target_id: origin.target_id.to_owned(),
        runner_instance: origin.instance.to_owned(),
        outcome: outcome_to_proto(r.outcome) as i32,
        error_class: r.class.map_or(pb::ErrorClass::Unspecified, class) as i32,
        message: r.message.clone(),
        summary: r.summary.as_ref().map(summary),
        stale_tags: r.stale_tags.iter().map(|t| (*t).to_owned()).collect(),
        plan_id: report.plan_id.clone().unwrap_or_default(),
        quarantine_id: report.quarantine_id.clone().unwrap_or_default(),
        final_generation: report.final_generation,
        outputs: r.outputs.iter().map(|o| o.name.clone()).collect(),
        log_tail: r.log_tail.clone(),
        finished_at: Some(prost_types::Timestamp::from(SystemTime::now())),
        plan_sha256: report.plan_sha256.clone().unwrap_or_default(),
        base_generation: report.base_generation,
        started_at: Some(prost_types::Timestamp::from(report.started_at)),
        drift_findings: r.drift_findings.iter().map(drift_finding).collect(),
    }
}

fn drift_finding(f: &DriftFinding) -> pb::DriftFinding {
    pb::DriftFinding {
        address: f.address.clone(),
        action: f.action.as_str().to_owned(),
        attributes: f.attributes.clone(),
        relevant: f.relevant.clone(),
    }
}

/// The result of a run that ended without a tofu command: refused at admission (attempt 0)
/// or failed by the runner itself.
pub fn failure(
    origin: &Origin<'_>,
    attempt: Attempt,
    outcome_: RunOutcome,
    class_: Option<ErrorClass>,
    message: String,
    final_generation: u64,
) -> pb::RunResult {
    pb::RunResult {
        run_id: origin.run_id.to_owned(),
        attempt: attempt.attempt,
        base_generation: attempt.base_generation,
        started_at: attempt.started_at.map(prost_types::Timestamp::from),
        target_id: origin.target_id.to_owned(),
        runner_instance: origin.instance.to_owned(),
        outcome: outcome_to_proto(outcome_) as i32,
        error_class: class_.map_or(pb::ErrorClass::Unspecified, class) as i32,
        message,
        final_generation,
        finished_at: Some(prost_types::Timestamp::from(SystemTime::now())),
        ..Default::default()
    }
}

/// The proto error class.
pub fn class(c: ErrorClass) -> pb::ErrorClass {
    match c {
        ErrorClass::Transient => pb::ErrorClass::Transient,
        ErrorClass::Config => pb::ErrorClass::Config,
        ErrorClass::Provider => pb::ErrorClass::Provider,
        ErrorClass::StalePlan => pb::ErrorClass::StalePlan,
        ErrorClass::Fenced => pb::ErrorClass::Fenced,
        ErrorClass::Cancelled => pb::ErrorClass::Cancelled,
        ErrorClass::TimedOut => pb::ErrorClass::TimedOut,
        ErrorClass::Interrupted => pb::ErrorClass::Interrupted,
        ErrorClass::LeaseLost => pb::ErrorClass::LeaseLost,
    }
}

fn summary(s: &PlanSummary) -> pb::PlanSummary {
    let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    pb::PlanSummary {
        add: count(s.add),
        change: count(s.change),
        destroy: count(s.destroy),
        replace: s.replace.clone(),
        risk: match s.risk {
            Risk::Low => pb::Risk::Low,
            Risk::High => pb::Risk::High,
            Risk::Unknown => pb::Risk::Unknown,
        } as i32,
        resources: s
            .resources
            .iter()
            .map(|r| pb::ResourceChange {
                address: r.address.clone(),
                actions: r.actions.clone(),
                reason: r.reason.clone().unwrap_or_default(),
            })
            .collect(),
    }
}
