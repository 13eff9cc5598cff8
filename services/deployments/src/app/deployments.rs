//! Deployments: the request phase (resolve, diff, and in one transaction the deployment,
//! every step, the instance taken by compare-and-set, the event and the job), get, list,
//! (cancel, approvals: app/approvals.rs; the worker: app/workflow).
use std::collections::BTreeMap;

use cairn_auth::{Principal, Role};
use cairn_contract::{DeploymentId, TenantId};
use cairn_proto::deployments::DeploymentJob;
use cairn_service::access::require;
use prost::Message;
use uuid::Uuid;

use super::instances::{active_refusal, version_column, version_number};
use super::{App, events};
use crate::domain::{DeploymentKind, Parameters, Ref, ResourceSpec, plan_steps};
use crate::error::{Error, Result};
use crate::peers::ResolveInput;
use crate::store::deployments::{self as store, ApprovalRow, DeploymentRow, NewDeployment};
use crate::store::instances;
use crate::store::steps::{self, StepRow};

/// A deployment with its steps and decisions.
#[derive(Debug, Clone)]
pub struct DeploymentView {
    pub row: DeploymentRow,
    pub steps: Vec<StepRow>,
    pub approvals: Vec<ApprovalRow>,
}

/// What a deployment request carries, parsed.
pub struct CreateDeployment {
    pub tenant: TenantId,
    pub instance: Ref,
    pub kind: DeploymentKind,
    /// 0 = keep the instance's.
    pub template_version: u32,
    pub parameters_patch: Parameters,
    pub idempotency_key: Option<String>,
}

/// Longest idempotency key accepted.
const MAX_KEY: usize = 200;

enum Requested {
    Created(DeploymentRow),
    Existing(DeploymentRow),
}

impl App {
    pub(crate) async fn view_of(&self, row: DeploymentRow) -> Result<DeploymentView> {
        self.deployment_view(row).await
    }

    async fn deployment_view(&self, row: DeploymentRow) -> Result<DeploymentView> {
        let mut conn = self.pool.acquire().await?;
        let steps = steps::steps_of(&mut conn, row.deployment_id).await?;
        let approvals = store::approvals_of(&mut conn, row.deployment_id).await?;
        Ok(DeploymentView {
            row,
            steps,
            approvals,
        })
    }

    /// Requests a deployment; returns it and whether this call created it (false: the
    /// idempotency key named an existing one).
    #[tracing::instrument(skip_all, fields(tenant_id = %req.tenant, kind = %req.kind))]
    pub async fn create_deployment(
        &self,
        who: &Principal,
        req: CreateDeployment,
    ) -> Result<(DeploymentView, bool)> {
        require(
            who,
            req.tenant,
            Role::Operator,
            &format!("instance {}", req.instance),
        )?;
        let key = match req.idempotency_key.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(k) if k.len() > MAX_KEY => {
                return Err(Error::invalid_argument(format!(
                    "idempotency_key is longer than {MAX_KEY} bytes"
                )));
            }
            Some(k) => Some(k.to_owned()),
        };
        let instance = self.instance_row(req.tenant, &req.instance).await?;
        if let Some(k) = &key {
            let mut conn = self.pool.acquire().await?;
            if let Some(existing) =
                store::deployment_by_key(&mut conn, instance.instance_id, k).await?
            {
                drop(conn);
                return Ok((self.deployment_view(existing).await?, false));
            }
        }
        let takes_instance = req.kind.instance_status();
        if let (Some(_), Some(active)) = (takes_instance, instance.active_deployment_id) {
            return Err(active_refusal(&instance.name, active, "request another"));
        }

        // Outside the transaction: what the deployment converges to, asked of templates and
        // tenancy. The transaction's compare-and-set on the instance's revision makes sure
        // nothing changed meanwhile.
        let template = self
            .peers
            .template(req.tenant, &Ref::Id(instance.template_id))
            .await?;
        let version = if req.template_version == 0 {
            version_number(instance.template_version)
        } else {
            self.peers.version(&template, req.template_version).await?
        };
        let stored =
            Parameters::from_value(instance.parameters.clone()).map_err(Error::internal)?;
        let parameters = stored.merged(&req.parameters_patch);
        let target = self
            .peers
            .target(req.tenant, &Ref::Id(instance.target_id))
            .await?;
        if !target.enabled && req.kind != DeploymentKind::Preview {
            return Err(Error::failed_precondition(format!(
                "target {:?} is disabled: an admin enables it before anything is deployed to it",
                target.name
            )));
        }
        let previous_id = instance.last_applied_snapshot_id;
        let previous: Vec<ResourceSpec> = match previous_id {
            Some(id) => self.peers.snapshot(id).await?.resources,
            None => Vec::new(),
        };
        let (snapshot_id, next, changes) = match req.kind {
            DeploymentKind::Destroy => {
                if previous_id.is_none() {
                    return Err(Error::failed_precondition(format!(
                        "instance {:?} has nothing applied to destroy",
                        instance.name
                    )));
                }
                (None, Vec::new(), BTreeMap::new())
            }
            DeploymentKind::Deploy | DeploymentKind::Preview => {
                let resolved = self
                    .peers
                    .resolve(ResolveInput {
                        template: &template,
                        version,
                        instance_id: instance.instance_id,
                        instance_name: &instance.name,
                        environment: &instance.environment,
                        parameters_json: parameters.to_json(),
                        target: &target,
                    })
                    .await?;
                let changes = self.peers.diff(previous_id, resolved.snapshot_id).await?;
                (Some(resolved.snapshot_id), resolved.resources, changes)
            }
        };
        let planned = plan_steps(req.kind, &next, &changes, &previous);

        let deployment_id = DeploymentId::new().uuid();
        let version_col = version_column(version)?;
        let changes_instance = version_col != instance.template_version || parameters != stored;
        let new = NewDeployment {
            deployment_id,
            tenant_id: req.tenant.uuid(),
            instance_id: instance.instance_id,
            kind: req.kind.as_str(),
            requested_by: &who.subject,
            instance_name: &instance.name,
            target_id: target.target_id,
            environment: &instance.environment,
            template_id: template.template_id,
            template_version: version_col,
            parameters: parameters.to_value(),
            snapshot_id,
            previous_snapshot_id: previous_id,
            instance_status_before: &instance.status,
            idempotency_key: key.as_deref(),
        };
        let job = DeploymentJob {
            deployment_id: deployment_id.to_string(),
        }
        .encode_to_vec();
        let outcome = cairn_db::transaction!(&self.pool, |conn| {
            if let Some(k) = &key
                && let Some(existing) =
                    store::deployment_by_key(conn, instance.instance_id, k).await?
            {
                return Ok(Requested::Existing(existing));
            }
            if let Some(status) = takes_instance {
                let taken = instances::instance_take(
                    conn,
                    instance.instance_id,
                    instance.revision,
                    deployment_id,
                    status.as_str(),
                    version_col,
                    &parameters.to_value(),
                )
                .await?;
                match taken {
                    Some(row) if changes_instance => {
                        events::instance(conn, &row, "updated", &who.subject).await?;
                    }
                    Some(_) => {}
                    None => {
                        // Someone else got there first: the same key (same deployment), or
                        // another deployment (named), or another change.
                        if let Some(k) = &key
                            && let Some(existing) =
                                store::deployment_by_key(conn, instance.instance_id, k).await?
                        {
                            return Ok(Requested::Existing(existing));
                        }
                        return Err(self
                            .moved_on(conn, req.tenant, &instance, "request another")
                            .await);
                    }
                }
            }
            let Some(row) = store::deployment_insert(conn, &new).await? else {
                return match &key {
                    Some(k) if takes_instance.is_none() => {
                        match store::deployment_by_key(conn, instance.instance_id, k).await? {
                            Some(existing) => Ok(Requested::Existing(existing)),
                            None => Err(Error::aborted("idempotency key race: retry")),
                        }
                    }
                    // The instance was taken above: roll it back and let the caller retry,
                    // which finds the deployment by its key.
                    _ => Err(Error::aborted("idempotency key race: retry")),
                };
            };
            steps::steps_insert(conn, deployment_id, &planned).await?;
            let steps = steps::steps_of(conn, deployment_id).await?;
            events::deployment(conn, &row, &steps, "requested", &who.subject).await?;
            cairn_bus::message_outbox_insert(
                conn,
                &cairn_bus::Namespace::root().deployq(),
                &Uuid::now_v7().to_string(),
                &job,
            )
            .await?;
            Ok::<_, Error>(Requested::Created(row))
        })?;
        match outcome {
            Requested::Existing(row) => Ok((self.deployment_view(row).await?, false)),
            Requested::Created(row) => {
                self.committed();
                tracing::info!(%deployment_id, steps = planned.len(), "deployment requested");
                Ok((self.deployment_view(row).await?, true))
            }
        }
    }

    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, deployment_id = %deployment_id))]
    pub async fn get_deployment(
        &self,
        who: &Principal,
        tenant: TenantId,
        deployment_id: DeploymentId,
    ) -> Result<DeploymentView> {
        let what = format!("deployment {deployment_id}");
        require(who, tenant, Role::Viewer, &what)?;
        let mut conn = self.pool.acquire().await?;
        let row = store::deployment_get(&mut conn, tenant.uuid(), deployment_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(what))?;
        drop(conn);
        self.deployment_view(row).await
    }

    /// A page of deployments, newest first (without steps).
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant))]
    pub async fn list_deployments(
        &self,
        who: &Principal,
        tenant: TenantId,
        instance: Option<&Ref>,
        before: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<DeploymentRow>> {
        require(who, tenant, Role::Viewer, "tenant")?;
        let instance_id = match instance {
            Some(r) => Some(self.instance_row(tenant, r).await?.instance_id),
            None => None,
        };
        let mut conn = self.pool.acquire().await?;
        Ok(store::deployment_list(
            &mut conn,
            tenant.uuid(),
            instance_id,
            before,
            i64::from(limit),
        )
        .await?)
    }
}
