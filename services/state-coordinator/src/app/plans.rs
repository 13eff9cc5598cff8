//! Saved plans: stored sealed with their tags by the plan attempt, leased to one apply
//! attempt, deleted when that attempt finishes or after a TTL.
use bytes::Bytes;
use cairn_auth::Principal;
use cairn_contract::{RunId, RunKind};
use cairn_service::access::require_service;
use uuid::Uuid;

use super::App;
use super::payload::{ReadFailure, SealedRef, aad_named, context};
use super::runs::plan_currency;
use crate::error::{Error, Result};
use crate::store::plans::PlanRow;
use crate::store::{plans, runs, states};

/// Tags that decide whether a saved plan may still be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanTags {
    pub config_hash: String,
    pub base_generation: i64,
    pub tofu_version: String,
    pub provider_lock_hash: String,
    pub module_library_hash: String,
}

/// A plan handed to an apply attempt.
#[derive(Debug)]
pub struct TakenPlan {
    pub plan: Vec<u8>,
    pub tags: PlanTags,
    pub provider_lock_file: Vec<u8>,
    pub current: bool,
    pub stale_reason: String,
}

impl App {
    pub async fn put_plan(
        &self,
        who: &Principal,
        run_id: RunId,
        attempt: i32,
        plan: Vec<u8>,
        tags: PlanTags,
        provider_lock_file: Vec<u8>,
    ) -> Result<Uuid> {
        require_service(who)?;
        if plan.is_empty() || plan.len() > self.settings.max_plan_bytes {
            return Err(Error::invalid_argument(
                "plan must be non-empty and within the size limit".to_owned(),
            ));
        }
        let live = self.live_attempt(run_id, attempt).await?;
        let mut conn = self.pool.acquire().await?;
        let run = runs::run_get(&mut conn, run_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(format!("run {run_id}")))?;
        drop(conn);
        if run.kind != RunKind::Plan.as_str() {
            return Err(Error::failed_precondition(
                "only plan runs store saved plans".to_owned(),
            ));
        }
        if tags.config_hash != run.config_hash {
            return Err(Error::invalid_argument(
                "plan tag config_hash differs from the run's root config".to_owned(),
            ));
        }
        if tags.base_generation != live.base_generation {
            return Err(Error::invalid_argument(format!(
                "plan tag base_generation {} differs from the attempt's base generation {}",
                tags.base_generation, live.base_generation
            )));
        }
        let plan_id = Uuid::now_v7();
        let sealed = self
            .seal(
                &context(run.tenant_id, run.state_id),
                &aad_named("plan", plan_id),
                &plan,
            )
            .await?;
        let key = format!("plans/{}/{}", run.state_id, plan_id.simple());
        let version = self
            .objects
            .put_new(&key, Bytes::clone(&sealed.ciphertext))
            .await
            .map_err(|e| Error::unavailable(format!("object storage: {e}")))?;
        let row = PlanRow {
            plan_id,
            run_id: run_id.uuid(),
            state_id: run.state_id,
            object_key: key,
            object_version: version.version_id,
            key_id: sealed.key_id,
            wrapped_key: sealed.wrapped_key,
            nonce: sealed.nonce,
            ciphertext_sha256: sealed.ciphertext_sha256,
            config_hash: tags.config_hash,
            base_generation: tags.base_generation,
            tofu_version: tags.tofu_version,
            provider_lock_hash: tags.provider_lock_hash,
            module_library_hash: tags.module_library_hash,
            provider_lock_file,
        };
        let mut conn = self.pool.acquire().await?;
        if !plans::plan_insert(&mut conn, &row, self.settings.plan_ttl.as_secs_f64()).await? {
            drop(conn);
            self.delete_objects(&[(row.object_key, row.object_version)])
                .await;
            return Err(Error::failed_precondition(format!(
                "run {run_id} already stored its plan"
            )));
        }
        Ok(plan_id)
    }

    /// Leases the apply run's saved plan to this attempt and returns it with its currency.
    pub async fn take_plan(
        &self,
        who: &Principal,
        run_id: RunId,
        attempt: i32,
    ) -> Result<TakenPlan> {
        require_service(who)?;
        let live = self.live_attempt(run_id, attempt).await?;
        let mut conn = self.pool.acquire().await?;
        let run = runs::run_get(&mut conn, run_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(format!("run {run_id}")))?;
        let plan_run = run.plan_run_id.ok_or_else(|| {
            Error::failed_precondition(format!("run {run_id} was registered without a saved plan"))
        })?;
        let plan = plans::plan_lease(&mut conn, plan_run, live.attempt_id)
            .await?
            .ok_or_else(|| {
                Error::failed_precondition(
                    "the saved plan has expired, was used, or is leased to another live attempt"
                        .to_owned(),
                )
            })?;
        let state = states::state_get(&mut conn, run.state_id)
            .await?
            .ok_or_else(|| Error::internal("state vanished".to_owned()))?;
        drop(conn);
        let bytes = self
            .open(
                &context(run.tenant_id, run.state_id),
                &aad_named("plan", plan.plan_id),
                &SealedRef {
                    object_key: &plan.object_key,
                    object_version: &plan.object_version,
                    key_id: &plan.key_id,
                    wrapped_key: &plan.wrapped_key,
                    nonce: &plan.nonce,
                    ciphertext_sha256: Some(&plan.ciphertext_sha256),
                    plaintext_sha256: None,
                },
            )
            .await
            .map_err(|f| match f {
                ReadFailure::Unavailable(m) => Error::unavailable(m),
                ReadFailure::Damage(m) => {
                    Error::failed_precondition(format!("the saved plan is damaged: {m}"))
                }
            })?;
        let (current, stale_reason) = plan_currency(&plan, &run, state.current_generation);
        Ok(TakenPlan {
            plan: bytes,
            tags: PlanTags {
                config_hash: plan.config_hash,
                base_generation: plan.base_generation,
                tofu_version: plan.tofu_version,
                provider_lock_hash: plan.provider_lock_hash,
                module_library_hash: plan.module_library_hash,
            },
            provider_lock_file: plan.provider_lock_file,
            current,
            stale_reason,
        })
    }
}
