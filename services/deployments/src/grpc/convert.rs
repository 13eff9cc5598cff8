//! Conversions between protobuf messages and the app's values.
use cairn_contract::TenantId;
use cairn_proto::deployments as pb;
use tonic::Status;
use uuid::Uuid;

use crate::app::deployments::DeploymentView;
use crate::app::instances::InstanceView;
use crate::domain::outputs::OutputView;
use crate::domain::{
    DeploymentKind, DeploymentStatus, InstanceStatus, Parameters, Ref, StepKind, StepStatus,
};
use crate::error::Error;
use crate::store::deployments::{ApprovalRow, DeploymentRow};
use crate::store::instances::ResourceRow;
use crate::store::steps::StepRow;

pub fn tenant(s: &str) -> Result<TenantId, Status> {
    TenantId::parse("tenant_id", s).map_err(|e| Error::from(e).into())
}

pub fn reference(field: &str, s: &str) -> Result<Ref, Status> {
    Ref::parse(field, s).map_err(Status::invalid_argument)
}

pub fn parameters(field: &str, json: &str) -> Result<Parameters, Status> {
    Parameters::parse(field, json).map_err(Status::invalid_argument)
}

pub fn page_token(s: &str) -> Result<Option<Uuid>, Status> {
    if s.is_empty() {
        return Ok(None);
    }
    Uuid::parse_str(s)
        .map(Some)
        .map_err(|_| Status::invalid_argument("page_token: not a token this service issued"))
}

/// The next page's token: the last id when the page was full.
pub fn next_token<T>(rows: &[T], size: u32, id: impl Fn(&T) -> Uuid) -> String {
    match rows.last() {
        Some(last) if rows.len() == size as usize => id(last).to_string(),
        _ => String::new(),
    }
}

pub fn kind(k: i32) -> Result<DeploymentKind, Status> {
    match pb::DeploymentKind::try_from(k) {
        Ok(pb::DeploymentKind::Deploy) => Ok(DeploymentKind::Deploy),
        Ok(pb::DeploymentKind::Destroy) => Ok(DeploymentKind::Destroy),
        Ok(pb::DeploymentKind::Preview) => Ok(DeploymentKind::Preview),
        Ok(pb::DeploymentKind::Unspecified) | Err(_) => Err(Status::invalid_argument(
            "kind: one of DEPLOY, DESTROY or PREVIEW",
        )),
    }
}

pub fn timestamp(t: chrono::DateTime<chrono::Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

fn opt_id(id: Option<Uuid>) -> String {
    id.map(|i| i.to_string()).unwrap_or_default()
}

fn u32_of(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

fn instance_status(s: &str) -> pb::InstanceStatus {
    match InstanceStatus::parse(s) {
        Ok(InstanceStatus::Pending) => pb::InstanceStatus::Pending,
        Ok(InstanceStatus::Deploying) => pb::InstanceStatus::Deploying,
        Ok(InstanceStatus::Active) => pb::InstanceStatus::Active,
        Ok(InstanceStatus::Failed) => pb::InstanceStatus::Failed,
        Ok(InstanceStatus::Destroying) => pb::InstanceStatus::Destroying,
        Ok(InstanceStatus::Destroyed) => pb::InstanceStatus::Destroyed,
        Err(_) => pb::InstanceStatus::Unspecified,
    }
}

fn resource(r: &ResourceRow) -> pb::InstanceResource {
    let status = match r.status.as_str() {
        "pending" => pb::ResourceStatus::Pending,
        "applied" => pb::ResourceStatus::Applied,
        "failed" => pb::ResourceStatus::Failed,
        "destroyed" => pb::ResourceStatus::Destroyed,
        _ => pb::ResourceStatus::Unspecified,
    };
    let drift = match r.drift_status.as_str() {
        "unknown" => pb::DriftStatus::Unknown,
        "in_sync" => pb::DriftStatus::InSync,
        "drift_detected" => pb::DriftStatus::DriftDetected,
        "check_failed" => pb::DriftStatus::CheckFailed,
        _ => pb::DriftStatus::Unspecified,
    };
    pb::InstanceResource {
        name: r.name.clone(),
        module: r.module.clone(),
        state_id: opt_id(r.state_id),
        status: status as i32,
        last_generation: u64::try_from(r.last_generation).unwrap_or(0),
        last_applied_run_id: opt_id(r.last_applied_run_id),
        drift_status: drift as i32,
    }
}

fn output(o: &OutputView) -> pb::InstanceOutput {
    pb::InstanceOutput {
        name: o.name.clone(),
        description: o.description.clone(),
        value_json: o.value_json.clone().unwrap_or_default(),
        sensitive: o.sensitive,
        unavailable_reason: o.unavailable.clone().unwrap_or_default(),
    }
}

pub fn instance(v: &InstanceView) -> pb::Instance {
    let r = &v.row;
    pb::Instance {
        instance_id: r.instance_id.to_string(),
        tenant_id: r.tenant_id.to_string(),
        name: r.name.clone(),
        template_id: r.template_id.to_string(),
        template_version: u32_of(r.template_version),
        target_id: r.target_id.to_string(),
        environment: r.environment.clone(),
        parameters_json: r.parameters.to_string(),
        status: instance_status(&r.status) as i32,
        last_applied_snapshot_id: opt_id(r.last_applied_snapshot_id),
        active_deployment_id: opt_id(r.active_deployment_id),
        resources: v.resources.iter().map(resource).collect(),
        outputs: v.outputs.iter().map(output).collect(),
        created_at: Some(timestamp(r.created_at)),
        updated_at: Some(timestamp(r.updated_at)),
    }
}

fn deployment_kind(s: &str) -> pb::DeploymentKind {
    match DeploymentKind::parse(s) {
        Ok(DeploymentKind::Deploy) => pb::DeploymentKind::Deploy,
        Ok(DeploymentKind::Destroy) => pb::DeploymentKind::Destroy,
        Ok(DeploymentKind::Preview) => pb::DeploymentKind::Preview,
        Err(_) => pb::DeploymentKind::Unspecified,
    }
}

pub fn deployment_status(s: &str) -> pb::DeploymentStatus {
    match DeploymentStatus::parse(s) {
        Ok(DeploymentStatus::Queued) => pb::DeploymentStatus::Queued,
        Ok(DeploymentStatus::Running) => pb::DeploymentStatus::Running,
        Ok(DeploymentStatus::AwaitingApproval) => pb::DeploymentStatus::AwaitingApproval,
        Ok(DeploymentStatus::Succeeded) => pb::DeploymentStatus::Succeeded,
        Ok(DeploymentStatus::Failed) => pb::DeploymentStatus::Failed,
        Ok(DeploymentStatus::Cancelled) => pb::DeploymentStatus::Cancelled,
        Ok(DeploymentStatus::Rejected) => pb::DeploymentStatus::Rejected,
        Ok(DeploymentStatus::Expired) => pb::DeploymentStatus::Expired,
        Err(_) => pb::DeploymentStatus::Unspecified,
    }
}

fn step_kind(s: &str) -> pb::StepKind {
    match StepKind::parse(s) {
        Ok(StepKind::Resolve) => pb::StepKind::Resolve,
        Ok(StepKind::Plan) => pb::StepKind::Plan,
        Ok(StepKind::Probe) => pb::StepKind::Probe,
        Ok(StepKind::Approval) => pb::StepKind::Approval,
        Ok(StepKind::Apply) => pb::StepKind::Apply,
        Ok(StepKind::Destroy) => pb::StepKind::Destroy,
        Ok(StepKind::Verify) => pb::StepKind::Verify,
        Err(_) => pb::StepKind::Unspecified,
    }
}

fn step_status(s: &str) -> pb::StepStatus {
    match StepStatus::parse(s) {
        Ok(StepStatus::Pending) => pb::StepStatus::Pending,
        Ok(StepStatus::Running) => pb::StepStatus::Running,
        Ok(StepStatus::Succeeded) => pb::StepStatus::Succeeded,
        Ok(StepStatus::Failed) => pb::StepStatus::Failed,
        Ok(StepStatus::Skipped) => pb::StepStatus::Skipped,
        Ok(StepStatus::Cancelled) => pb::StepStatus::Cancelled,
        Err(_) => pb::StepStatus::Unspecified,
    }
}

pub fn step(s: &StepRow) -> pb::Step {
    let plan = s.plan_risk.as_ref().map(|risk| pb::PlanSummary {
        add: s.plan_add.map_or(0, u32_of),
        change: s.plan_change.map_or(0, u32_of),
        destroy: s.plan_destroy.map_or(0, u32_of),
        replaced: s.plan_replaced.clone().unwrap_or_default(),
        risk: risk.clone(),
    });
    pb::Step {
        step_id: s.step_id.to_string(),
        kind: step_kind(&s.kind) as i32,
        resource: s.resource.clone(),
        status: step_status(&s.status) as i32,
        reason: s.reason.clone(),
        run_id: opt_id(s.run_id),
        tries: u32_of(s.tries),
        plan,
        error_class: s.error_class.clone(),
        started_at: s.started_at.map(timestamp),
        finished_at: s.finished_at.map(timestamp),
        depends_on: s.depends_on.clone(),
    }
}

fn approval(a: &ApprovalRow) -> pb::Approval {
    pb::Approval {
        decision: a.decision.clone(),
        by: a.decided_by.clone(),
        plan_set_hash: a.plan_set_hash.clone(),
        comment: a.comment.clone(),
        at: Some(timestamp(a.decided_at)),
    }
}

/// A deployment without its steps (listings).
pub fn deployment_row(r: &DeploymentRow) -> pb::Deployment {
    pb::Deployment {
        deployment_id: r.deployment_id.to_string(),
        tenant_id: r.tenant_id.to_string(),
        instance_id: r.instance_id.to_string(),
        kind: deployment_kind(&r.kind) as i32,
        status: deployment_status(&r.status) as i32,
        requested_by: r.requested_by.clone(),
        snapshot_id: opt_id(r.snapshot_id),
        plan_set_hash: r.plan_set_hash.clone(),
        steps: Vec::new(),
        approvals: Vec::new(),
        summary: r.summary.clone(),
        created_at: Some(timestamp(r.created_at)),
        finished_at: r.finished_at.map(timestamp),
        instance_name: r.instance_name.clone(),
        target_id: r.target_id.to_string(),
        environment: r.environment.clone(),
        template_version: u32_of(r.template_version),
    }
}

pub fn deployment(v: &DeploymentView) -> pb::Deployment {
    pb::Deployment {
        steps: v.steps.iter().map(step).collect(),
        approvals: v.approvals.iter().map(approval).collect(),
        ..deployment_row(&v.row)
    }
}
