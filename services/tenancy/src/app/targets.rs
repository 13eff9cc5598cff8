//! Targets: admins manage them; members and services read them. Only the credential
//! reference *name* is stored. Each target gets a random external id when it is created
//! (shown with an AWS target, sent by the runner with every AssumeRole); an update keeps it.
//! An update that changes the role or the credential reference forgets the target's last
//! validation (see `target_validation`).
use cairn_auth::{Principal, Role};
use serde_json::json;
use uuid::Uuid;

use super::access;
use super::changes::{self, Change};
use super::{App, page_size};
use crate::domain::ids::{TargetId, TenantId};
use crate::domain::names::TargetName;
use crate::domain::target::{ExternalId, TargetSpec};
use crate::domain::validation::validated_settings;
use crate::error::{Error, Result};
use crate::store::target_validations as validations;
use crate::store::targets::{self as store, TargetRow};

fn detail(row: &TargetRow) -> serde_json::Value {
    json!({
        "name": row.name,
        "provider": row.provider_kind,
        "credential_ref": row.credential_ref,
        "max_concurrent_deployments": row.max_concurrent_deployments,
        "enabled": row.enabled,
    })
}

impl App {
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant))]
    pub async fn create_target(
        &self,
        who: &Principal,
        tenant: TenantId,
        name: TargetName,
        spec: TargetSpec,
    ) -> Result<TargetRow> {
        access::member(who, tenant, Role::Admin, "tenant")?;
        let external_id = ExternalId::generate()?;
        let row = cairn_db::transaction!(&self.pool, |conn| {
            let row = store::target_insert(
                conn,
                TargetId::new().uuid(),
                tenant.uuid(),
                name.as_str(),
                &spec,
                &external_id,
            )
            .await?
            .ok_or_else(|| Error::already_exists(format!("target {:?}", name.as_str())))?;
            changes::record(
                conn,
                Change {
                    tenant_id: Some(tenant.uuid()),
                    actor: &who.subject,
                    object_type: cairn_bus::Aggregate::Target,
                    object_id: row.target_id.to_string(),
                    event: "created",
                    detail: detail(&row),
                },
            )
            .await?;
            Ok::<_, Error>(row)
        })?;
        self.committed();
        Ok(row)
    }

    pub async fn get_target(
        &self,
        who: &Principal,
        tenant: TenantId,
        target: TargetId,
    ) -> Result<TargetRow> {
        access::member_or_service(who, tenant, Role::Viewer, "target")?;
        let mut conn = self.pool.acquire().await?;
        store::target_get(&mut conn, tenant.uuid(), target.uuid())
            .await?
            .ok_or_else(|| Error::not_found("target".to_owned()))
    }

    /// A target by its name in the tenant (for callers that name targets, e.g. the workflow).
    pub async fn get_target_by_name(
        &self,
        who: &Principal,
        tenant: TenantId,
        name: TargetName,
    ) -> Result<TargetRow> {
        access::member_or_service(who, tenant, Role::Viewer, "target")?;
        let mut conn = self.pool.acquire().await?;
        store::target_get_by_name(&mut conn, tenant.uuid(), name.as_str())
            .await?
            .ok_or_else(|| Error::not_found(format!("target {:?}", name.as_str())))
    }

    pub async fn list_targets(
        &self,
        who: &Principal,
        tenant: TenantId,
        after: Option<Uuid>,
        size: u32,
    ) -> Result<Vec<TargetRow>> {
        access::member_or_service(who, tenant, Role::Viewer, "tenant")?;
        let mut conn = self.pool.acquire().await?;
        Ok(store::target_list(&mut conn, tenant.uuid(), after, page_size(size)).await?)
    }

    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, target_id = %target))]
    pub async fn update_target(
        &self,
        who: &Principal,
        tenant: TenantId,
        target: TargetId,
        spec: TargetSpec,
    ) -> Result<TargetRow> {
        access::member(who, tenant, Role::Admin, "target")?;
        let row = cairn_db::transaction!(&self.pool, |conn| {
            let before = store::target_get_for_update(conn, tenant.uuid(), target.uuid())
                .await?
                .ok_or_else(|| Error::not_found("target".to_owned()))?;
            // A validation checked the role and the credential reference: once they change,
            // it no longer describes the target (and a late answer to it finds no row).
            let validated = (before.aws_region.as_deref(), before.aws_role_arn.as_deref());
            let now = validated_settings(&spec.provider).unzip();
            if validated != now || before.credential_ref != spec.credential_ref.as_str() {
                validations::validation_clear(conn, tenant.uuid(), target.uuid()).await?;
            }
            let row = store::target_update(conn, tenant.uuid(), target.uuid(), &spec)
                .await?
                .ok_or_else(|| Error::not_found("target".to_owned()))?;
            changes::record(
                conn,
                Change {
                    tenant_id: Some(tenant.uuid()),
                    actor: &who.subject,
                    object_type: cairn_bus::Aggregate::Target,
                    object_id: row.target_id.to_string(),
                    event: "updated",
                    detail: detail(&row),
                },
            )
            .await?;
            Ok::<_, Error>(row)
        })?;
        self.committed();
        Ok(row)
    }

    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, target_id = %target))]
    pub async fn delete_target(
        &self,
        who: &Principal,
        tenant: TenantId,
        target: TargetId,
    ) -> Result<()> {
        access::member(who, tenant, Role::Admin, "target")?;
        cairn_db::transaction!(&self.pool, |conn| {
            let row = store::target_delete(conn, tenant.uuid(), target.uuid())
                .await?
                .ok_or_else(|| Error::not_found("target".to_owned()))?;
            changes::record(
                conn,
                Change {
                    tenant_id: Some(tenant.uuid()),
                    actor: &who.subject,
                    object_type: cairn_bus::Aggregate::Target,
                    object_id: row.target_id.to_string(),
                    event: "deleted",
                    detail: json!({ "name": row.name }),
                },
            )
            .await?;
            Ok::<_, Error>(())
        })?;
        self.committed();
        Ok(())
    }
}
