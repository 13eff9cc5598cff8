//! `cairn.tenancy.v1.Targets`.
use cairn_proto::tenancy as pb;
use tonic::{Request, Response, Status};

use super::convert::{next_token, page_token, target, validation};
use super::who;
use crate::app::target_validation::TargetRef;
use crate::app::{App, page_size};
use crate::domain::ids::{TargetId, TenantId};
use crate::domain::names::TargetName;
use crate::domain::target::TargetSpec;
use crate::error::Error;

pub struct TargetsService {
    pub app: App,
}

fn ids(tenant: &str, target: &str) -> Result<(TenantId, TargetId), Error> {
    Ok((
        TenantId::parse("tenant_id", tenant)?,
        TargetId::parse("target_id", target)?,
    ))
}

#[tonic::async_trait]
impl pb::targets_server::Targets for TargetsService {
    async fn create_target(
        &self,
        req: Request<pb::CreateTargetRequest>,
    ) -> Result<Response<pb::CreateTargetResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let tenant = TenantId::parse("tenant_id", &r.tenant_id).map_err(Error::from)?;
        let name = TargetName::parse(&r.name).map_err(Error::from)?;
        let spec = TargetSpec::try_from(r.spec).map_err(Error::from)?;
        let row = self.app.create_target(&who, tenant, name, spec).await?;
        Ok(Response::new(pb::CreateTargetResponse {
            target: Some(target(&row)),
        }))
    }

    async fn get_target(
        &self,
        req: Request<pb::GetTargetRequest>,
    ) -> Result<Response<pb::GetTargetResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        // By id, or by name when no id is given.
        let row = if r.target_id.is_empty() && !r.name.is_empty() {
            let tenant = TenantId::parse("tenant_id", &r.tenant_id).map_err(Error::from)?;
            let name = TargetName::parse(&r.name).map_err(Error::from)?;
            self.app.get_target_by_name(&who, tenant, name).await?
        } else {
            let (tenant, id) = ids(&r.tenant_id, &r.target_id)?;
            self.app.get_target(&who, tenant, id).await?
        };
        Ok(Response::new(pb::GetTargetResponse {
            target: Some(target(&row)),
        }))
    }

    async fn list_targets(
        &self,
        req: Request<pb::ListTargetsRequest>,
    ) -> Result<Response<pb::ListTargetsResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let tenant = TenantId::parse("tenant_id", &r.tenant_id).map_err(Error::from)?;
        let rows = self
            .app
            .list_targets(&who, tenant, page_token(&r.page_token)?, r.page_size)
            .await?;
        Ok(Response::new(pb::ListTargetsResponse {
            next_page_token: next_token(&rows, page_size(r.page_size), |t| t.target_id.to_string()),
            targets: rows.iter().map(target).collect(),
        }))
    }

    async fn update_target(
        &self,
        req: Request<pb::UpdateTargetRequest>,
    ) -> Result<Response<pb::UpdateTargetResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let (tenant, id) = ids(&r.tenant_id, &r.target_id)?;
        let spec = TargetSpec::try_from(r.spec).map_err(Error::from)?;
        let row = self.app.update_target(&who, tenant, id, spec).await?;
        Ok(Response::new(pb::UpdateTargetResponse {
            target: Some(target(&row)),
        }))
    }

    async fn delete_target(
        &self,
        req: Request<pb::DeleteTargetRequest>,
    ) -> Result<Response<pb::DeleteTargetResponse>, Status> {
        let who = who(&req)?;
        let (tenant, id) = ids(&req.get_ref().tenant_id, &req.get_ref().target_id)?;
        self.app.delete_target(&who, tenant, id).await?;
        Ok(Response::new(pb::DeleteTargetResponse {}))
    }

    async fn validate_target(
        &self,
        req: Request<pb::ValidateTargetRequest>,
    ) -> Result<Response<pb::ValidateTargetResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        let tenant = TenantId::parse("tenant_id", &r.tenant_id).map_err(Error::from)?;
        let target = TargetRef::parse("target_ref", &r.target_ref)?;
        let (row, v) = self.app.validate_target(&who, tenant, target).await?;
        Ok(Response::new(pb::ValidateTargetResponse {
            target_id: row.target_id.to_string(),
            validation: Some(validation(&v)),
        }))
    }
}
