//! Access tokens (password login, API token exchange) and API tokens (create, list,
//! revoke). Credential failures all answer the same UNAUTHENTICATED, so nothing tells
//! whether an email, tenant or token exists.
use cairn_auth::{Claims, Principal, Role};
use chrono::{DateTime, Utc};
use serde_json::json;
use uuid::Uuid;

use super::access::{self, PLATFORM_ADMIN_SCOPE};
use super::changes::{self, Change};
use super::{App, page_size};
use crate::domain::api_token::{self, ApiTokenSecret, PresentedToken};
use crate::domain::ids::{TenantId, TokenId};
use crate::domain::names::{Email, Slug, display_name};
use crate::domain::password::Password;
use crate::domain::roles::lower;
use crate::error::{Error, Result};
use crate::store;
use crate::store::tokens::{NewToken, Owner, TokenRow};

/// An issued access token and what it grants.
#[derive(Debug, Clone)]
pub struct Issued {
    pub token: String,
    pub expires_at: DateTime<Utc>,
    pub role: Role,
    pub tenant_id: Option<Uuid>,
    pub scopes: Vec<String>,
}

impl App {
    fn issue(&self, claims: Claims) -> Result<Issued> {
        let token = self.signer.sign(&claims)?;
        Ok(Issued {
            token,
            expires_at: DateTime::from_timestamp(claims.exp, 0).unwrap_or_default(),
            role: claims.role,
            tenant_id: claims.tid.as_deref().and_then(|t| Uuid::parse_str(t).ok()),
            scopes: claims.scopes,
        })
    }

    /// Password login to one tenant.
    #[tracing::instrument(skip_all)]
    pub async fn login(
        &self,
        tenant_slug: &str,
        email: &str,
        password: Password,
    ) -> Result<Issued> {
        let normalized = email.trim().to_lowercase();
        if let Err(wait) = self.login_limiter.check(&normalized) {
            tracing::warn!("login attempts for one account rate-limited");
            return Err(Error::RateLimited(format!(
                "too many login attempts; retry in {}s",
                wait.as_secs().max(1)
            )));
        }
        let (Ok(slug), Ok(email)) = (Slug::parse(tenant_slug), Email::parse(email)) else {
            let _ = self.verify_password(password, None).await?;
            return Err(Error::bad_credentials());
        };
        let (user, membership) = {
            let mut conn = self.pool.acquire().await?;
            let user = store::users::user_get_by_email(&mut conn, email.as_str()).await?;
            let tenant = store::tenants::tenant_get_by_slug(&mut conn, slug.as_str()).await?;
            let membership = match (&user, &tenant) {
                (Some(u), Some(t)) => {
                    store::users::membership_get(&mut conn, t.tenant_id, u.user_id).await?
                }
                _ => None,
            };
            (user, membership)
        };
        let phc = match (&user, &membership) {
            (Some(u), Some(_)) => u.password_hash.clone(),
            _ => None,
        };
        let ok = self.verify_password(password, phc).await?;
        let (Some(user), Some(membership), true) = (user, membership, ok) else {
            tracing::info!("login refused");
            return Err(Error::bad_credentials());
        };
        let role: Role = membership
            .role
            .parse()
            .map_err(|_| Error::internal("membership has an unknown role".to_owned()))?;
        let scopes: Vec<String> = if user.platform_admin {
            vec![PLATFORM_ADMIN_SCOPE.to_owned()]
        } else {
            Vec::new()
        };
        let claims = Claims::new_user(
            user.user_id.to_string(),
            membership.tenant_id,
            role,
            self.settings.access_token_ttl,
        )
        .with_scopes(scopes);
        let issued = self.issue(claims)?;
        cairn_db::transaction!(&self.pool, |conn| {
            changes::record(
                conn,
                Change {
                    tenant_id: Some(membership.tenant_id),
                    actor: &user.user_id.to_string(),
                    object_type: cairn_bus::Aggregate::Session,
                    object_id: user.user_id.to_string(),
                    event: "login",
                    detail: json!({ "method": "password" }),
                },
            )
            .await?;
            Ok::<_, Error>(())
        })?;
        self.committed();
        tracing::info!(user_id = %user.user_id, tenant_id = %membership.tenant_id, "login");
        Ok(issued)
    }

    /// Exchanges an API token for an access token. Refused (uniformly) when the token is
    /// malformed, unknown, does not match, is expired or revoked, or its user is no longer
    /// a member; a user token never grants more than the member's current role.
    #[tracing::instrument(skip_all)]
    pub async fn exchange(&self, api_token: &str) -> Result<Issued> {
        let Ok(presented) = PresentedToken::parse(api_token) else {
            return Err(Error::bad_credentials());
        };
        let token_id = presented.token_id;
        let claims = cairn_db::transaction!(&self.pool, |conn| {
            let row = store::tokens::token_get(conn, token_id.0).await?;
            // Compare against something even when the id is unknown.
            let digest = row
                .as_ref()
                .map_or(&[0u8; 32][..], |r| &r.secret_sha256[..]);
            let matches = presented.matches(digest);
            let Some(row) = row.filter(|_| matches) else {
                return Err(Error::bad_credentials());
            };
            if row.revoked_at.is_some() || row.expires_at.is_some_and(|e| e <= Utc::now()) {
                return Err(Error::bad_credentials());
            }
            let claims = match (row.tenant_id, row.user_id, row.service_account_id) {
                (Some(tenant), Some(user), None) => {
                    let member = store::users::membership_get(conn, tenant, user).await?;
                    let account = store::users::user_get(conn, user).await?;
                    let (Some(member), Some(account)) = (member, account) else {
                        return Err(Error::bad_credentials());
                    };
                    let member_role: Role = member.role.parse().map_err(|_| {
                        Error::internal("membership has an unknown role".to_owned())
                    })?;
                    let token_role: Role = row
                        .role
                        .parse()
                        .map_err(|_| Error::internal("API token has an unknown role".to_owned()))?;
                    let scopes: Vec<String> = row
                        .scopes
                        .iter()
                        .filter(|s| s.as_str() != PLATFORM_ADMIN_SCOPE || account.platform_admin)
                        .cloned()
                        .collect();
                    Claims::new_user(
                        user.to_string(),
                        tenant,
                        lower(token_role, member_role),
                        self.settings.access_token_ttl,
                    )
                    .with_scopes(scopes)
                }
                (None, None, Some(account)) => {
                    let Some(name) =
                        store::service_accounts::service_account_name(conn, account).await?
                    else {
                        return Err(Error::bad_credentials());
                    };
                    Claims::new_service(name, self.settings.access_token_ttl)
                        .with_scopes(row.scopes.clone())
                }
                _ => return Err(Error::internal("API token has no valid owner".to_owned())),
            };
            store::tokens::token_touch(conn, token_id.0).await?;
            Ok::<_, Error>(claims)
        })
        .inspect_err(|e| {
            if e.is_unauthenticated() {
                tracing::info!(%token_id, "API token exchange refused");
            }
        })?;
        self.issue(claims)
    }

    /// Mints an API token acting as the caller in their tenant, with at most the caller's
    /// role and scopes. Returns the row and the secret (shown once).
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant))]
    pub async fn create_api_token(
        &self,
        who: &Principal,
        tenant: TenantId,
        name: &str,
        role: Option<Role>,
        scopes: Vec<String>,
        ttl: Option<std::time::Duration>,
    ) -> Result<(TokenRow, ApiTokenSecret)> {
        access::member(who, tenant, Role::Viewer, "tenant")?;
        let user = access::user_id(who)?;
        let name = display_name("name", name)?;
        let role = role.unwrap_or(who.role);
        if role.is_service() || !who.role.satisfies(role) {
            return Err(Error::permission_denied(format!(
                "a token may not carry role {role}, above the caller's {}",
                who.role
            )));
        }
        if let Some(scope) = scopes.iter().find(|s| !who.has_scope(s)) {
            return Err(Error::permission_denied(format!(
                "a token may not carry scope {scope:?}, which the caller lacks"
            )));
        }
        let expires_at = match ttl {
            None => None,
            Some(ttl) => Some(
                Utc::now()
                    + chrono::Duration::from_std(ttl)
                        .map_err(|_| Error::invalid_argument("ttl_seconds is too large"))?,
            ),
        };
        let minted = api_token::generate()?;
        let row = cairn_db::transaction!(&self.pool, |conn| {
            store::users::membership_get(conn, tenant.uuid(), user.uuid())
                .await?
                .ok_or_else(|| Error::not_found("tenant".to_owned()))?;
            let row = store::tokens::token_insert(
                conn,
                &NewToken {
                    token_id: minted.token_id.0,
                    digest: &minted.digest,
                    name: &name,
                    owner: Owner::Member {
                        tenant_id: tenant.uuid(),
                        user_id: user.uuid(),
                    },
                    role: role.as_str(),
                    scopes: &scopes,
                    expires_at,
                },
            )
            .await?;
            changes::record(
                conn,
                Change {
                    tenant_id: Some(tenant.uuid()),
                    actor: &who.subject,
                    object_type: cairn_bus::Aggregate::ApiToken,
                    object_id: row.token_id.to_string(),
                    event: "created",
                    detail: json!({ "name": row.name, "role": row.role, "scopes": row.scopes }),
                },
            )
            .await?;
            Ok::<_, Error>(row)
        })?;
        self.committed();
        Ok((row, minted.secret))
    }

    /// Admins list every token of the tenant; others their own.
    pub async fn list_api_tokens(
        &self,
        who: &Principal,
        tenant: TenantId,
        after: Option<Uuid>,
        size: u32,
    ) -> Result<Vec<TokenRow>> {
        access::member(who, tenant, Role::Viewer, "tenant")?;
        let only = if who.role.satisfies(Role::Admin) {
            None
        } else {
            Some(access::user_id(who)?.uuid())
        };
        let mut conn = self.pool.acquire().await?;
        Ok(
            store::tokens::token_list(&mut conn, tenant.uuid(), only, after, page_size(size))
                .await?,
        )
    }

    /// Revokes a token: the caller's own, or any of the tenant's for an admin. Takes effect
    /// at the token's next exchange.
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, token_id = %token))]
    pub async fn revoke_api_token(
        &self,
        who: &Principal,
        tenant: TenantId,
        token: TokenId,
    ) -> Result<TokenRow> {
        access::member(who, tenant, Role::Viewer, "API token")?;
        let is_admin = who.role.satisfies(Role::Admin);
        let caller = access::user_id(who)?;
        let row = cairn_db::transaction!(&self.pool, |conn| {
            let existing = store::tokens::token_get_in_tenant(conn, tenant.uuid(), token.0)
                .await?
                .ok_or_else(|| Error::not_found("API token".to_owned()))?;
            if !is_admin && existing.user_id != Some(caller.uuid()) {
                return Err(Error::permission_denied(
                    "only an admin may revoke another member's token".to_owned(),
                ));
            }
            // Whether this call revoked it is decided by the revoking statement, not by the
            // read above: two concurrent revokes both read the token live.
            let (row, revoked_now) = store::tokens::token_revoke(conn, tenant.uuid(), token.0)
                .await?
                .ok_or_else(|| Error::not_found("API token".to_owned()))?;
            if revoked_now {
                changes::record(
                    conn,
                    Change {
                        tenant_id: Some(tenant.uuid()),
                        actor: &who.subject,
                        object_type: cairn_bus::Aggregate::ApiToken,
                        object_id: token.to_string(),
                        event: "revoked",
                        detail: json!({ "name": row.name }),
                    },
                )
                .await?;
            }
            Ok::<_, Error>(row)
        })?;
        self.committed();
        Ok(row)
    }

    /// The public JWKS and the active key id.
    pub fn signing_keys(&self) -> (String, String) {
        (self.signer.jwks_json(), self.signer.active_kid().to_owned())
    }
}
