//! `cairn.tenancy.v1.Tokens`. Login, ExchangeApiToken and GetSigningKeys need no access
//! token (the server's auth layer lets them through).
use std::time::Duration;

use cairn_proto::tenancy as pb;
use tonic::{Request, Response, Status};

use super::convert::{api_token, next_token, page_token, ts};
use super::who;
use crate::app::tokens::Issued;
use crate::app::{App, page_size};
use crate::domain::ids::{TenantId, TokenId};
use crate::domain::password::Password;
use crate::domain::roles::parse_user_role;
use crate::error::Error;

pub struct TokensService {
    pub app: App,
}

fn access_token(i: Issued) -> pb::AccessToken {
    pb::AccessToken {
        access_token: i.token,
        expires_at: Some(ts(i.expires_at)),
        role: i.role.as_str().to_owned(),
        tenant_id: i.tenant_id.map(|t| t.to_string()).unwrap_or_default(),
        scopes: i.scopes,
    }
}

#[tonic::async_trait]
impl pb::tokens_server::Tokens for TokensService {
    async fn login(
        &self,
        req: Request<pb::LoginRequest>,
    ) -> Result<Response<pb::AccessToken>, Status> {
        let r = req.into_inner();
        let password = Password::presented(r.password).map_err(|_| Error::bad_credentials())?;
        let issued = self.app.login(&r.tenant_slug, &r.email, password).await?;
        Ok(Response::new(access_token(issued)))
    }

    async fn exchange_api_token(
        &self,
        req: Request<pb::ExchangeApiTokenRequest>,
    ) -> Result<Response<pb::AccessToken>, Status> {
        let issued = self.app.exchange(&req.get_ref().api_token).await?;
        Ok(Response::new(access_token(issued)))
    }

    async fn get_signing_keys(
        &self,
        _req: Request<pb::GetSigningKeysRequest>,
    ) -> Result<Response<pb::GetSigningKeysResponse>, Status> {
        let (jwks_json, active_kid) = self.app.signing_keys();
        Ok(Response::new(pb::GetSigningKeysResponse {
            jwks_json,
            active_kid,
        }))
    }

    async fn create_api_token(
        &self,
        req: Request<pb::CreateApiTokenRequest>,
    ) -> Result<Response<pb::CreateApiTokenResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let tenant = TenantId::parse("tenant_id", &r.tenant_id).map_err(Error::from)?;
        let role = if r.role.is_empty() {
            None
        } else {
            Some(parse_user_role("role", &r.role).map_err(Error::from)?)
        };
        let ttl = (r.ttl_seconds > 0).then(|| Duration::from_secs(r.ttl_seconds));
        let (row, secret) = self
            .app
            .create_api_token(&who, tenant, &r.name, role, r.scopes, ttl)
            .await?;
        Ok(Response::new(pb::CreateApiTokenResponse {
            token: Some(api_token(&row)),
            secret: secret.expose().to_owned(),
        }))
    }

    async fn list_api_tokens(
        &self,
        req: Request<pb::ListApiTokensRequest>,
    ) -> Result<Response<pb::ListApiTokensResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let tenant = TenantId::parse("tenant_id", &r.tenant_id).map_err(Error::from)?;
        let rows = self
            .app
            .list_api_tokens(&who, tenant, page_token(&r.page_token)?, r.page_size)
            .await?;
        Ok(Response::new(pb::ListApiTokensResponse {
            next_page_token: next_token(&rows, page_size(r.page_size), |t| t.token_id.to_string()),
            tokens: rows.iter().map(api_token).collect(),
        }))
    }

    async fn revoke_api_token(
        &self,
        req: Request<pb::RevokeApiTokenRequest>,
    ) -> Result<Response<pb::RevokeApiTokenResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let tenant = TenantId::parse("tenant_id", &r.tenant_id).map_err(Error::from)?;
        let token = TokenId::parse("token_id", &r.token_id).map_err(Error::from)?;
        let row = self.app.revoke_api_token(&who, tenant, token).await?;
        Ok(Response::new(pb::RevokeApiTokenResponse {
            token: Some(api_token(&row)),
        }))
    }
}
