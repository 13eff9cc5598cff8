//! Template versions: validate and publish (content-addressed, idempotent), get, list, and
//! validation of a document without storing it.
use cairn_auth::{Principal, Role};
use cairn_contract::TemplateId;
use cairn_templating::{Problems, Template};

use super::App;
use crate::domain::VersionRef;
use crate::error::{Error, Result};
use crate::store::versions::VersionRow;
use crate::store::{templates as tstore, versions as store};
use cairn_service::access::{require, require_any};

impl App {
    /// Parses and validates a document against the module library, off the async workers
    /// (large documents take milliseconds).
    pub async fn check_document(&self, document: String) -> Result<Result<Template, Problems>> {
        let library = self.library.clone();
        let limits = self.limits;
        tokio::task::spawn_blocking(move || cairn_templating::check(&document, &limits, &library))
            .await
            .map_err(|e| Error::internal(format!("validation task: {e}")))
    }

    /// Validates without storing: the problems (empty when valid) and the content hash.
    #[tracing::instrument(skip_all)]
    pub async fn validate_document(
        &self,
        who: &Principal,
        document: String,
    ) -> Result<(Problems, String)> {
        require_any(who)?;
        let hash = cairn_templating::content_hash(&document);
        let problems = match self.check_document(document).await? {
            Ok(_) => Problems::default(),
            Err(p) => p,
        };
        Ok((problems, hash))
    }

    /// Validates, then stores the document as the next version unless this content was
    /// published before. An invalid document stores nothing.
    #[tracing::instrument(skip_all, fields(template_id = %template_id))]
    pub async fn publish_version(
        &self,
        who: &Principal,
        template_id: TemplateId,
        document: String,
    ) -> Result<(VersionRow, bool)> {
        let template = self.visible_template(who, template_id).await?;
        require(who, template.tenant_id, Role::Operator, "template")?;
        let parsed = self
            .check_document(document.clone())
            .await?
            .map_err(Error::Invalid)?;
        if parsed.name != template.name {
            return Err(Error::invalid_argument(format!(
                "the document's name {:?} is not the template's name {:?}",
                parsed.name, template.name
            )));
        }
        let hash = cairn_templating::content_hash(&document);
        let tenant_id = template.tenant_id;
        let (row, created) = cairn_db::transaction!(&self.pool, |conn| {
            if !tstore::template_lock(conn, template_id.uuid()).await? {
                return Err(Error::not_found(format!("template {template_id}")));
            }
            let r = store::version_publish(conn, template_id.uuid(), tenant_id, &hash, &document)
                .await?;
            Ok::<_, Error>(r)
        })?;
        if created {
            tracing::info!(number = row.number, content_hash = %row.content_hash, "published template version");
        }
        Ok((row, created))
    }

    #[tracing::instrument(skip_all, fields(template_id = %template_id))]
    pub async fn get_version(
        &self,
        who: &Principal,
        template_id: TemplateId,
        version: &str,
    ) -> Result<VersionRow> {
        let template = self.visible_template(who, template_id).await?;
        require(who, template.tenant_id, Role::Viewer, "template")?;
        let version_ref = VersionRef::parse(version).ok_or_else(|| {
            Error::invalid_argument(format!(
                "version {version:?} is neither a number nor a content hash"
            ))
        })?;
        let mut conn = self.pool.acquire().await?;
        store::version_get(&mut conn, template_id.uuid(), &version_ref)
            .await?
            .ok_or_else(|| Error::not_found(format!("version {version} of template {template_id}")))
    }

    #[tracing::instrument(skip_all, fields(template_id = %template_id))]
    pub async fn list_versions(
        &self,
        who: &Principal,
        template_id: TemplateId,
        after: i32,
        limit: i64,
    ) -> Result<Vec<VersionRow>> {
        let template = self.visible_template(who, template_id).await?;
        require(who, template.tenant_id, Role::Viewer, "template")?;
        let mut conn = self.pool.acquire().await?;
        Ok(store::version_list(&mut conn, template_id.uuid(), after, limit).await?)
    }

    /// The number of stored versions (for tests: refused documents store nothing).
    pub async fn version_count(&self, template_id: TemplateId) -> Result<i64> {
        let mut conn = self.pool.acquire().await?;
        Ok(store::version_count(&mut conn, template_id.uuid()).await?)
    }
}
