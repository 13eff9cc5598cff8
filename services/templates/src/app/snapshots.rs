//! Snapshots: resolve a version for an instance (stored once, immutable), get, and diff.
use std::collections::BTreeMap;

use cairn_auth::{Principal, Role};
use cairn_contract::{Environment, InstanceId, SnapshotId, TemplateId};
use cairn_templating::{ResolveInput, ResourceDiff, Snapshot};

use super::App;
use crate::error::{Error, Result};
use crate::store::snapshots::{self as store, NewSnapshot, SnapshotRow};
use cairn_service::access::{can_see, require};

/// What a resolve request carries, parsed.
pub struct ResolveRequest {
    pub template_id: TemplateId,
    pub version: String,
    pub instance_id: InstanceId,
    pub instance_name: String,
    pub environment: String,
    pub parameters: BTreeMap<String, serde_json::Value>,
    pub target_settings: BTreeMap<String, String>,
}

impl App {
    /// Resolves a stored version; an identical snapshot is found instead of stored twice.
    /// Calls no other service: the target's settings come in the request.
    #[tracing::instrument(skip_all, fields(template_id = %req.template_id, instance_id = %req.instance_id))]
    pub async fn resolve(
        &self,
        who: &Principal,
        req: ResolveRequest,
    ) -> Result<(SnapshotRow, Snapshot, bool)> {
        let template = self.visible_template(who, req.template_id).await?;
        require(who, template.tenant_id, Role::Operator, "template")?;
        let version = self.get_version(who, req.template_id, &req.version).await?;
        // The one environment rule: `prod` and `Production` are `production`, the name the
        // snapshot records and its overrides are matched by.
        let environment = Environment::parse(&req.environment)?;
        let input = ResolveInput {
            template_version: version.content_hash.clone(),
            tenant_id: template.tenant_id.to_string(),
            instance_id: req.instance_id.to_string(),
            instance_name: req.instance_name.clone(),
            environment: environment.as_str().to_owned(),
            parameters: req.parameters,
            target: req
                .target_settings
                .into_iter()
                .map(|(k, v)| (k, serde_json::Value::String(v)))
                .collect(),
        };
        let library = self.library.clone();
        let limits = self.limits;
        let document = version.document.clone();
        let number = version.number;
        let resolved = tokio::task::spawn_blocking(move || {
            // A stored version validated when it was published; the library may have
            // changed since, so it is checked again.
            let template = cairn_templating::check(&document, &limits, &library).map_err(|p| {
                Error::failed_precondition(format!(
                    "version {number} no longer validates against the module library ({}): {p}",
                    library.fingerprint()
                ))
            })?;
            cairn_templating::resolve(&template, &library, &input).map_err(Error::Invalid)
        })
        .await
        .map_err(|e| Error::internal(format!("resolve task: {e}")))?;
        let snapshot = resolved?;
        let json = snapshot.canonical_json();
        let hash = snapshot.hash();
        let mut conn = self.pool.acquire().await?;
        let (row, created) = store::snapshot_insert(
            &mut conn,
            &NewSnapshot {
                snapshot_id: SnapshotId::new().uuid(),
                tenant_id: template.tenant_id,
                template_id: template.template_id,
                template_number: version.number,
                instance_id: req.instance_id.uuid(),
                environment: environment.as_str(),
                hash: &hash,
                document: &json,
            },
        )
        .await?;
        Ok((row, snapshot, created))
    }

    #[tracing::instrument(skip_all, fields(snapshot_id = %snapshot_id))]
    pub async fn get_snapshot(
        &self,
        who: &Principal,
        snapshot_id: SnapshotId,
    ) -> Result<(SnapshotRow, Snapshot)> {
        let mut conn = self.pool.acquire().await?;
        let what = format!("snapshot {snapshot_id}");
        let row = store::snapshot_get(&mut conn, snapshot_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(what.clone()))?;
        can_see(who, row.tenant_id, &what)?;
        require(who, row.tenant_id, Role::Viewer, &what)?;
        let snapshot = Snapshot::from_json(&row.document)
            .map_err(|e| Error::internal(format!("stored {what}: {e}")))?;
        Ok((row, snapshot))
    }

    /// The per-resource diff from `previous` (none: everything is added) to `next`. Both
    /// must belong to the same tenant.
    #[tracing::instrument(skip_all, fields(snapshot_id = %next))]
    pub async fn diff(
        &self,
        who: &Principal,
        previous: Option<SnapshotId>,
        next: SnapshotId,
    ) -> Result<Vec<ResourceDiff>> {
        let (next_row, next_snapshot) = self.get_snapshot(who, next).await?;
        let prev = match previous {
            Some(id) => {
                let (row, s) = self.get_snapshot(who, id).await?;
                if row.tenant_id != next_row.tenant_id {
                    return Err(Error::not_found(format!("snapshot {id}")));
                }
                Some(s)
            }
            None => None,
        };
        Ok(cairn_templating::diff(prev.as_ref(), &next_snapshot))
    }
}
