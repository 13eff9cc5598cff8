//! Runs and attempts: registration by the workflow, admission, lease renewal, finishing,
//! and handing the root config to the admitted attempt.
use cairn_auth::Principal;
use cairn_contract::{AttemptId, Environment, RefusalReason, RunId, RunKind, StateId};
use cairn_proto::events::{self, event::Payload};
use cairn_service::access::{can_see, require_service};
use chrono::{DateTime, Utc};

use super::App;
use super::events::record;
use super::payload::{ReadFailure, aad_named, context};
use crate::domain::token::RunToken;
use crate::domain::{ExecutionContext, Outcome};
use crate::error::{Error, Result};
use crate::store::attempts::{AttemptRow, NewAttempt};
use crate::store::runs::{NewRun, RunRow, RunWithAttempt};
use crate::store::{attempts, flags, generations, locks, plans, runs, states};

/// What the workflow registers.
#[derive(Debug, Clone)]
pub struct Registration {
    pub run_id: RunId,
    pub state_id: StateId,
    pub kind: RunKind,
    /// Normalised once, here: the run stores the canonical name (`Prod` is `production`).
    pub environment: Environment,
    pub root_config: Vec<u8>,
    pub config_hash: String,
    pub context: ExecutionContext,
    pub plan_run_id: Option<RunId>,
}

/// What an admitted attempt receives.
#[derive(Debug)]
pub struct Admission {
    pub run_id: RunId,
    pub attempt: i32,
    pub state_id: StateId,
    pub token: RunToken,
    pub lease_expires_at: DateTime<Utc>,
    pub base_generation: i64,
    pub read_only: bool,
    pub plan_current: bool,
    pub plan_stale_reason: String,
    pub interrupted: bool,
}

/// The run's config for its attempt.
#[derive(Debug)]
pub struct RunConfig {
    pub run: RunRow,
    pub root_config: Vec<u8>,
    pub context: ExecutionContext,
}

fn kind_of(run: &RunRow) -> Result<RunKind> {
    run.kind
        .parse()
        .map_err(|e| Error::internal(format!("stored run kind: {e}")))
}

/// The stored environment (normalised when the run was registered).
fn environment_of(run: &RunRow) -> Result<Environment> {
    Environment::parse(&run.environment)
        .map_err(|e| Error::internal(format!("stored environment: {e}")))
}

impl App {
    pub async fn register_run(&self, who: &Principal, r: Registration) -> Result<bool> {
        require_service(who)?;
        if r.root_config.is_empty() || r.root_config.len() > self.settings.max_plan_bytes {
            return Err(Error::invalid_argument(
                "root_config must be non-empty and within the size limit".to_owned(),
            ));
        }
        let actual = cairn_storage::sha256_hex(&r.root_config);
        if actual != r.config_hash {
            return Err(Error::invalid_argument(format!(
                "config_hash does not match root_config (sha256 is {actual})"
            )));
        }
        let mut conn = self.pool.acquire().await?;
        let state = states::state_get(&mut conn, r.state_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(format!("state {}", r.state_id)))?;
        if r.context.tenant_id != state.tenant_id.to_string() {
            return Err(Error::invalid_argument(
                "execution context tenant does not own this state".to_owned(),
            ));
        }
        if let Some(plan_run) = r.plan_run_id {
            if r.kind != RunKind::Apply {
                return Err(Error::invalid_argument(
                    "only an apply names a plan run".to_owned(),
                ));
            }
            let p = runs::run_get(&mut conn, plan_run.uuid())
                .await?
                .ok_or_else(|| Error::not_found(format!("plan run {plan_run}")))?;
            if p.state_id != r.state_id.uuid() || p.kind != RunKind::Plan.as_str() {
                return Err(Error::invalid_argument(
                    "plan_run_id must name a plan run of the same state".to_owned(),
                ));
            }
        }
        if let Some(existing) = runs::run_get(&mut conn, r.run_id.uuid()).await? {
            return same_registration(&existing, &r).map(|()| false);
        }
        drop(conn);
        let ctx_json = serde_json::to_value(&r.context)
            .map_err(|e| Error::internal(format!("encode context: {e}")))?;
        let sealed = self
            .seal_config(state.tenant_id, state.state_id, r.run_id, &r.root_config)
            .await?;
        let mut conn = self.pool.acquire().await?;
        let created = runs::run_insert(
            &mut conn,
            &NewRun {
                run_id: r.run_id.uuid(),
                state_id: r.state_id.uuid(),
                tenant_id: state.tenant_id,
                kind: r.kind.as_str(),
                environment: r.environment.as_str(),
                config_hash: &r.config_hash,
                config_key_id: &sealed.key_id,
                config_wrapped_key: &sealed.wrapped_key,
                config_nonce: &sealed.nonce,
                config_ciphertext: &sealed.ciphertext,
                context: &ctx_json,
                plan_run_id: r.plan_run_id.map(RunId::uuid),
                created_by: &who.subject,
                traceparent: cairn_telemetry::TraceContext::current().traceparent,
            },
        )
        .await?;
        if !created {
            let existing = runs::run_get(&mut conn, r.run_id.uuid())
                .await?
                .ok_or_else(|| Error::internal("run vanished".to_owned()))?;
            same_registration(&existing, &r)?;
        }
        Ok(created)
    }

    /// Admits attempt n: revokes attempt n-1 (once its lease expired or it finished) and
    /// frees its lock, records the base generation and mints the run token.
    pub async fn admit_run(&self, who: &Principal, run_id: RunId) -> Result<Admission> {
        require_service(who)?;
        let lease_secs = self.settings.lease.as_secs_f64();
        let admission = cairn_db::transaction!(&self.pool, |conn| {
            let run = runs::run_get_for_update(conn, run_id.uuid())
                .await?
                .ok_or_else(|| Error::not_found(format!("run {run_id}")))?;
            if run.finished_at.is_some() {
                return Err(Error::RunFinished {
                    run_id,
                    status: run.status.clone(),
                });
            }
            let kind = kind_of(&run)?;
            let environment = environment_of(&run)?;
            let state = states::state_get_for_update(conn, run.state_id)
                .await?
                .ok_or_else(|| Error::internal("state vanished".to_owned()))?;
            if state.fenced() {
                return Err(Error::Fenced {
                    state_id: state.state_id.into(),
                    reason: state.fence_reason.clone().unwrap_or_default(),
                });
            }
            if kind.changes_state() && flags::after_restore(conn).await? {
                return Err(Error::AfterRestore);
            }
            let previous = attempts::attempt_latest_for_update(conn, run_id.uuid()).await?;
            if let Some(prev) = &previous {
                if prev.live() {
                    return Err(Error::LeaseHeld {
                        run_id,
                        attempt: prev.attempt,
                        until: prev.lease_expires_at,
                    });
                }
                attempts::attempt_revoke(conn, prev.attempt_id).await?;
                locks::lock_release_by_attempt(conn, prev.attempt_id).await?;
            }
            let number = previous.as_ref().map_or(1, |p| p.attempt + 1);
            let base = state.current_generation;
            let object_id = if base > 0 {
                generations::generation_get(conn, state.state_id, base)
                    .await?
                    .map(|g| format!("{}#{}", g.object_key, g.object_version))
            } else {
                None
            };
            let token = RunToken::generate()
                .map_err(|_| Error::internal("random generator failed".to_owned()))?;
            let attempt = attempts::attempt_insert(
                conn,
                &NewAttempt {
                    attempt_id: AttemptId::new().uuid(),
                    run_id: run_id.uuid(),
                    attempt: number,
                    state_id: state.state_id,
                    token_hash: &token.hash(),
                    read_only: kind.read_only(),
                    base_generation: base,
                    state_object_id: object_id.as_deref(),
                    state_status_at_start: &state.status,
                    lease_secs,
                },
            )
            .await?;
            runs::run_set_attempt(conn, run_id.uuid(), number).await?;
            let (plan_current, plan_stale_reason) = match run.plan_run_id {
                Some(plan_run) => match plans::plan_by_run(conn, plan_run).await? {
                    None => (
                        false,
                        "the saved plan has expired or was already used".to_owned(),
                    ),
                    Some(p) => plan_currency(&p, &run, base),
                },
                None => (false, String::new()),
            };
            let payload = Payload::RunAdmitted(events::RunAdmitted {
                state_id: state.state_id.to_string(),
                run_id: run_id.to_string(),
                attempt: u32::try_from(number).unwrap_or(0),
                kind: kind.as_str().to_owned(),
                base_generation: u64::try_from(base).unwrap_or(0),
            });
            record(conn, state.tenant_id, state.state_id, &who.subject, payload).await?;
            Ok(Admission {
                run_id,
                attempt: number,
                state_id: state.state_id.into(),
                token,
                lease_expires_at: attempt.lease_expires_at,
                base_generation: base,
                read_only: attempt.read_only,
                plan_current,
                plan_stale_reason,
                interrupted: number >= 2 && kind.interrupts_on_retry(&environment),
            })
        })?;
        self.outbox_notify.notify_one();
        Ok(admission)
    }

    /// The run and its latest attempt, with the lease's liveness by the database clock.
    pub async fn get_run(&self, who: &Principal, run_id: RunId) -> Result<RunWithAttempt> {
        require_service(who)?;
        let what = format!("run {run_id}");
        let mut conn = self.pool.acquire().await?;
        let run = runs::run_with_latest_attempt(&mut conn, run_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(what.clone()))?;
        can_see(who, run.tenant_id, &what)?;
        Ok(run)
    }

    /// The attempt `(run, n)`, which must be live.
    pub(crate) async fn live_attempt(&self, run_id: RunId, attempt: i32) -> Result<AttemptRow> {
        let mut conn = self.pool.acquire().await?;
        let row = attempts::attempt_get(&mut conn, run_id.uuid(), attempt)
            .await?
            .ok_or_else(|| Error::not_found(format!("attempt {attempt} of run {run_id}")))?;
        if let Some(reason) = row.dead_reason() {
            return Err(Error::failed_precondition(reason.to_owned()));
        }
        Ok(row)
    }

    pub async fn renew_run(
        &self,
        who: &Principal,
        run_id: RunId,
        attempt: i32,
    ) -> Result<DateTime<Utc>> {
        require_service(who)?;
        let row = self.live_attempt(run_id, attempt).await?;
        let mut conn = self.pool.acquire().await?;
        attempts::attempt_renew(&mut conn, row.attempt_id, self.settings.lease.as_secs_f64())
            .await?
            .ok_or_else(|| {
                Error::failed_precondition("the run attempt is no longer live".to_owned())
            })
    }

    /// Finishes an attempt (idempotent). On success its last written generation becomes
    /// final; its lock is freed and the plans it took are deleted. Returns the current
    /// generation and why a LOCK of this attempt was refused, if one was.
    pub async fn finish_run(
        &self,
        who: &Principal,
        run_id: RunId,
        attempt: i32,
        outcome: Outcome,
        message: &str,
    ) -> Result<(i64, Option<RefusalReason>)> {
        require_service(who)?;
        let (result, objects) = cairn_db::transaction!(&self.pool, |conn| {
            let run = runs::run_get_for_update(conn, run_id.uuid())
                .await?
                .ok_or_else(|| Error::not_found(format!("run {run_id}")))?;
            let row = attempts::attempt_get(conn, run_id.uuid(), attempt)
                .await?
                .ok_or_else(|| Error::not_found(format!("attempt {attempt} of run {run_id}")))?;
            let row = attempts::attempt_get_for_update(conn, row.attempt_id)
                .await?
                .ok_or_else(|| Error::internal("attempt vanished".to_owned()))?;
            let state = states::state_get(conn, run.state_id)
                .await?
                .ok_or_else(|| Error::internal("state vanished".to_owned()))?;
            // The recorded code (`fenced`, `stale`); a row without one (or from before codes
            // were recorded) has no reason.
            let refusal = row
                .refusal_reason
                .as_deref()
                .and_then(RefusalReason::from_code);
            if row.finished_at.is_some() {
                // Idempotent: the answer the first finish gave, not today's generation (a
                // late different outcome changes nothing either).
                let generation = row.final_generation.unwrap_or(state.current_generation);
                return Ok(((generation, refusal), Vec::new()));
            }
            // Only the latest attempt finishes the run: a superseded one must not report an
            // outcome over the attempt that replaced it.
            if let Some(latest) = attempts::attempt_superseded(conn, run_id.uuid(), attempt).await?
            {
                return Err(Error::Superseded {
                    run_id,
                    attempt,
                    latest,
                });
            }
            // The latest attempt may still finish after its lease expired or a recovery
            // revoked it (nothing else will finish the run), recorded as such.
            let incomplete = if row.revoked_at.is_some() {
                Some(
                    "the attempt was revoked by a recovery of its state before it finished: state may be incomplete",
                )
            } else if !row.lease_live {
                Some("the attempt's lease expired before it finished: state may be incomplete")
            } else {
                None
            };
            if let Some(why) = incomplete {
                tracing::warn!(%run_id, attempt, reason = why, "run finished by a dead attempt");
            }
            attempts::attempt_finish(
                conn,
                row.attempt_id,
                outcome.as_str(),
                state.current_generation,
                incomplete,
            )
            .await?;
            if outcome == Outcome::Succeeded
                && let Some(g) = row.last_written_generation
            {
                generations::generation_mark_final(conn, run.state_id, g).await?;
            }
            locks::lock_release_by_attempt(conn, row.attempt_id).await?;
            let objects = plans::plan_delete_leased(conn, row.attempt_id).await?;
            runs::run_finish(conn, run_id.uuid(), outcome.as_str(), message).await?;
            let payload = Payload::RunFinished(events::RunFinished {
                state_id: run.state_id.to_string(),
                run_id: run_id.to_string(),
                attempt: u32::try_from(attempt).unwrap_or(0),
                outcome: outcome.as_str().to_owned(),
                final_generation: u64::try_from(state.current_generation).unwrap_or(0),
            });
            record(conn, run.tenant_id, run.state_id, &who.subject, payload).await?;
            Ok(((state.current_generation, refusal), objects))
        })?;
        self.outbox_notify.notify_one();
        self.delete_objects(&objects).await;
        Ok(result)
    }

    /// Hands the root config and execution context to the admitted, live attempt.
    pub async fn run_config(
        &self,
        who: &Principal,
        run_id: RunId,
        attempt: i32,
    ) -> Result<RunConfig> {
        require_service(who)?;
        self.live_attempt(run_id, attempt).await?;
        self.stored_run_config(run_id).await
    }

    /// The root config and execution context of any registered run (admitted or not,
    /// finished or not), for services: a destroy or a drift scan uses exactly the config
    /// that was applied. No attempt or lease is involved, and the state's fence does not
    /// matter either: this reads the run's own sealed row, never the state.
    pub async fn registered_run_config(&self, who: &Principal, run_id: RunId) -> Result<RunConfig> {
        require_service(who)?;
        self.stored_run_config(run_id).await
    }

    /// The one way a run's stored config is read and opened.
    async fn stored_run_config(&self, run_id: RunId) -> Result<RunConfig> {
        let mut conn = self.pool.acquire().await?;
        let run = runs::run_get(&mut conn, run_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(format!("run {run_id}")))?;
        drop(conn);
        let root_config = self.open_config(&run).await.map_err(|f| {
            f.into_error(|m| {
                Error::failed_precondition(format!(
                    "the stored root config of run {run_id} is damaged: {m}"
                ))
            })
        })?;
        let context: ExecutionContext = serde_json::from_value(run.context.clone())
            .map_err(|e| Error::internal(format!("stored execution context: {e}")))?;
        Ok(RunConfig {
            run,
            root_config,
            context,
        })
    }

    /// Seals a run's root config under its state's config-sealing key (see
    /// [`super::config_keys`]): the key manager is asked only when the state has no key
    /// within its bounds. The run id is the AAD, so a config opens as its own run's only.
    async fn seal_config(
        &self,
        tenant_id: uuid::Uuid,
        state_id: uuid::Uuid,
        run_id: RunId,
        root_config: &[u8],
    ) -> Result<SealedConfig> {
        let key = self
            .config_keys
            .key(tenant_id, state_id, || self.config_key(tenant_id, state_id))
            .await
            .map_err(|e| Error::unavailable(format!("key management: {e}")))?;
        let sealed = cairn_storage::seal(
            key.plaintext.expose(),
            &aad_named("run-config", run_id.uuid()),
            root_config,
        )
        .map_err(|e| Error::internal(format!("seal root config: {e}")))?;
        Ok(SealedConfig {
            key_id: key.key_id,
            wrapped_key: key.wrapped,
            nonce: sealed.nonce.to_vec(),
            ciphertext: sealed.ciphertext,
        })
    }

    /// Asks for a new state's config-sealing key in the background, so that its first
    /// `RegisterRun` finds it made (or in the making).
    pub(crate) fn prefetch_config_key(&self, tenant_id: uuid::Uuid, state_id: uuid::Uuid) {
        let Some(slot) = self.config_keys.prefetch(tenant_id, state_id) else {
            return;
        };
        let app = self.clone();
        tokio::spawn(async move {
            if let Err(e) = slot
                .get_or_try_init(|| app.config_key(tenant_id, state_id))
                .await
            {
                tracing::debug!(%state_id, error = %e, "asking for a config key ahead failed; the run's registration asks again");
            }
        });
    }

    /// A fresh data key for a state's root configs, remembered unwrapped (the runner's
    /// `GetRunConfig` needs no unwrap call).
    async fn config_key(
        &self,
        tenant_id: uuid::Uuid,
        state_id: uuid::Uuid,
    ) -> Result<cairn_storage::DataKey, cairn_storage::KeyError> {
        let ctx = context(tenant_id, state_id);
        let key = self.keys.generate_data_key(&ctx).await?;
        self.key_cache
            .remember(&key.key_id, &key.wrapped, &ctx, &key.plaintext);
        Ok(key)
    }

    async fn open_config(&self, run: &RunRow) -> Result<Vec<u8>, ReadFailure> {
        // The root config is sealed in the row itself; reuse the envelope without storage.
        let ctx = context(run.tenant_id, run.state_id);
        let key = self
            .key_cache
            .get_or_unwrap(
                self.keys.as_ref(),
                &run.config_key_id,
                &run.config_wrapped_key,
                &ctx,
            )
            .await
            .map_err(|e| {
                if e.is_damage() {
                    ReadFailure::Damage(e.to_string())
                } else {
                    ReadFailure::Unavailable(format!("key management: {e}"))
                }
            })?;
        cairn_storage::open(
            key.expose(),
            &run.config_nonce,
            &aad_named("run-config", run.run_id),
            &run.config_ciphertext,
        )
        .map_err(|e| ReadFailure::Damage(e.to_string()))
    }
}

/// A root config as its run row stores it.
struct SealedConfig {
    key_id: String,
    wrapped_key: Vec<u8>,
    nonce: Vec<u8>,
    ciphertext: Vec<u8>,
}

/// Whether a saved plan can still be applied by `run` from generation `base`.
pub(crate) fn plan_currency(p: &plans::PlanRow, run: &RunRow, base: i64) -> (bool, String) {
    if p.base_generation != base {
        (
            false,
            format!(
                "the state moved from generation {} (when the plan was made) to {base}",
                p.base_generation
            ),
        )
    } else if p.config_hash != run.config_hash {
        (
            false,
            "the root config changed since the plan was made".to_owned(),
        )
    } else {
        (true, String::new())
    }
}

fn same_registration(existing: &RunRow, r: &Registration) -> Result<()> {
    // The execution context is part of the content: a retry that names another credential
    // reference or target setting must not silently get the first registration's.
    let stored_context: ExecutionContext = serde_json::from_value(existing.context.clone())
        .map_err(|e| Error::internal(format!("stored execution context: {e}")))?;
    let same = existing.state_id == r.state_id.uuid()
        && existing.kind == r.kind.as_str()
        && existing.environment == r.environment.as_str()
        && existing.config_hash == r.config_hash
        && existing.plan_run_id == r.plan_run_id.map(RunId::uuid)
        && stored_context == r.context;
    if same {
        Ok(())
    } else {
        Err(Error::failed_precondition(format!(
            "run {} is already registered with different content",
            r.run_id
        )))
    }
}
