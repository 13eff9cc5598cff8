//! The `runs` table: what the workflow registered, with its root config sealed.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct RunRow {
    pub run_id: Uuid,
    pub state_id: Uuid,
    pub tenant_id: Uuid,
    pub kind: String,
    pub environment: String,
    pub config_hash: String,
    pub config_key_id: String,
    pub config_wrapped_key: Vec<u8>,
    pub config_nonce: Vec<u8>,
    pub config_ciphertext: Vec<u8>,
    pub context: serde_json::Value,
    pub plan_run_id: Option<Uuid>,
    pub status: String,
    pub current_attempt: i32,
    pub finished_at: Option<DateTime<Utc>>,
}

const COLS: &str = "run_id, state_id, tenant_id, kind, environment, config_hash, config_key_id,
    config_wrapped_key, config_nonce, config_ciphertext, context, plan_run_id, status,
    current_attempt, finished_at";

#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub run_id: Uuid,
    pub state_id: Uuid,
    pub tenant_id: Uuid,
    pub kind: &'a str,
    pub environment: &'a str,
    pub config_hash: &'a str,
    pub config_key_id: &'a str,
    pub config_wrapped_key: &'a [u8],
    pub config_nonce: &'a [u8],
    pub config_ciphertext: &'a [u8],
    pub context: &'a serde_json::Value,
    pub plan_run_id: Option<Uuid>,
    pub created_by: &'a str,
    /// The registering call's W3C `traceparent` (traces on).
    pub traceparent: Option<String>,
}

/// Inserts the run; false when the run id exists already (the caller compares content).
pub async fn run_insert(conn: &mut PgConnection, r: &NewRun<'_>) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "INSERT INTO runs (run_id, state_id, tenant_id, kind, environment, config_hash,
            config_key_id, config_wrapped_key, config_nonce, config_ciphertext, context,
            plan_run_id, created_by, traceparent)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)
         ON CONFLICT (run_id) DO NOTHING",
    )
    .bind(r.run_id)
    .bind(r.state_id)
    .bind(r.tenant_id)
    .bind(r.kind)
    .bind(r.environment)
    .bind(r.config_hash)
    .bind(r.config_key_id)
    .bind(r.config_wrapped_key)
    .bind(r.config_nonce)
    .bind(r.config_ciphertext)
    .bind(r.context)
    .bind(r.plan_run_id)
    .bind(r.created_by)
    .bind(&r.traceparent)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The `traceparent` stored when the run was registered.
pub async fn run_traceparent(
    conn: &mut PgConnection,
    run_id: Uuid,
) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar("SELECT traceparent FROM runs WHERE run_id = $1")
        .bind(run_id)
        .fetch_optional(conn)
        .await
        .map(Option::flatten)
}

pub async fn run_get(conn: &mut PgConnection, run_id: Uuid) -> sqlx::Result<Option<RunRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM runs WHERE run_id = $1"
    )))
    .bind(run_id)
    .fetch_optional(conn)
    .await
}

pub async fn run_get_for_update(
    conn: &mut PgConnection,
    run_id: Uuid,
) -> sqlx::Result<Option<RunRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM runs WHERE run_id = $1 FOR UPDATE"
    )))
    .bind(run_id)
    .fetch_optional(conn)
    .await
}

pub async fn run_set_attempt(
    conn: &mut PgConnection,
    run_id: Uuid,
    attempt: i32,
) -> sqlx::Result<()> {
    sqlx::query("UPDATE runs SET current_attempt = $2, status = 'running' WHERE run_id = $1")
        .bind(run_id)
        .bind(attempt)
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn run_finish(
    conn: &mut PgConnection,
    run_id: Uuid,
    status: &str,
    message: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE runs SET status = $2, outcome_message = $3, finished_at = now()
         WHERE run_id = $1 AND finished_at IS NULL",
    )
    .bind(run_id)
    .bind(status)
    .bind(message)
    .execute(conn)
    .await?;
    Ok(())
}

/// A run with its latest attempt (the attempt columns are None when it was never admitted),
/// as `GetRun` reports it.
#[derive(Debug, Clone, FromRow)]
pub struct RunWithAttempt {
    pub run_id: Uuid,
    pub state_id: Uuid,
    pub tenant_id: Uuid,
    pub kind: String,
    pub environment: String,
    pub status: String,
    pub finished_at: Option<DateTime<Utc>>,
    pub attempt: Option<i32>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub read_only: Option<bool>,
    pub base_generation: Option<i64>,
    pub attempt_revoked: bool,
    pub attempt_finished: bool,
    /// Computed by the query with the database clock: the latest attempt is neither revoked
    /// nor finished and its lease has not expired.
    pub lease_live: bool,
    /// For a read-only run only (false for the others), by the same snapshot and clock:
    /// since it was registered a state-changing run of its state was registered, an attempt
    /// of one was admitted, was live or finished, or a generation was committed.
    pub state_changed_since_registered: bool,
}

/// The run and its latest attempt in one snapshot; None when the run does not exist.
pub async fn run_with_latest_attempt(
    conn: &mut PgConnection,
    run_id: Uuid,
) -> sqlx::Result<Option<RunWithAttempt>> {
    sqlx::query_as(
        "SELECT r.run_id, r.state_id, r.tenant_id, r.kind, r.environment, r.status,
            r.finished_at, a.attempt, a.lease_expires_at, a.read_only, a.base_generation,
            COALESCE(a.revoked_at IS NOT NULL, false) AS attempt_revoked,
            COALESCE(a.finished_at IS NOT NULL, false) AS attempt_finished,
            COALESCE(a.revoked_at IS NULL AND a.finished_at IS NULL
                AND a.lease_expires_at > now(), false) AS lease_live,
            CASE WHEN r.kind IN ('preview', 'drift') THEN
                EXISTS (
                    SELECT 1 FROM runs w
                    WHERE w.state_id = r.state_id AND w.kind IN ('plan', 'apply', 'destroy')
                      AND (w.created_at > r.created_at
                           OR ((w.finished_at IS NULL OR w.finished_at > r.created_at)
                               AND EXISTS (
                                   SELECT 1 FROM attempts wa
                                   WHERE wa.run_id = w.run_id
                                     AND (wa.created_at > r.created_at
                                          OR wa.finished_at > r.created_at
                                          OR (wa.finished_at IS NULL AND wa.revoked_at IS NULL
                                              AND wa.lease_expires_at > now())))))
                )
                OR COALESCE((
                    SELECT g.created_at > r.created_at FROM generations g
                    WHERE g.state_id = r.state_id ORDER BY g.generation DESC LIMIT 1
                ), false)
            ELSE false END AS state_changed_since_registered
         FROM runs r
         LEFT JOIN LATERAL (
            SELECT attempt, lease_expires_at, read_only, base_generation, revoked_at, finished_at
            FROM attempts WHERE run_id = r.run_id ORDER BY attempt DESC LIMIT 1
         ) a ON true
         WHERE r.run_id = $1",
    )
    .bind(run_id)
    .fetch_optional(conn)
    .await
}
