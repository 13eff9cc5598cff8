//! Users and memberships: admins add members and change roles (only owners touch the owner
//! role; a tenant always keeps an owner); users set their own password.
use cairn_auth::{Principal, Role};
use serde_json::json;
use uuid::Uuid;

use super::access;
use super::changes::{self, Change};
use super::{App, page_size};
use crate::domain::ids::{TenantId, UserId};
use crate::domain::names::{Email, display_name};
use crate::domain::password::Password;
use crate::domain::roles::{may_grant, may_remove};
use crate::error::{Error, Result};
use crate::store;
use crate::store::users::MemberRow;

fn stored_role(row: &MemberRow) -> Result<Role> {
    row.role
        .parse()
        .map_err(|_| Error::internal(format!("membership has unknown role {:?}", row.role)))
}

impl App {
    /// Creates the user if the email is new (with `password`), then adds the membership.
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant))]
    pub async fn add_user(
        &self,
        who: &Principal,
        tenant: TenantId,
        email: Email,
        name: &str,
        password: Password,
        role: Role,
    ) -> Result<MemberRow> {
        access::member(who, tenant, Role::Admin, "tenant")?;
        may_grant(who.role, None, role)?;
        let name = display_name("display_name", name)?;
        let hash = self.hash_password(password).await?;
        let row = cairn_db::transaction!(&self.pool, |conn| {
            store::tenants::tenant_get(conn, tenant.uuid())
                .await?
                .ok_or_else(|| Error::not_found("tenant".to_owned()))?;
            let (user, _created) = store::users::user_insert_or_get(
                conn,
                UserId::new().uuid(),
                email.as_str(),
                &name,
                Some(&hash),
                false,
            )
            .await?;
            if !store::users::membership_insert(conn, tenant.uuid(), user.user_id, role.as_str())
                .await?
            {
                return Err(Error::already_exists("member".to_owned()));
            }
            changes::record(
                conn,
                Change {
                    tenant_id: Some(tenant.uuid()),
                    actor: &who.subject,
                    object_type: cairn_bus::Aggregate::Membership,
                    object_id: user.user_id.to_string(),
                    event: "created",
                    detail: json!({ "role": role.as_str() }),
                },
            )
            .await?;
            store::users::membership_get(conn, tenant.uuid(), user.user_id)
                .await?
                .ok_or_else(|| Error::internal("membership vanished".to_owned()))
        })?;
        self.committed();
        Ok(row)
    }

    pub async fn get_user(
        &self,
        who: &Principal,
        tenant: TenantId,
        user: UserId,
    ) -> Result<MemberRow> {
        access::member(who, tenant, Role::Viewer, "user")?;
        let mut conn = self.pool.acquire().await?;
        store::users::membership_get(&mut conn, tenant.uuid(), user.uuid())
            .await?
            .ok_or_else(|| Error::not_found("user".to_owned()))
    }

    pub async fn list_users(
        &self,
        who: &Principal,
        tenant: TenantId,
        after: Option<Uuid>,
        size: u32,
    ) -> Result<Vec<MemberRow>> {
        access::member(who, tenant, Role::Viewer, "tenant")?;
        let mut conn = self.pool.acquire().await?;
        Ok(store::users::membership_list(&mut conn, tenant.uuid(), after, page_size(size)).await?)
    }

    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, user_id = %user))]
    pub async fn set_role(
        &self,
        who: &Principal,
        tenant: TenantId,
        user: UserId,
        role: Role,
    ) -> Result<MemberRow> {
        access::member(who, tenant, Role::Admin, "user")?;
        let row = cairn_db::transaction!(&self.pool, |conn| {
            let owners = store::users::owners_lock_count(conn, tenant.uuid()).await?;
            let current = store::users::membership_get_for_update(conn, tenant.uuid(), user.uuid())
                .await?
                .ok_or_else(|| Error::not_found("user".to_owned()))?;
            let current_role = stored_role(&current)?;
            may_grant(who.role, Some(current_role), role)?;
            if current_role == Role::Owner && role != Role::Owner && owners <= 1 {
                return Err(Error::failed_precondition(
                    "the tenant's last owner keeps the owner role; make another member owner first"
                        .to_owned(),
                ));
            }
            store::users::membership_set_role(conn, tenant.uuid(), user.uuid(), role.as_str())
                .await?;
            changes::record(
                conn,
                Change {
                    tenant_id: Some(tenant.uuid()),
                    actor: &who.subject,
                    object_type: cairn_bus::Aggregate::Membership,
                    object_id: user.to_string(),
                    event: "role_changed",
                    detail: json!({ "from": current_role.as_str(), "to": role.as_str() }),
                },
            )
            .await?;
            store::users::membership_get(conn, tenant.uuid(), user.uuid())
                .await?
                .ok_or_else(|| Error::internal("membership vanished".to_owned()))
        })?;
        self.committed();
        Ok(row)
    }

    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, user_id = %user))]
    pub async fn remove_user(&self, who: &Principal, tenant: TenantId, user: UserId) -> Result<()> {
        access::member(who, tenant, Role::Admin, "user")?;
        cairn_db::transaction!(&self.pool, |conn| {
            let owners = store::users::owners_lock_count(conn, tenant.uuid()).await?;
            let current = store::users::membership_get_for_update(conn, tenant.uuid(), user.uuid())
                .await?
                .ok_or_else(|| Error::not_found("user".to_owned()))?;
            let current_role = stored_role(&current)?;
            may_remove(who.role, current_role)?;
            if current_role == Role::Owner && owners <= 1 {
                return Err(Error::failed_precondition(
                    "the tenant's last owner cannot be removed".to_owned(),
                ));
            }
            store::users::membership_delete(conn, tenant.uuid(), user.uuid()).await?;
            let revoked =
                store::tokens::tokens_revoke_for_member(conn, tenant.uuid(), user.uuid()).await?;
            changes::record(
                conn,
                Change {
                    tenant_id: Some(tenant.uuid()),
                    actor: &who.subject,
                    object_type: cairn_bus::Aggregate::Membership,
                    object_id: user.to_string(),
                    event: "deleted",
                    detail: json!({ "role": current_role.as_str(), "tokens_revoked": revoked }),
                },
            )
            .await?;
            Ok::<_, Error>(())
        })?;
        self.committed();
        Ok(())
    }

    /// Sets the caller's own password; the current one must match when there is one.
    #[tracing::instrument(skip_all)]
    pub async fn set_password(
        &self,
        who: &Principal,
        current: Password,
        new: Password,
    ) -> Result<()> {
        let user = access::user_id(who)?;
        let tenant = who
            .tenant_id
            .ok_or_else(|| Error::permission_denied("not a user".to_owned()))?;
        let existing = {
            let mut conn = self.pool.acquire().await?;
            store::users::user_get(&mut conn, user.uuid())
                .await?
                .ok_or_else(|| Error::not_found("user".to_owned()))?
        };
        if let Some(phc) = existing.password_hash
            && !self.verify_password(current, Some(phc)).await?
        {
            return Err(Error::permission_denied(
                "the current password does not match".to_owned(),
            ));
        }
        let hash = self.hash_password(new).await?;
        cairn_db::transaction!(&self.pool, |conn| {
            store::users::user_set_password(conn, user.uuid(), &hash).await?;
            changes::record(
                conn,
                Change {
                    tenant_id: Some(tenant),
                    actor: &who.subject,
                    object_type: cairn_bus::Aggregate::User,
                    object_id: user.to_string(),
                    event: "password_changed",
                    detail: json!({}),
                },
            )
            .await?;
            Ok::<_, Error>(())
        })?;
        self.committed();
        Ok(())
    }
}
