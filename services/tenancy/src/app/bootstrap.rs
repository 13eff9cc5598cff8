//! First start: the first tenant and its owner on an empty database (once, guarded by the
//! `bootstrap` row), and service API tokens for named service accounts.
use serde_json::json;

use super::changes::{self, Change};
use crate::domain::api_token::{self, ApiTokenSecret};
use crate::domain::ids::{TenantId, UserId};
use crate::domain::names::{Email, ServiceAccountName, Slug};
use crate::error::{Error, Result};
use crate::store;
use crate::store::tokens::{NewToken, Owner};

/// The actor recorded for changes made by the command-line subcommands.
pub const CLI_ACTOR: &str = "cairn-tenancy-cli";

/// What bootstrap created.
#[derive(Debug)]
pub struct Bootstrapped {
    pub tenant_id: TenantId,
    pub user_id: UserId,
    /// An owner API token with the platform-admin scope; shown once.
    pub api_token: ApiTokenSecret,
}

/// Creates the first tenant and its owner (a platform admin without a password) and an
/// API token for the owner. Refuses when bootstrap ran before or any tenant exists.
pub async fn bootstrap(
    pool: &sqlx::PgPool,
    slug: &Slug,
    tenant_name: &str,
    owner_email: &Email,
    owner_name: &str,
) -> Result<Bootstrapped> {
    let minted = api_token::generate()?;
    let (tenant_id, user_id) = cairn_db::transaction!(pool, |conn| {
        if store::tenants::bootstrap_done_or_not_empty(conn).await? {
            return Err(Error::failed_precondition(
                "bootstrap already ran (or tenants exist); it runs once on an empty database"
                    .to_owned(),
            ));
        }
        let tenant_id = TenantId::new();
        store::tenants::tenant_insert(conn, tenant_id.uuid(), slug.as_str(), tenant_name)
            .await?
            .ok_or_else(|| Error::already_exists(format!("tenant {:?}", slug.as_str())))?;
        if !store::tenants::bootstrap_claim(conn, tenant_id.uuid()).await? {
            return Err(Error::failed_precondition(
                "bootstrap already ran".to_owned(),
            ));
        }
        let (user, _) = store::users::user_insert_or_get(
            conn,
            UserId::new().uuid(),
            owner_email.as_str(),
            owner_name,
            None,
            true,
        )
        .await?;
        store::users::membership_insert(conn, tenant_id.uuid(), user.user_id, "owner").await?;
        let scopes = vec![crate::app::access::PLATFORM_ADMIN_SCOPE.to_owned()];
        store::tokens::token_insert(
            conn,
            &NewToken {
                token_id: minted.token_id.0,
                digest: &minted.digest,
                name: "bootstrap",
                owner: Owner::Member {
                    tenant_id: tenant_id.uuid(),
                    user_id: user.user_id,
                },
                role: "owner",
                scopes: &scopes,
                expires_at: None,
            },
        )
        .await?;
        changes::record(
            conn,
            Change {
                tenant_id: Some(tenant_id.uuid()),
                actor: CLI_ACTOR,
                object_type: cairn_bus::Aggregate::Tenant,
                object_id: tenant_id.to_string(),
                event: "bootstrapped",
                detail: json!({ "slug": slug.as_str(), "owner": user.user_id }),
            },
        )
        .await?;
        Ok::<_, Error>((tenant_id, UserId::from(user.user_id)))
    })?;
    Ok(Bootstrapped {
        tenant_id,
        user_id,
        api_token: minted.secret,
    })
}

/// Mints an API token for the service account `name` (created if needed).
pub async fn service_token(
    pool: &sqlx::PgPool,
    name: &ServiceAccountName,
    ttl: Option<std::time::Duration>,
) -> Result<ApiTokenSecret> {
    let minted = api_token::generate()?;
    let expires_at = match ttl {
        None => None,
        Some(ttl) => Some(
            chrono::Utc::now()
                + chrono::Duration::from_std(ttl)
                    .map_err(|_| Error::invalid_argument("ttl is too large"))?,
        ),
    };
    cairn_db::transaction!(pool, |conn| {
        let (account, _) =
            store::service_accounts::service_account_ensure(conn, name.as_str()).await?;
        store::tokens::token_insert(
            conn,
            &NewToken {
                token_id: minted.token_id.0,
                digest: &minted.digest,
                name: name.as_str(),
                owner: Owner::Service {
                    service_account_id: account,
                },
                role: "service",
                scopes: &[],
                expires_at,
            },
        )
        .await?;
        changes::record(
            conn,
            Change {
                tenant_id: None,
                actor: CLI_ACTOR,
                object_type: cairn_bus::Aggregate::ServiceAccount,
                object_id: account.to_string(),
                event: "token_created",
                detail: json!({ "name": name.as_str(), "token_id": minted.token_id.0 }),
            },
        )
        .await?;
        Ok::<_, Error>(())
    })?;
    Ok(minted.secret)
}
