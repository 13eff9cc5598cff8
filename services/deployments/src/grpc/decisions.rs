//! The Approve, Reject and Cancel handlers of `cairn.deployments.v1.Deployments`.
use cairn_contract::DeploymentId;
use cairn_proto::deployments as pb;
use tonic::{Request, Response, Status};

use super::convert::{deployment, tenant};
use super::who;
use crate::app::App;
use crate::app::approvals::Decision;
use crate::error::Error;

fn deployment_id(s: &str) -> Result<DeploymentId, Status> {
    DeploymentId::parse("deployment_id", s).map_err(|e| Error::from(e).into())
}

pub async fn approve(
    app: &App,
    req: Request<pb::ApproveRequest>,
) -> Result<Response<pb::ApproveResponse>, Status> {
    let who = who(&req)?;
    let r = req.get_ref();
    let view = app
        .decide(
            &who,
            tenant(&r.tenant_id)?,
            deployment_id(&r.deployment_id)?,
            Decision::Approve,
            &r.plan_set_hash,
            &r.comment,
        )
        .await?;
    Ok(Response::new(pb::ApproveResponse {
        deployment: Some(deployment(&view)),
    }))
}

pub async fn reject(
    app: &App,
    req: Request<pb::RejectRequest>,
) -> Result<Response<pb::RejectResponse>, Status> {
    let who = who(&req)?;
    let r = req.get_ref();
    let view = app
        .decide(
            &who,
            tenant(&r.tenant_id)?,
            deployment_id(&r.deployment_id)?,
            Decision::Reject,
            &r.plan_set_hash,
            &r.comment,
        )
        .await?;
    Ok(Response::new(pb::RejectResponse {
        deployment: Some(deployment(&view)),
    }))
}

pub async fn cancel(
    app: &App,
    req: Request<pb::CancelRequest>,
) -> Result<Response<pb::CancelResponse>, Status> {
    let who = who(&req)?;
    let r = req.get_ref();
    let view = app
        .cancel_deployment(
            &who,
            tenant(&r.tenant_id)?,
            deployment_id(&r.deployment_id)?,
            &r.reason,
        )
        .await?;
    Ok(Response::new(pb::CancelResponse {
        deployment: Some(deployment(&view)),
    }))
}
