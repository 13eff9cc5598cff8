//! Saved plans: stored sealed with their tags by the plan attempt, leased to one apply
//! attempt, deleted when that attempt finishes or after a TTL. Each plan leaves a record
//! that outlives it (`masked_plans`: the plan's sha256, base generation and the sealed
//! masked plan JSON), served to services for review by `masked_plan`.
use std::collections::HashMap;

use bytes::Bytes;
use cairn_auth::Principal;
use cairn_contract::{RunId, RunKind};
use cairn_service::BaseError;
use cairn_service::access::require_service;
use cairn_storage::EncryptionContext;
use chrono::{DateTime, Utc};
use serde::de::IgnoredAny;
use uuid::Uuid;

use super::App;
use super::payload::{Integrity, SealedRef, aad_named, context, object_error};
use super::runs::plan_currency;
use crate::domain::object_keys;
use crate::error::{Error, Result};
use crate::failpoints::{PLAN_BEFORE_INSERT, PLAN_BEFORE_LEASE};
use crate::store::masked_plans::SealedJson;
use crate::store::plans::{PlanInsert, PlanRow};
use crate::store::{masked_plans, plans, runs, states};

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

/// What PutPlan stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPlan {
    pub plan_id: Uuid,
    /// sha256 (lowercase hex) of the plan bytes.
    pub plan_sha256: String,
}

/// The record of a plan run's saved plan, with its masked JSON opened.
#[derive(Debug)]
pub struct MaskedPlan {
    pub plan_id: Uuid,
    pub plan_sha256: String,
    pub base_generation: i64,
    /// Empty when the runner sent none.
    pub masked_plan_json: Vec<u8>,
    pub created_at: DateTime<Utc>,
}

/// A masked plan must be one JSON object (`tofu show -json` prints one); checked without
/// building the document.
fn check_masked_json(json: &[u8], limit: usize) -> Result<()> {
    if json.len() > limit {
        return Err(Error::invalid_argument(format!(
            "masked_plan_json is {} bytes, the limit is {limit}",
            json.len()
        )));
    }
    serde_json::from_slice::<HashMap<String, IgnoredAny>>(json)
        .map(drop)
        .map_err(|e| {
            Error::invalid_argument(format!("masked_plan_json must be a JSON object: {e}"))
        })
}

impl App {
    /// Stores the plan run's saved plan and, when given, its masked JSON (both sealed in
    /// object storage), and records the plan's sha256; returns the plan id and that hash.
    #[allow(clippy::too_many_arguments)]
    pub async fn put_plan(
        &self,
        who: &Principal,
        run_id: RunId,
        attempt: i32,
        plan: Vec<u8>,
        tags: PlanTags,
        provider_lock_file: Vec<u8>,
        masked_plan_json: Vec<u8>,
    ) -> Result<StoredPlan> {
        require_service(who)?;
        if plan.is_empty() || plan.len() > self.settings.max_plan_bytes {
            return Err(Error::invalid_argument(
                "plan must be non-empty and within the size limit".to_owned(),
            ));
        }
        if !masked_plan_json.is_empty() {
            check_masked_json(&masked_plan_json, self.settings.max_plan_bytes)?;
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
        let ctx = context(run.tenant_id, run.state_id);
        let sealed = self.seal(&ctx, &aad_named("plan", plan_id), &plan).await?;
        let plan_sha256 = sealed.plaintext_sha256.clone();
        let key = object_keys::plan_key(run.state_id, plan_id);
        let version = self
            .objects
            .put_new(&key, Bytes::clone(&sealed.ciphertext))
            .await
            .map_err(object_error)?;
        let mut objects = vec![(key.clone(), version.version_id.clone())];
        let masked = if masked_plan_json.is_empty() {
            None
        } else {
            match self
                .put_masked(&ctx, run.state_id, plan_id, &masked_plan_json)
                .await
            {
                Ok(m) => {
                    objects.push((m.object_key.clone(), m.object_version.clone()));
                    Some(m)
                }
                Err(e) => {
                    self.delete_objects(&objects).await;
                    return Err(e);
                }
            }
        };
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
        let ttl = self.settings.plan_ttl.as_secs_f64();
        let already =
            || Error::failed_precondition(format!("run {run_id} already stored its plan"));
        self.failpoints.hit(PLAN_BEFORE_INSERT).await?;
        // The plan and its record commit together: one plan per plan run, ever (the record
        // outlives the plan, so a plan run whose plan was applied cannot store another).
        let stored = cairn_db::transaction!(&self.pool, |conn| {
            let recorded = masked_plans::masked_plan_insert(
                conn,
                plan_id,
                run_id.uuid(),
                run.state_id,
                &plan_sha256,
                row.base_generation,
                masked.as_ref(),
            )
            .await?;
            if !recorded {
                return Err(already());
            }
            // The attempt is checked live in the statement that inserts the plan: one that
            // was revoked or finished since the check above stores nothing.
            match plans::plan_insert(conn, &row, ttl, live.attempt_id).await? {
                PlanInsert::Inserted => {}
                // Rolls back the record.
                PlanInsert::AlreadyStored => return Err(already()),
                PlanInsert::AttemptDead => {
                    return Err(Error::failed_precondition(format!(
                        "attempt {attempt} of run {run_id} is no longer live"
                    )));
                }
            }
            Ok::<_, Error>(())
        });
        match stored {
            Ok(()) => Ok(StoredPlan {
                plan_id,
                plan_sha256,
            }),
            Err(e @ Error::Base(BaseError::FailedPrecondition(_))) => {
                // Nothing was committed; the objects are nobody's.
                self.delete_objects(&objects).await;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Seals and stores a masked plan JSON next to its plan.
    async fn put_masked(
        &self,
        ctx: &EncryptionContext,
        state_id: Uuid,
        plan_id: Uuid,
        json: &[u8],
    ) -> Result<SealedJson> {
        let sealed = self
            .seal(ctx, &aad_named("masked-plan", plan_id), json)
            .await?;
        let key = object_keys::masked_plan_key(state_id, plan_id);
        let version = self
            .objects
            .put_new(&key, Bytes::clone(&sealed.ciphertext))
            .await
            .map_err(object_error)?;
        Ok(SealedJson {
            object_key: key,
            object_version: version.version_id,
            key_id: sealed.key_id,
            wrapped_key: sealed.wrapped_key,
            nonce: sealed.nonce,
            ciphertext_sha256: sealed.ciphertext_sha256,
            plaintext_sha256: sealed.plaintext_sha256,
        })
    }

    /// The record of a plan run's saved plan and its masked JSON, for review; available
    /// after the plan itself was applied or expired. Services only.
    pub async fn masked_plan(&self, who: &Principal, run_id: RunId) -> Result<MaskedPlan> {
        require_service(who)?;
        let mut conn = self.pool.acquire().await?;
        let record = masked_plans::masked_plan_by_run(&mut conn, run_id.uuid()).await?;
        let record = match record {
            Some(r) => r,
            None => {
                let known = runs::run_get(&mut conn, run_id.uuid()).await?.is_some();
                return Err(Error::not_found(if known {
                    format!("the saved plan of run {run_id}")
                } else {
                    format!("run {run_id}")
                }));
            }
        };
        let run = runs::run_get(&mut conn, run_id.uuid())
            .await?
            .ok_or_else(|| Error::internal(format!("run {run_id} vanished")))?;
        drop(conn);
        let masked_plan_json = match &record.sealed {
            None => Vec::new(),
            Some(s) => self
                .open(
                    &context(run.tenant_id, run.state_id),
                    &aad_named("masked-plan", record.plan_id),
                    &SealedRef {
                        object_key: &s.object_key,
                        object_version: &s.object_version,
                        key_id: &s.key_id,
                        wrapped_key: &s.wrapped_key,
                        nonce: &s.nonce,
                        ciphertext_sha256: Some(&s.ciphertext_sha256),
                        plaintext_sha256: Some(&s.plaintext_sha256),
                    },
                    Integrity::Full,
                )
                .await
                .map_err(|f| {
                    f.into_error(|m| {
                        Error::failed_precondition(format!(
                            "the masked plan of run {run_id} is damaged: {m}"
                        ))
                    })
                })?,
        };
        Ok(MaskedPlan {
            plan_id: record.plan_id,
            plan_sha256: record.plan_sha256,
            base_generation: record.base_generation,
            masked_plan_json,
            created_at: record.created_at,
        })
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
        drop(conn);
        self.failpoints.hit(PLAN_BEFORE_LEASE).await?;
        let mut conn = self.pool.acquire().await?;
        // The statement that leases the plan checks the attempt is still live.
        let Some(plan) = plans::plan_lease(&mut conn, plan_run, live.attempt_id).await? else {
            drop(conn);
            self.live_attempt(run_id, attempt).await?;
            return Err(Error::failed_precondition(
                "the saved plan has expired, was used, or is leased to another live attempt"
                    .to_owned(),
            ));
        };
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
                Integrity::Full,
            )
            .await
            .map_err(|f| {
                f.into_error(|m| {
                    Error::failed_precondition(format!("the saved plan is damaged: {m}"))
                })
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
