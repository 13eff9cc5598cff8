//! Tenants: created by platform admins, visible to their members and to services.
use cairn_auth::{Principal, Role};
use serde_json::json;
use uuid::Uuid;

use super::access::{self, is_platform_admin};
use super::changes::{self, Change};
use super::{App, page_size};
use crate::domain::ids::{TenantId, UserId};
use crate::domain::names::{Email, Slug, display_name};
use crate::domain::password::Password;
use crate::error::{Error, Result};
use crate::store::tenants::{self as store, TenantRow};
use crate::store::users::{self, MemberRow};

/// The first owner of a new tenant.
#[derive(Debug)]
pub struct NewOwner {
    pub email: Email,
    pub display_name: String,
    /// Used only when the email is new.
    pub password: Password,
}

impl App {
    /// Creates a tenant with its first owner (created when the email is new).
    #[tracing::instrument(skip_all, fields(slug = %slug.as_str()))]
    pub async fn create_tenant(
        &self,
        who: &Principal,
        slug: Slug,
        name: &str,
        owner: NewOwner,
    ) -> Result<(TenantRow, MemberRow)> {
        access::require_platform_admin(who)?;
        let name = display_name("display_name", name)?;
        let owner_name = display_name("owner_display_name", &owner.display_name)?;
        let hash = self.hash_password(owner.password).await?;
        let rows = cairn_db::transaction!(&self.pool, |conn| {
            let row = store::tenant_insert(conn, TenantId::new().uuid(), slug.as_str(), &name)
                .await?
                .ok_or_else(|| Error::already_exists(format!("tenant {:?}", slug.as_str())))?;
            let (user, _) = users::user_insert_or_get(
                conn,
                UserId::new().uuid(),
                owner.email.as_str(),
                &owner_name,
                Some(&hash),
                false,
            )
            .await?;
            users::membership_insert(conn, row.tenant_id, user.user_id, Role::Owner.as_str())
                .await?;
            changes::record(
                conn,
                Change {
                    tenant_id: Some(row.tenant_id),
                    actor: &who.subject,
                    object_type: cairn_bus::Aggregate::Tenant,
                    object_id: row.tenant_id.to_string(),
                    event: "created",
                    detail: json!({ "slug": row.slug, "owner": user.user_id }),
                },
            )
            .await?;
            let member = users::membership_get(conn, row.tenant_id, user.user_id)
                .await?
                .ok_or_else(|| Error::internal("membership vanished".to_owned()))?;
            Ok::<_, Error>((row, member))
        })?;
        self.committed();
        Ok(rows)
    }

    pub async fn get_tenant(&self, who: &Principal, tenant: TenantId) -> Result<TenantRow> {
        if !is_platform_admin(who) {
            access::member_or_service(who, tenant, Role::Viewer, "tenant")?;
        }
        let mut conn = self.pool.acquire().await?;
        store::tenant_get(&mut conn, tenant.uuid())
            .await?
            .ok_or_else(|| Error::not_found("tenant".to_owned()))
    }

    /// Platform admins see every tenant; a user sees their own.
    pub async fn list_tenants(
        &self,
        who: &Principal,
        after: Option<Uuid>,
        size: u32,
    ) -> Result<Vec<TenantRow>> {
        let mut conn = self.pool.acquire().await?;
        if is_platform_admin(who) {
            return Ok(store::tenant_list(&mut conn, after, page_size(size)).await?);
        }
        let own = who.tenant_id.ok_or_else(|| {
            Error::permission_denied("service principals may not list tenants".to_owned())
        })?;
        if after.is_some_and(|a| a >= own) {
            return Ok(Vec::new());
        }
        Ok(store::tenant_get(&mut conn, own)
            .await?
            .into_iter()
            .collect())
    }
}
