//! `cairn.tenancy.v1.Tenants`.
use cairn_proto::tenancy as pb;
use tonic::{Request, Response, Status};

use super::convert::{member, next_token, page_token, tenant};
use super::who;
use crate::app::tenants::NewOwner;
use crate::app::{App, page_size};
use crate::domain::ids::TenantId;
use crate::domain::names::{Email, Slug};
use crate::domain::password::Password;
use crate::error::Error;

pub struct TenantsService {
    pub app: App,
}

#[tonic::async_trait]
impl pb::tenants_server::Tenants for TenantsService {
    async fn create_tenant(
        &self,
        req: Request<pb::CreateTenantRequest>,
    ) -> Result<Response<pb::CreateTenantResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let slug = Slug::parse(&r.slug).map_err(Error::from)?;
        let owner = NewOwner {
            email: Email::parse(&r.owner_email).map_err(Error::from)?,
            display_name: r.owner_display_name,
            password: Password::new_password(r.owner_password).map_err(Error::from)?,
        };
        let (row, owner) = self
            .app
            .create_tenant(&who, slug, &r.display_name, owner)
            .await?;
        Ok(Response::new(pb::CreateTenantResponse {
            tenant: Some(tenant(&row)),
            owner: Some(member(&owner)),
        }))
    }

    async fn get_tenant(
        &self,
        req: Request<pb::GetTenantRequest>,
    ) -> Result<Response<pb::GetTenantResponse>, Status> {
        let who = who(&req)?;
        let id = TenantId::parse("tenant_id", &req.get_ref().tenant_id).map_err(Error::from)?;
        let row = self.app.get_tenant(&who, id).await?;
        Ok(Response::new(pb::GetTenantResponse {
            tenant: Some(tenant(&row)),
        }))
    }

    async fn list_tenants(
        &self,
        req: Request<pb::ListTenantsRequest>,
    ) -> Result<Response<pb::ListTenantsResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let rows = self
            .app
            .list_tenants(&who, page_token(&r.page_token)?, r.page_size)
            .await?;
        Ok(Response::new(pb::ListTenantsResponse {
            next_page_token: next_token(&rows, page_size(r.page_size), |t| t.tenant_id.to_string()),
            tenants: rows.iter().map(tenant).collect(),
        }))
    }
}
