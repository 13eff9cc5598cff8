//! Instances: create (the template, version and target checked at their services, the
//! parameters checked by resolving them), get, list, update (refused while a deployment is
//! active), delete (only before the first deployment or once destroyed).
use cairn_auth::{Principal, Role};
use cairn_contract::{Environment, InstanceId, TenantId};
use cairn_service::access::require;
use uuid::Uuid;

use super::{App, events};
use crate::domain::outputs::OutputView;
use crate::domain::{InstanceName, InstanceStatus, Parameters, Ref};
use crate::error::{Error, Result};
use crate::peers::ResolveInput;
use crate::store::instances::{self as store, InstanceRow, NewInstance, ResourceRow};

/// An instance with its resources (and its outputs, filled by `get_instance` only).
#[derive(Debug, Clone)]
pub struct InstanceView {
    pub row: InstanceRow,
    pub resources: Vec<ResourceRow>,
    pub outputs: Vec<OutputView>,
}

/// What a create request carries, parsed.
pub struct CreateInstance {
    pub tenant: TenantId,
    pub name: String,
    pub template: Ref,
    /// 0 = the latest.
    pub template_version: u32,
    pub target: Ref,
    pub environment: String,
    pub parameters: Parameters,
}

/// The refusal while `deployment` holds the instance.
pub(crate) fn active_refusal(name: &str, deployment: Uuid, doing: &str) -> Error {
    Error::failed_precondition(format!(
        "instance {name:?} has an active deployment {deployment}: {doing} once it has finished (or cancel it)"
    ))
}

pub(crate) fn version_number(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

pub(crate) fn version_column(v: u32) -> Result<i32> {
    i32::try_from(v)
        .map_err(|_| Error::invalid_argument(format!("template_version {v} is too large")))
}

impl App {
    /// The tenant's instance named by `r` (another tenant's is NOT_FOUND).
    pub(crate) async fn instance_row(&self, tenant: TenantId, r: &Ref) -> Result<InstanceRow> {
        let mut conn = self.pool.acquire().await?;
        store::instance_get(&mut conn, tenant.uuid(), r)
            .await?
            .ok_or_else(|| Error::not_found(format!("instance {r}")))
    }

    pub(crate) async fn instance_view(&self, row: InstanceRow) -> Result<InstanceView> {
        let mut conn = self.pool.acquire().await?;
        let resources = store::resources_of(&mut conn, &[row.instance_id]).await?;
        Ok(InstanceView {
            row,
            resources,
            outputs: Vec::new(),
        })
    }

    /// Resolves the parameters for the instance so that a problem is refused now, naming
    /// the parameter, rather than at its first deployment.
    async fn check_parameters(&self, input: ResolveInput<'_>) -> Result<()> {
        self.peers.resolve(input).await.map(|_| ())
    }

    #[tracing::instrument(skip_all, fields(tenant_id = %req.tenant, name = %req.name))]
    pub async fn create_instance(
        &self,
        who: &Principal,
        req: CreateInstance,
    ) -> Result<InstanceView> {
        require(who, req.tenant, Role::Operator, "tenant")?;
        let name = InstanceName::parse(&req.name).map_err(Error::invalid_argument)?;
        // The one environment rule: `Prod` and `PRODUCTION` are `production`.
        let environment = Environment::parse(&req.environment)?;
        let template = self.peers.template(req.tenant, &req.template).await?;
        let version = self.peers.version(&template, req.template_version).await?;
        let target = self.peers.target(req.tenant, &req.target).await?;
        let instance_id = InstanceId::new().uuid();
        self.check_parameters(ResolveInput {
            template: &template,
            version,
            instance_id,
            instance_name: name.as_str(),
            environment: environment.as_str(),
            parameters_json: req.parameters.to_json(),
            target: &target,
        })
        .await?;
        let new = NewInstance {
            instance_id,
            tenant_id: req.tenant.uuid(),
            name: name.as_str(),
            template_id: template.template_id,
            template_version: version_column(version)?,
            target_id: target.target_id,
            environment: environment.as_str(),
            parameters: req.parameters.to_value(),
        };
        let row = cairn_db::transaction!(&self.pool, |conn| {
            let row = store::instance_insert(conn, &new)
                .await?
                .ok_or_else(|| Error::already_exists(format!("instance {:?}", name.as_str())))?;
            events::instance(conn, &row, "created", &who.subject).await?;
            Ok::<_, Error>(row)
        })?;
        self.committed();
        tracing::info!(instance_id = %row.instance_id, "created instance");
        Ok(InstanceView {
            row,
            resources: Vec::new(),
            outputs: Vec::new(),
        })
    }

    #[tracing::instrument(skip_all, fields(tenant_id = %tenant))]
    pub async fn get_instance(
        &self,
        who: &Principal,
        tenant: TenantId,
        r: &Ref,
    ) -> Result<InstanceView> {
        let what = format!("instance {r}");
        require(who, tenant, Role::Viewer, &what)?;
        let row = self.instance_row(tenant, r).await?;
        let mut view = self.instance_view(row).await?;
        view.outputs = self.instance_outputs(&view).await?;
        Ok(view)
    }

    /// Instances without their outputs (reading them asks the coordinator per resource;
    /// GetInstance shows them).
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant))]
    pub async fn list_instances(
        &self,
        who: &Principal,
        tenant: TenantId,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<InstanceView>> {
        require(who, tenant, Role::Viewer, "tenant")?;
        let mut conn = self.pool.acquire().await?;
        let rows = store::instance_list(&mut conn, tenant.uuid(), after, i64::from(limit)).await?;
        let ids: Vec<Uuid> = rows.iter().map(|r| r.instance_id).collect();
        let mut resources = store::resources_of(&mut conn, &ids).await?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let (mine, rest) = resources
                    .drain(..)
                    .partition(|r| r.instance_id == row.instance_id);
                resources = rest;
                InstanceView {
                    row,
                    resources: mine,
                    outputs: Vec::new(),
                }
            })
            .collect())
    }

    /// Sets the version (0 = keep) and merges the parameter patch; takes effect at the next
    /// deployment. Refused while a deployment is active.
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant))]
    pub async fn update_instance(
        &self,
        who: &Principal,
        tenant: TenantId,
        r: &Ref,
        template_version: u32,
        patch: &Parameters,
    ) -> Result<InstanceView> {
        let what = format!("instance {r}");
        require(who, tenant, Role::Operator, &what)?;
        let current = self.instance_row(tenant, r).await?;
        if let Some(active) = current.active_deployment_id {
            return Err(active_refusal(&current.name, active, "update it"));
        }
        let template = self
            .peers
            .template(tenant, &Ref::Id(current.template_id))
            .await?;
        let version = if template_version == 0 {
            version_number(current.template_version)
        } else {
            self.peers.version(&template, template_version).await?
        };
        let stored = Parameters::from_value(current.parameters.clone()).map_err(Error::internal)?;
        let parameters = stored.merged(patch);
        let target = self
            .peers
            .target(tenant, &Ref::Id(current.target_id))
            .await?;
        self.check_parameters(ResolveInput {
            template: &template,
            version,
            instance_id: current.instance_id,
            instance_name: &current.name,
            environment: &current.environment,
            parameters_json: parameters.to_json(),
            target: &target,
        })
        .await?;
        let version = version_column(version)?;
        let row = cairn_db::transaction!(&self.pool, |conn| {
            let Some(row) = store::instance_update(
                conn,
                current.instance_id,
                current.revision,
                version,
                &parameters.to_value(),
            )
            .await?
            else {
                return Err(self.moved_on(conn, tenant, &current, "update it").await);
            };
            events::instance(conn, &row, "updated", &who.subject).await?;
            Ok::<_, Error>(row)
        })?;
        self.committed();
        self.instance_view(row).await
    }

    /// Why a compare-and-set on `seen` found the instance changed: a deployment took it
    /// (FAILED_PRECONDITION naming it), it is gone, or it changed otherwise (ABORTED).
    pub(crate) async fn moved_on(
        &self,
        conn: &mut sqlx::PgConnection,
        tenant: TenantId,
        seen: &InstanceRow,
        doing: &str,
    ) -> Error {
        match store::instance_get(conn, tenant.uuid(), &Ref::Id(seen.instance_id)).await {
            Ok(Some(now)) => match now.active_deployment_id {
                Some(active) => active_refusal(&now.name, active, doing),
                None => Error::aborted(format!(
                    "instance {:?} changed meanwhile: read it again and retry",
                    seen.name
                )),
            },
            Ok(None) => Error::not_found(format!("instance {:?}", seen.name)),
            Err(e) => e.into(),
        }
    }

    /// Deletes an instance that was never deployed or is destroyed.
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant))]
    pub async fn delete_instance(&self, who: &Principal, tenant: TenantId, r: &Ref) -> Result<()> {
        let what = format!("instance {r}");
        require(who, tenant, Role::Operator, &what)?;
        let current = self.instance_row(tenant, r).await?;
        if let Some(active) = current.active_deployment_id {
            return Err(active_refusal(&current.name, active, "delete it"));
        }
        let status =
            InstanceStatus::parse(&current.status).map_err(|e| Error::internal(e.to_string()))?;
        if !status.deletable() {
            return Err(Error::failed_precondition(format!(
                "instance {:?} is {status}: destroy it first (a DESTROY deployment), then delete it",
                current.name
            )));
        }
        let deletable = [
            InstanceStatus::Pending.as_str(),
            InstanceStatus::Destroyed.as_str(),
        ];
        cairn_db::transaction!(&self.pool, |conn| {
            if !store::instance_delete(conn, current.instance_id, current.revision, &deletable)
                .await?
            {
                return Err(self.moved_on(conn, tenant, &current, "delete it").await);
            }
            events::instance(conn, &current, "deleted", &who.subject).await?;
            Ok::<_, Error>(())
        })?;
        self.committed();
        tracing::info!(instance_id = %current.instance_id, "deleted instance");
        Ok(())
    }
}
