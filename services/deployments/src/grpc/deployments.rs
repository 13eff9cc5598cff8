//! `cairn.deployments.v1.Deployments`. The request phase, reads and cancel of a queued
//! deployment are here; watching, logs, approvals and plans arrive with the workflow worker
//! and answer UNIMPLEMENTED until then.
use cairn_contract::DeploymentId;
use cairn_proto::deployments as pb;
use tonic::{Request, Response, Status};

use super::convert::{
    deployment, deployment_row, kind, next_token, page_token, parameters, reference, tenant,
};
use super::who;
use crate::app::deployments::CreateDeployment;
use crate::app::{App, page_size};
use crate::error::Error;

pub struct DeploymentsService {
    pub app: App,
}

fn deployment_id(s: &str) -> Result<DeploymentId, Status> {
    DeploymentId::parse("deployment_id", s).map_err(|e| Error::from(e).into())
}

#[tonic::async_trait]
impl pb::deployments_server::Deployments for DeploymentsService {
    async fn create_deployment(
        &self,
        req: Request<pb::CreateDeploymentRequest>,
    ) -> Result<Response<pb::CreateDeploymentResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let request = CreateDeployment {
            tenant: tenant(&r.tenant_id)?,
            instance: reference("instance_ref", &r.instance_ref)?,
            kind: kind(r.kind)?,
            template_version: r.template_version,
            parameters_patch: parameters("parameters_patch_json", &r.parameters_patch_json)?,
            idempotency_key: Some(r.idempotency_key),
        };
        let (view, created) = self.app.create_deployment(&who, request).await?;
        Ok(Response::new(pb::CreateDeploymentResponse {
            deployment: Some(deployment(&view)),
            created,
        }))
    }

    async fn get_deployment(
        &self,
        req: Request<pb::GetDeploymentRequest>,
    ) -> Result<Response<pb::GetDeploymentResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        let view = self
            .app
            .get_deployment(
                &who,
                tenant(&r.tenant_id)?,
                deployment_id(&r.deployment_id)?,
            )
            .await?;
        Ok(Response::new(pb::GetDeploymentResponse {
            deployment: Some(deployment(&view)),
        }))
    }

    async fn list_deployments(
        &self,
        req: Request<pb::ListDeploymentsRequest>,
    ) -> Result<Response<pb::ListDeploymentsResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        let instance = if r.instance_ref.trim().is_empty() {
            None
        } else {
            Some(reference("instance_ref", &r.instance_ref)?)
        };
        let size = page_size(r.page_size);
        let rows = self
            .app
            .list_deployments(
                &who,
                tenant(&r.tenant_id)?,
                instance.as_ref(),
                page_token(&r.page_token)?,
                size,
            )
            .await?;
        Ok(Response::new(pb::ListDeploymentsResponse {
            next_page_token: next_token(&rows, size, |d| d.deployment_id),
            deployments: rows.iter().map(deployment_row).collect(),
        }))
    }

    type WatchDeploymentStream = super::reads::EventStream;

    async fn watch_deployment(
        &self,
        req: Request<pb::WatchDeploymentRequest>,
    ) -> Result<Response<Self::WatchDeploymentStream>, Status> {
        super::reads::watch_deployment(&self.app, req).await
    }

    async fn get_logs(
        &self,
        req: Request<pb::GetLogsRequest>,
    ) -> Result<Response<pb::GetLogsResponse>, Status> {
        super::reads::get_logs(&self.app, req).await
    }

    async fn approve(
        &self,
        req: Request<pb::ApproveRequest>,
    ) -> Result<Response<pb::ApproveResponse>, Status> {
        super::decisions::approve(&self.app, req).await
    }

    async fn reject(
        &self,
        req: Request<pb::RejectRequest>,
    ) -> Result<Response<pb::RejectResponse>, Status> {
        super::decisions::reject(&self.app, req).await
    }

    async fn cancel(
        &self,
        req: Request<pb::CancelRequest>,
    ) -> Result<Response<pb::CancelResponse>, Status> {
        super::decisions::cancel(&self.app, req).await
    }

    async fn get_plans(
        &self,
        req: Request<pb::GetPlansRequest>,
    ) -> Result<Response<pb::GetPlansResponse>, Status> {
        super::reads::get_plans(&self.app, req).await
    }
}
