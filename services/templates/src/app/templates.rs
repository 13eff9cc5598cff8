//! Templates: create (idempotent on tenant and name), get, list.
use cairn_auth::{Principal, Role};
use cairn_contract::{TemplateId, TenantId};

use super::App;
use crate::error::{Error, Result};
use crate::store::templates::{self as store, TemplateRow};
use cairn_service::access::{can_see, require};

impl App {
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant_id, name))]
    pub async fn create_template(
        &self,
        who: &Principal,
        tenant_id: TenantId,
        name: &str,
        description: &str,
    ) -> Result<(TemplateRow, bool)> {
        require(who, tenant_id, Role::Operator, "tenant")?;
        if !cairn_templating::document::valid_resource_name(name) {
            return Err(Error::invalid_argument(format!(
                "invalid template name {name:?}: use a lowercase letter, then lowercase letters, digits, '-' or '_' (at most 63)"
            )));
        }
        if description.len() > 4096 {
            return Err(Error::invalid_argument(
                "description is longer than 4096 bytes".to_owned(),
            ));
        }
        let mut conn = self.pool.acquire().await?;
        Ok(store::template_create(
            &mut conn,
            TemplateId::new().uuid(),
            tenant_id.uuid(),
            name,
            description,
        )
        .await?)
    }

    /// Loads a template the principal may see (another tenant's is NOT_FOUND).
    pub(crate) async fn visible_template(
        &self,
        who: &Principal,
        template_id: TemplateId,
    ) -> Result<TemplateRow> {
        let mut conn = self.pool.acquire().await?;
        let row = store::template_get(&mut conn, template_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(format!("template {template_id}")))?;
        can_see(who, row.tenant_id, &format!("template {template_id}"))?;
        Ok(row)
    }

    #[tracing::instrument(skip_all, fields(template_id = %template_id))]
    pub async fn get_template(
        &self,
        who: &Principal,
        template_id: TemplateId,
    ) -> Result<TemplateRow> {
        let row = self.visible_template(who, template_id).await?;
        require(who, row.tenant_id, Role::Viewer, "template")?;
        Ok(row)
    }

    /// A template by its name in the tenant (for callers that name templates, e.g. the
    /// workflow); another tenant's caller gets NOT_FOUND.
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant_id, name))]
    pub async fn get_template_by_name(
        &self,
        who: &Principal,
        tenant_id: TenantId,
        name: &str,
    ) -> Result<TemplateRow> {
        let what = format!("template {name:?}");
        require(who, tenant_id, Role::Viewer, &what)?;
        let mut conn = self.pool.acquire().await?;
        store::template_get_by_name(&mut conn, tenant_id.uuid(), name)
            .await?
            .ok_or_else(|| Error::not_found(what))
    }

    #[tracing::instrument(skip_all, fields(tenant_id = %tenant_id))]
    pub async fn list_templates(
        &self,
        who: &Principal,
        tenant_id: TenantId,
        after: Option<TemplateId>,
        limit: i64,
    ) -> Result<Vec<TemplateRow>> {
        require(who, tenant_id, Role::Viewer, "tenant")?;
        let mut conn = self.pool.acquire().await?;
        Ok(store::template_list(
            &mut conn,
            tenant_id.uuid(),
            after.map(TemplateId::uuid),
            limit,
        )
        .await?)
    }
}
