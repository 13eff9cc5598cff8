//! `GetPlans`: per resource, the plan a review is about — the summary from its step, the
//! plan run, and the plan's hash, base generation and masked JSON from the coordinator
//! (service-only `Runs.GetMaskedPlan`; plans never travel on NATS) — with the deployment's
//! plan-set hash. A read-only run (a preview or a probe) stores no plan at the coordinator:
//! its resource shows with the step's summary and no hash or masked JSON.
use cairn_auth::{Principal, Role};
use cairn_contract::{DeploymentId, TenantId};
use cairn_service::access::require;
use uuid::Uuid;

use super::App;
use crate::coordinator::MaskedPlan;
use crate::error::{Error, Result};
use crate::store::deployments as deployments_store;
use crate::store::runs;
use crate::store::steps::{self, StepRow};

/// One resource's plan.
#[derive(Debug, Clone)]
pub struct ResourcePlan {
    /// The step the plan was made for (its summary columns).
    pub step: StepRow,
    pub run_id: Uuid,
    pub plan: MaskedPlan,
}

impl App {
    /// The deployment's plans, one per resource (the latest step with a stored plan), in
    /// step order, and its plan-set hash.
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, deployment_id = %deployment_id))]
    pub async fn get_plans(
        &self,
        who: &Principal,
        tenant: TenantId,
        deployment_id: DeploymentId,
    ) -> Result<(String, Vec<ResourcePlan>)> {
        let what = format!("deployment {deployment_id}");
        require(who, tenant, Role::Viewer, &what)?;
        let mut conn = self.pool.acquire().await?;
        let row = deployments_store::deployment_get(&mut conn, tenant.uuid(), deployment_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(what))?;
        let all = steps::steps_of(&mut conn, deployment_id.uuid()).await?;
        let read_only: std::collections::HashSet<Uuid> =
            runs::runs_of(&mut conn, deployment_id.uuid())
                .await?
                .into_iter()
                .filter(|r| r.kind == "preview")
                .map(|r| r.run_id)
                .collect();
        drop(conn);
        // Steps that ran a plan: a run and a recorded summary.
        let mut plans: Vec<ResourcePlan> = Vec::new();
        for step in all
            .into_iter()
            .filter(|s| !s.resource.is_empty() && s.plan_risk.is_some())
        {
            let Some(run_id) = step.run_id else { continue };
            let plan = match self.coord.masked_plan(run_id).await? {
                Some(plan) => plan,
                // A read-only run (a preview, a probe) stores no plan: its summary shows.
                None if read_only.contains(&run_id) => MaskedPlan {
                    plan_sha256: String::new(),
                    base_generation: 0,
                    masked_plan_json: String::new(),
                },
                // A plan run that stored none (it failed before PutPlan): nothing to review.
                None => continue,
            };
            // A later plan of the same resource (planned again) replaces the earlier one.
            plans.retain(|p| p.step.resource != step.resource);
            plans.push(ResourcePlan { step, run_id, plan });
        }
        plans.sort_by_key(|p| p.step.position);
        Ok((row.plan_set_hash, plans))
    }
}
