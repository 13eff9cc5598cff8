//! The read side of a deployment: `WatchDeployment` (a server stream of its events from a
//! position), `GetLogs` (a step's stored lines) and `GetPlans` (the masked plans). Called
//! from the `Deployments` service in `deployments.rs`.
use std::pin::Pin;

use cairn_contract::DeploymentId;
use cairn_proto::deployments as pb;
use tokio_stream::{Stream, StreamExt, wrappers::ReceiverStream};
use tonic::{Request, Response, Status};
use uuid::Uuid;

use super::convert::{deployment_status, step, tenant, timestamp};
use super::who;
use crate::app::App;
use crate::app::logs::DROPPED_TEXT;
use crate::app::watch::WatchEvent;
use crate::error::Error;
use crate::store::logs::LogRow;
use crate::store::steps::StepRow;

/// The stream `WatchDeployment` answers with.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<pb::DeploymentEvent, Status>> + Send>>;

fn deployment_id(s: &str) -> Result<DeploymentId, Status> {
    DeploymentId::parse("deployment_id", s).map_err(|e| Error::from(e).into())
}

fn step_id(s: &str) -> Result<Uuid, Status> {
    Uuid::parse_str(s).map_err(|_| Status::invalid_argument(format!("step_id: {s:?} is not an id")))
}

fn u32_of(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

fn u64_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn log_line(l: &LogRow) -> pb::LogLine {
    pb::LogLine {
        step_id: l.step_id.to_string(),
        attempt: u32_of(l.attempt),
        seq: u64_of(l.seq),
        stream: l.stream.clone(),
        text: l.text.clone(),
    }
}

/// An event of `deployment_id` as the client sees it.
pub fn event(deployment_id: Uuid, e: WatchEvent) -> pb::DeploymentEvent {
    use pb::deployment_event::Event;
    let event = match e.kind.as_str() {
        "status" => Event::Status(deployment_status(e.status.as_deref().unwrap_or("")) as i32),
        "step" => Event::Step(step(&StepRow {
            step_id: e.step_id.unwrap_or_default(),
            deployment_id,
            position: e.step_position.unwrap_or(0),
            kind: e.step_kind.unwrap_or_default(),
            resource: e.resource.unwrap_or_default(),
            depends_on: e.depends_on.unwrap_or_default(),
            status: e.step_status.unwrap_or_default(),
            reason: e.reason.unwrap_or_default(),
            run_id: e.run_id,
            tries: e.tries.unwrap_or(0),
            error_class: e.error_class.unwrap_or_default(),
            plan_add: e.plan_add,
            plan_change: e.plan_change,
            plan_destroy: e.plan_destroy,
            plan_replaced: e.plan_replaced,
            plan_risk: e.plan_risk,
            started_at: e.started_at,
            finished_at: e.finished_at,
        })),
        // A log line (the only other kind the table allows); its text is gone once the
        // step's bound dropped it.
        _ => {
            let (stream, text) = match (e.stream, e.text) {
                (Some(stream), Some(text)) => (stream, text),
                _ => ("runner".to_owned(), DROPPED_TEXT.to_owned()),
            };
            Event::Log(pb::LogLine {
                step_id: e.step_id.map(|s| s.to_string()).unwrap_or_default(),
                attempt: e.attempt.map_or(0, u32_of),
                seq: e.seq.map_or(0, u64_of),
                stream,
                text,
            })
        }
    };
    pb::DeploymentEvent {
        position: u64_of(e.position),
        at: Some(timestamp(e.at)),
        event: Some(event),
    }
}

pub async fn watch_deployment(
    app: &App,
    req: Request<pb::WatchDeploymentRequest>,
) -> Result<Response<EventStream>, Status> {
    let who = who(&req)?;
    let r = req.get_ref();
    let id = deployment_id(&r.deployment_id)?;
    let rx = app
        .watch_deployment(&who, tenant(&r.tenant_id)?, id, r.after)
        .await?;
    let events = ReceiverStream::new(rx).map(move |e| match e {
        Ok(e) => Ok(event(id.uuid(), e)),
        Err(err) => Err(Status::from(err)),
    });
    Ok(Response::new(Box::pin(events)))
}

pub async fn get_logs(
    app: &App,
    req: Request<pb::GetLogsRequest>,
) -> Result<Response<pb::GetLogsResponse>, Status> {
    let who = who(&req)?;
    let r = req.get_ref();
    let (lines, truncated) = app
        .get_logs(
            &who,
            tenant(&r.tenant_id)?,
            deployment_id(&r.deployment_id)?,
            step_id(&r.step_id)?,
        )
        .await?;
    Ok(Response::new(pb::GetLogsResponse {
        lines: lines.iter().map(log_line).collect(),
        truncated,
    }))
}

pub async fn get_plans(
    app: &App,
    req: Request<pb::GetPlansRequest>,
) -> Result<Response<pb::GetPlansResponse>, Status> {
    let who = who(&req)?;
    let r = req.get_ref();
    let (plan_set_hash, plans) = app
        .get_plans(
            &who,
            tenant(&r.tenant_id)?,
            deployment_id(&r.deployment_id)?,
        )
        .await?;
    Ok(Response::new(pb::GetPlansResponse {
        plan_set_hash,
        plans: plans
            .into_iter()
            .map(|p| pb::ResourcePlan {
                summary: step(&p.step).plan,
                resource: p.step.resource,
                run_id: p.run_id.to_string(),
                plan_sha256: p.plan.plan_sha256,
                base_generation: p.plan.base_generation,
                masked_plan_json: p.plan.masked_plan_json,
            })
            .collect(),
    }))
}
