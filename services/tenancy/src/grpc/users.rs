//! `cairn.tenancy.v1.Users`.
use cairn_proto::tenancy as pb;
use tonic::{Request, Response, Status};

use super::convert::{member, next_token, page_token};
use super::who;
use crate::app::{App, page_size};
use crate::domain::ids::{TenantId, UserId};
use crate::domain::names::Email;
use crate::domain::password::Password;
use crate::domain::roles::parse_user_role;
use crate::error::Error;

pub struct UsersService {
    pub app: App,
}

fn ids(tenant: &str, user: &str) -> Result<(TenantId, UserId), Error> {
    Ok((
        TenantId::parse("tenant_id", tenant)?,
        UserId::parse("user_id", user)?,
    ))
}

#[tonic::async_trait]
impl pb::users_server::Users for UsersService {
    async fn add_user(
        &self,
        req: Request<pb::AddUserRequest>,
    ) -> Result<Response<pb::AddUserResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let tenant = TenantId::parse("tenant_id", &r.tenant_id).map_err(Error::from)?;
        let email = Email::parse(&r.email).map_err(Error::from)?;
        let role = parse_user_role("role", &r.role).map_err(Error::from)?;
        let password = Password::new_password(r.password).map_err(Error::from)?;
        let row = self
            .app
            .add_user(&who, tenant, email, &r.display_name, password, role)
            .await?;
        Ok(Response::new(pb::AddUserResponse {
            member: Some(member(&row)),
        }))
    }

    async fn get_user(
        &self,
        req: Request<pb::GetUserRequest>,
    ) -> Result<Response<pb::GetUserResponse>, Status> {
        let who = who(&req)?;
        let (tenant, user) = ids(&req.get_ref().tenant_id, &req.get_ref().user_id)?;
        let row = self.app.get_user(&who, tenant, user).await?;
        Ok(Response::new(pb::GetUserResponse {
            member: Some(member(&row)),
        }))
    }

    async fn list_users(
        &self,
        req: Request<pb::ListUsersRequest>,
    ) -> Result<Response<pb::ListUsersResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let tenant = TenantId::parse("tenant_id", &r.tenant_id).map_err(Error::from)?;
        let rows = self
            .app
            .list_users(&who, tenant, page_token(&r.page_token)?, r.page_size)
            .await?;
        Ok(Response::new(pb::ListUsersResponse {
            next_page_token: next_token(&rows, page_size(r.page_size), |m| m.user_id.to_string()),
            members: rows.iter().map(member).collect(),
        }))
    }

    async fn set_role(
        &self,
        req: Request<pb::SetRoleRequest>,
    ) -> Result<Response<pb::SetRoleResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let (tenant, user) = ids(&r.tenant_id, &r.user_id)?;
        let role = parse_user_role("role", &r.role).map_err(Error::from)?;
        let row = self.app.set_role(&who, tenant, user, role).await?;
        Ok(Response::new(pb::SetRoleResponse {
            member: Some(member(&row)),
        }))
    }

    async fn remove_user(
        &self,
        req: Request<pb::RemoveUserRequest>,
    ) -> Result<Response<pb::RemoveUserResponse>, Status> {
        let who = who(&req)?;
        let (tenant, user) = ids(&req.get_ref().tenant_id, &req.get_ref().user_id)?;
        self.app.remove_user(&who, tenant, user).await?;
        Ok(Response::new(pb::RemoveUserResponse {}))
    }

    async fn set_password(
        &self,
        req: Request<pb::SetPasswordRequest>,
    ) -> Result<Response<pb::SetPasswordResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let current = Password::presented(r.current_password).map_err(Error::from)?;
        let new = Password::new_password(r.new_password).map_err(Error::from)?;
        self.app.set_password(&who, current, new).await?;
        Ok(Response::new(pb::SetPasswordResponse {}))
    }
}
