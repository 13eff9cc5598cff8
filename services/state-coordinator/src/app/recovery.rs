//! Recovery of fenced states (admin only, audited through events, idempotent), forced
//! unlocks and the after-restore switch.
use cairn_auth::Principal;
use cairn_contract::{StateId, TenantId};
use cairn_proto::events::{self, event::Payload};

use super::App;
use super::access::{require_admin, require_platform_admin};
use super::backend::WriteSpec;
use super::events::record;
use super::payload::{Integrity, ReadFailure};
use crate::error::{Error, Result};
use crate::store::generations::GenerationRow;
use crate::store::states::StateRow;
use crate::store::{attempts, flags, generations, locks, states};

/// Part of the transaction that clears a fence (both kinds of recovery): every attempt of
/// the state that has not finished is revoked and its lock dropped. An attempt that held the
/// lock before the fence was checked at LOCK against a state that no longer exists; it must
/// not write (or read) after the recovery. Its run is admitted again by the workflow.
pub(crate) async fn fence_live_writers(
    conn: &mut sqlx::PgConnection,
    state_id: uuid::Uuid,
) -> Result<()> {
    let revoked = attempts::attempt_revoke_all_of_state(conn, state_id).await?;
    let dropped = locks::lock_drop_state(conn, state_id).await?;
    if revoked > 0 || dropped {
        tracing::warn!(%state_id, revoked, lock_dropped = dropped, "recovery revoked the live attempts of the state");
    }
    Ok(())
}

/// A generation with the outcome of verifying it end to end.
#[derive(Debug, Clone)]
pub struct InspectedGeneration {
    pub row: GenerationRow,
    pub problem: Option<String>,
}

/// What `recover` did.
#[derive(Debug, Clone)]
pub struct Recovery {
    pub state: StateRow,
    pub new_generation: i64,
    pub already_recovered: bool,
}

impl App {
    /// Fetches, hashes, unwraps and opens a generation without fencing anything.
    pub async fn verify_generation(&self, state: &StateRow, g: &GenerationRow) -> Option<String> {
        self.check_generation(state, g)
            .await
            .err()
            .map(|f| f.describe().to_owned())
    }

    /// Like `verify_generation`, keeping whether a failure proves damage or is transient.
    pub async fn check_generation(
        &self,
        state: &StateRow,
        g: &GenerationRow,
    ) -> Result<(), ReadFailure> {
        self.open_generation(state, g, Integrity::Full)
            .await
            .map(|_| ())
    }

    pub async fn list_fenced(
        &self,
        who: &Principal,
        tenant: Option<TenantId>,
    ) -> Result<Vec<StateRow>> {
        match tenant {
            Some(t) => require_admin(who, t, "tenant")?,
            None => require_platform_admin(who)?,
        }
        let mut conn = self.pool.acquire().await?;
        let tenant = tenant.map(TenantId::uuid);
        Ok(states::state_list(&mut conn, tenant, None, true, None, 10_000).await?)
    }

    pub async fn inspect_state(
        &self,
        who: &Principal,
        state_id: StateId,
    ) -> Result<(StateRow, Vec<InspectedGeneration>)> {
        let state = self.get_state(who, state_id).await?;
        require_admin(who, state.tenant_id, &format!("state {state_id}"))?;
        let mut conn = self.pool.acquire().await?;
        let rows = generations::generation_list(&mut conn, state_id.uuid()).await?;
        drop(conn);
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let problem = self.verify_generation(&state, &row).await;
            out.push(InspectedGeneration { row, problem });
        }
        Ok((state, out))
    }

    /// `rollback_to == 0`: the current object was restored; verify it and clear the fence.
    /// `rollback_to == n`: write a new generation with generation n's content.
    pub async fn recover(
        &self,
        who: &Principal,
        state_id: StateId,
        rollback_to: i64,
        reason: &str,
    ) -> Result<Recovery> {
        let state = self.get_state(who, state_id).await?;
        let sid = state_id.uuid();
        require_admin(who, state.tenant_id, &format!("state {state_id}"))?;
        if reason.trim().is_empty() {
            return Err(Error::invalid_argument(
                "a recovery needs a reason".to_owned(),
            ));
        }
        let mut conn = self.pool.acquire().await?;
        let current = generations::generation_get(&mut conn, sid, state.current_generation).await?;
        drop(conn);
        let done = |state: StateRow, new_generation, already_recovered| Recovery {
            state,
            new_generation,
            already_recovered,
        };
        if !state.fenced() {
            let repeat = rollback_to == 0
                || current.as_ref().and_then(|g| g.recovered_from) == Some(rollback_to);
            if repeat {
                return Ok(done(state.clone(), 0, true));
            }
            return Err(Error::failed_precondition(format!(
                "state {state_id} is healthy; only a fenced state is rolled back"
            )));
        }
        if rollback_to == 0 {
            if let Some(g) = &current
                && let Some(problem) = self.verify_generation(&state, g).await
            {
                return Err(Error::failed_precondition(format!(
                    "generation {} still fails verification: {problem}; restore its object or roll back to an earlier generation",
                    g.generation
                )));
            }
            let cur = state.current_generation;
            let cleared = cairn_db::transaction!(&self.pool, |conn| {
                let cleared = states::state_clear_fence(conn, sid, cur, cur).await?;
                if cleared {
                    fence_live_writers(conn, sid).await?;
                    let payload = Payload::Recovered(events::Recovered {
                        state_id: state_id.to_string(),
                        new_generation: 0,
                        recovered_from: u64::try_from(cur).unwrap_or(0),
                        reason: reason.to_owned(),
                    });
                    record(conn, state.tenant_id, sid, &who.subject, payload).await?;
                }
                Ok::<_, Error>(cleared)
            })?;
            self.outbox_notify.notify_one();
            let now = self.get_state(who, state_id).await?;
            tracing::warn!(%state_id, actor = %who.subject, %reason, "fence cleared after restore");
            return Ok(done(now, 0, !cleared));
        }
        if rollback_to >= state.current_generation || rollback_to < 1 {
            return Err(Error::invalid_argument(format!(
                "rollback_to_generation must be an earlier generation (1..{})",
                state.current_generation - 1
            )));
        }
        let mut conn = self.pool.acquire().await?;
        let source = generations::generation_get(&mut conn, sid, rollback_to)
            .await?
            .ok_or_else(|| {
                Error::not_found(format!("generation {rollback_to} of state {state_id}"))
            })?;
        drop(conn);
        let body = self
            .open_generation(&state, &source, Integrity::Full)
            .await
            .map_err(|f| {
                Error::failed_precondition(format!(
                    "generation {rollback_to} does not verify: {}",
                    f.describe()
                ))
            })?;
        let target = u64::try_from(state.current_generation + 1).unwrap_or(0);
        self.write_generation(
            &state,
            WriteSpec {
                target,
                body: &body,
                serial: u64::try_from(source.tofu_serial).unwrap_or(0),
                lineage: &source.lineage,
                attempt: None,
                recovered_from: Some(rollback_to),
                actor: &who.subject,
                reason,
            },
        )
        .await?;
        tracing::warn!(%state_id, actor = %who.subject, rollback_to, %reason, "state rolled back");
        let now = self.get_state(who, state_id).await?;
        Ok(done(now, state.current_generation + 1, false))
    }

    /// Removes a lock by id, with a reason; never available over HTTP.
    pub async fn force_unlock(
        &self,
        who: &Principal,
        state_id: StateId,
        lock_id: &str,
        reason: &str,
    ) -> Result<bool> {
        let state = self.get_state(who, state_id).await?;
        let sid = state_id.uuid();
        require_admin(who, state.tenant_id, &format!("state {state_id}"))?;
        if reason.trim().is_empty() || lock_id.is_empty() {
            return Err(Error::invalid_argument(
                "force-unlock needs a lock_id and a reason".to_owned(),
            ));
        }
        let released = cairn_db::transaction!(&self.pool, |conn| {
            let released = locks::lock_release(conn, sid, lock_id, None).await?;
            if released {
                let payload = Payload::LockForced(events::LockForced {
                    state_id: state_id.to_string(),
                    lock_id: lock_id.to_owned(),
                    reason: reason.to_owned(),
                });
                record(conn, state.tenant_id, sid, &who.subject, payload).await?;
            }
            Ok::<_, Error>(released)
        })?;
        if released {
            self.outbox_notify.notify_one();
            tracing::warn!(%state_id, actor = %who.subject, %lock_id, %reason, "lock forced open");
        }
        Ok(released)
    }

    pub async fn set_after_restore(&self, who: &Principal, on: bool, reason: &str) -> Result<bool> {
        require_platform_admin(who)?;
        let mut conn = self.pool.acquire().await?;
        flags::set_after_restore(&mut conn, on, reason).await?;
        Ok(on)
    }
}
