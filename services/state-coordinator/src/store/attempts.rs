//! The `attempts` table: one row per admission of a run, holding the run token's hash and
//! the lease.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct AttemptRow {
    pub attempt_id: Uuid,
    pub run_id: Uuid,
    pub attempt: i32,
    pub state_id: Uuid,
    pub read_only: bool,
    pub base_generation: i64,
    pub last_seen_generation: i64,
    pub last_written_generation: Option<i64>,
    pub lease_expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The outcome the attempt finished with.
    pub outcome: Option<String>,
    pub refusal_reason: Option<String>,
    /// The state's current generation when the attempt finished.
    pub final_generation: Option<i64>,
    /// Who revoked the attempt: `newer-attempt` or `recovery` (None: not revoked, or
    /// revoked before this was recorded, which was always by a newer attempt).
    pub revoked_by: Option<String>,
    /// Set when the attempt finished after its lease expired or a recovery revoked it.
    pub incomplete_reason: Option<String>,
    /// Computed by the query: the lease has not expired (database clock).
    pub lease_live: bool,
}

impl AttemptRow {
    /// Live: neither revoked, finished nor expired.
    pub fn live(&self) -> bool {
        self.revoked_at.is_none() && self.finished_at.is_none() && self.lease_live
    }

    /// Why this attempt may no longer act, if it may not.
    pub fn dead_reason(&self) -> Option<&'static str> {
        if self.revoked_at.is_some() {
            if self.revoked_by.as_deref() == Some(REVOKED_BY_RECOVERY) {
                Some("the run attempt was revoked by a recovery of its state")
            } else {
                Some("the run attempt was revoked by a newer attempt")
            }
        } else if self.finished_at.is_some() {
            Some("the run attempt has finished")
        } else if !self.lease_live {
            Some("the run attempt's lease has expired")
        } else {
            None
        }
    }
}

/// `revoked_by` of an attempt revoked by the admission of the next one.
pub const REVOKED_BY_NEWER_ATTEMPT: &str = "newer-attempt";
/// `revoked_by` of an attempt revoked by a recovery of its state.
pub const REVOKED_BY_RECOVERY: &str = "recovery";

pub(crate) const COLS: &str = "attempt_id, run_id, attempt, state_id, read_only, base_generation,
    last_seen_generation, last_written_generation, lease_expires_at, revoked_at, finished_at,
    outcome, refusal_reason, final_generation, revoked_by, incomplete_reason,
    (lease_expires_at > now()) AS lease_live";

#[derive(Debug, Clone)]
pub struct NewAttempt<'a> {
    pub attempt_id: Uuid,
    pub run_id: Uuid,
    pub attempt: i32,
    pub state_id: Uuid,
    pub token_hash: &'a str,
    pub read_only: bool,
    pub base_generation: i64,
    pub state_object_id: Option<&'a str>,
    pub state_status_at_start: &'a str,
    pub lease_secs: f64,
}

pub async fn attempt_insert(
    conn: &mut PgConnection,
    a: &NewAttempt<'_>,
) -> sqlx::Result<AttemptRow> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO attempts (attempt_id, run_id, attempt, state_id, token_hash, read_only,
            base_generation, state_object_id, state_status_at_start, last_seen_generation,
            lease_expires_at)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$7, now() + make_interval(secs => $10))
         RETURNING {COLS}"
    )))
    .bind(a.attempt_id)
    .bind(a.run_id)
    .bind(a.attempt)
    .bind(a.state_id)
    .bind(a.token_hash)
    .bind(a.read_only)
    .bind(a.base_generation)
    .bind(a.state_object_id)
    .bind(a.state_status_at_start)
    .bind(a.lease_secs)
    .fetch_one(conn)
    .await
}

pub async fn attempt_by_token(
    conn: &mut PgConnection,
    token_hash: &str,
) -> sqlx::Result<Option<AttemptRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM attempts WHERE token_hash = $1"
    )))
    .bind(token_hash)
    .fetch_optional(conn)
    .await
}

/// Locks the attempt row so admission of a newer attempt serialises with this write.
pub async fn attempt_get_for_update(
    conn: &mut PgConnection,
    attempt_id: Uuid,
) -> sqlx::Result<Option<AttemptRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM attempts WHERE attempt_id = $1 FOR UPDATE"
    )))
    .bind(attempt_id)
    .fetch_optional(conn)
    .await
}

pub async fn attempt_get(
    conn: &mut PgConnection,
    run_id: Uuid,
    attempt: i32,
) -> sqlx::Result<Option<AttemptRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM attempts WHERE run_id = $1 AND attempt = $2"
    )))
    .bind(run_id)
    .bind(attempt)
    .fetch_optional(conn)
    .await
}

pub async fn attempt_latest_for_update(
    conn: &mut PgConnection,
    run_id: Uuid,
) -> sqlx::Result<Option<AttemptRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM attempts WHERE run_id = $1 ORDER BY attempt DESC LIMIT 1 FOR UPDATE"
    )))
    .bind(run_id)
    .fetch_optional(conn)
    .await
}

/// Revokes the attempt because the next attempt of its run is admitted.
pub async fn attempt_revoke(conn: &mut PgConnection, attempt_id: Uuid) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE attempts SET revoked_at = now(), revoked_by = $2
         WHERE attempt_id = $1 AND revoked_at IS NULL AND finished_at IS NULL",
    )
    .bind(attempt_id)
    .bind(REVOKED_BY_NEWER_ATTEMPT)
    .execute(conn)
    .await?;
    Ok(())
}

/// Revokes every unfinished attempt of the state (a recovery fences live writers); returns
/// how many were revoked.
pub async fn attempt_revoke_all_of_state(
    conn: &mut PgConnection,
    state_id: Uuid,
) -> sqlx::Result<u64> {
    let done = sqlx::query(
        "UPDATE attempts SET revoked_at = now(), revoked_by = $2
         WHERE state_id = $1 AND revoked_at IS NULL AND finished_at IS NULL",
    )
    .bind(state_id)
    .bind(REVOKED_BY_RECOVERY)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Whether a newer attempt of the run than `attempt` exists.
pub async fn attempt_superseded(
    conn: &mut PgConnection,
    run_id: Uuid,
    attempt: i32,
) -> sqlx::Result<Option<i32>> {
    sqlx::query_scalar("SELECT max(attempt) FROM attempts WHERE run_id = $1 AND attempt > $2")
        .bind(run_id)
        .bind(attempt)
        .fetch_one(conn)
        .await
}

/// Extends a live lease; None when the attempt is no longer live.
pub async fn attempt_renew(
    conn: &mut PgConnection,
    attempt_id: Uuid,
    lease_secs: f64,
) -> sqlx::Result<Option<DateTime<Utc>>> {
    sqlx::query_scalar(
        "UPDATE attempts SET lease_expires_at = now() + make_interval(secs => $2)
         WHERE attempt_id = $1 AND revoked_at IS NULL AND finished_at IS NULL
           AND lease_expires_at > now()
         RETURNING lease_expires_at",
    )
    .bind(attempt_id)
    .bind(lease_secs)
    .fetch_optional(conn)
    .await
}

/// Marks the attempt finished, recording the state's current generation at that moment and,
/// when it finished after its lease expired or a recovery revoked it, why its state may be
/// incomplete.
pub async fn attempt_finish(
    conn: &mut PgConnection,
    attempt_id: Uuid,
    outcome: &str,
    final_generation: i64,
    incomplete_reason: Option<&str>,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "UPDATE attempts SET finished_at = now(), outcome = $2, final_generation = $3,
                incomplete_reason = $4
         WHERE attempt_id = $1 AND finished_at IS NULL",
    )
    .bind(attempt_id)
    .bind(outcome)
    .bind(final_generation)
    .bind(incomplete_reason)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn attempt_saw(
    conn: &mut PgConnection,
    attempt_id: Uuid,
    generation: i64,
) -> sqlx::Result<()> {
    // Only forward: a slow GET that read an older generation than the attempt's own
    // committed POST must not move the mark back (the next POST would be a spurious 409).
    sqlx::query(
        "UPDATE attempts SET last_seen_generation = GREATEST(last_seen_generation, $2)
         WHERE attempt_id = $1",
    )
    .bind(attempt_id)
    .bind(generation)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn attempt_wrote(
    conn: &mut PgConnection,
    attempt_id: Uuid,
    generation: i64,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE attempts SET last_seen_generation = GREATEST(last_seen_generation, $2),
                last_written_generation = GREATEST(last_written_generation, $2)
         WHERE attempt_id = $1",
    )
    .bind(attempt_id)
    .bind(generation)
    .execute(conn)
    .await?;
    Ok(())
}

/// Records why the coordinator refused this attempt (stale, fenced) so the runner can
/// classify the failure from the coordinator rather than from tofu's text.
pub async fn attempt_refuse(
    conn: &mut PgConnection,
    attempt_id: Uuid,
    reason: &str,
) -> sqlx::Result<()> {
    sqlx::query("UPDATE attempts SET refusal_reason = $2 WHERE attempt_id = $1")
        .bind(attempt_id)
        .bind(reason)
        .execute(conn)
        .await?;
    Ok(())
}

/// An attempt row together with the attempt that holds its state's lock, if any.
#[derive(Debug, Clone, FromRow)]
pub struct AttemptWithLock {
    #[sqlx(flatten)]
    pub attempt: AttemptRow,
    pub lock_attempt_id: Option<Uuid>,
}

/// `attempt_get_for_update` and the holder of `state_id`'s lock in one round trip (the
/// write path's commit checks both).
pub async fn attempt_get_for_update_with_lock(
    conn: &mut PgConnection,
    attempt_id: Uuid,
    state_id: Uuid,
) -> sqlx::Result<Option<AttemptWithLock>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS},
            (SELECT l.attempt_id FROM locks l WHERE l.state_id = $2) AS lock_attempt_id
         FROM attempts WHERE attempt_id = $1 FOR UPDATE"
    )))
    .bind(attempt_id)
    .bind(state_id)
    .fetch_optional(conn)
    .await
}
