//! The `plans` table: saved plans with their tags, leased to one apply attempt.
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct PlanRow {
    pub plan_id: Uuid,
    pub run_id: Uuid,
    pub state_id: Uuid,
    pub object_key: String,
    pub object_version: String,
    pub key_id: String,
    pub wrapped_key: Vec<u8>,
    pub nonce: Vec<u8>,
    pub ciphertext_sha256: String,
    pub config_hash: String,
    pub base_generation: i64,
    pub tofu_version: String,
    pub provider_lock_hash: String,
    pub module_library_hash: String,
    pub provider_lock_file: Vec<u8>,
}

const COLS: &str = "plan_id, run_id, state_id, object_key, object_version, key_id, wrapped_key,
    nonce, ciphertext_sha256, config_hash, base_generation, tofu_version, provider_lock_hash,
    module_library_hash, provider_lock_file";

/// What `plan_insert` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanInsert {
    Inserted,
    /// The plan run already stored its plan.
    AlreadyStored,
    /// The attempt is no longer live (revoked, finished or expired).
    AttemptDead,
}

/// The one liveness test of an attempt inside a statement; `FOR SHARE` makes a concurrent
/// revoke or finish of that attempt wait for (or be seen by) the statement.
const LIVE_ATTEMPT: &str = "EXISTS (SELECT 1 FROM attempts a WHERE a.attempt_id = $ATTEMPT
      AND a.revoked_at IS NULL AND a.finished_at IS NULL AND a.lease_expires_at > now()
      FOR SHARE)";

/// Stores the plan of a plan run, in the statement that checks `attempt_id` is live.
pub async fn plan_insert(
    conn: &mut PgConnection,
    p: &PlanRow,
    ttl_secs: f64,
    attempt_id: Uuid,
) -> sqlx::Result<PlanInsert> {
    let done = sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO plans (plan_id, run_id, state_id, object_key, object_version, key_id,
            wrapped_key, nonce, ciphertext_sha256, config_hash, base_generation, tofu_version,
            provider_lock_hash, module_library_hash, provider_lock_file, expires_at)
         SELECT $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,
                now() + make_interval(secs => $16)
         WHERE {}
         ON CONFLICT (run_id) DO NOTHING",
        LIVE_ATTEMPT.replace("$ATTEMPT", "$17")
    )))
    .bind(p.plan_id)
    .bind(p.run_id)
    .bind(p.state_id)
    .bind(&p.object_key)
    .bind(&p.object_version)
    .bind(&p.key_id)
    .bind(&p.wrapped_key)
    .bind(&p.nonce)
    .bind(&p.ciphertext_sha256)
    .bind(&p.config_hash)
    .bind(p.base_generation)
    .bind(&p.tofu_version)
    .bind(&p.provider_lock_hash)
    .bind(&p.module_library_hash)
    .bind(&p.provider_lock_file)
    .bind(ttl_secs)
    .bind(attempt_id)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 1 {
        return Ok(PlanInsert::Inserted);
    }
    let stored: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM plans WHERE run_id = $1)")
        .bind(p.run_id)
        .fetch_one(conn)
        .await?;
    Ok(if stored {
        PlanInsert::AlreadyStored
    } else {
        PlanInsert::AttemptDead
    })
}

pub async fn plan_by_run(conn: &mut PgConnection, run_id: Uuid) -> sqlx::Result<Option<PlanRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM plans WHERE run_id = $1 AND expires_at > now()"
    )))
    .bind(run_id)
    .fetch_optional(conn)
    .await
}

/// Leases the plan to an attempt unless another live attempt holds it, in the statement
/// that checks `attempt_id` itself is live.
pub async fn plan_lease(
    conn: &mut PgConnection,
    plan_run_id: Uuid,
    attempt_id: Uuid,
) -> sqlx::Result<Option<PlanRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE plans p SET leased_to_attempt = $2
         WHERE p.run_id = $1 AND p.expires_at > now()
           AND {}
           AND (p.leased_to_attempt IS NULL OR p.leased_to_attempt = $2 OR NOT EXISTS (
                SELECT 1 FROM attempts a WHERE a.attempt_id = p.leased_to_attempt
                  AND a.revoked_at IS NULL AND a.finished_at IS NULL
                  AND a.lease_expires_at > now()))
         RETURNING {COLS}",
        LIVE_ATTEMPT.replace("$ATTEMPT", "$2")
    )))
    .bind(plan_run_id)
    .bind(attempt_id)
    .fetch_optional(conn)
    .await
}

/// Deletes the plans leased to an attempt (at its finish); returns their objects.
pub async fn plan_delete_leased(
    conn: &mut PgConnection,
    attempt_id: Uuid,
) -> sqlx::Result<Vec<(String, String)>> {
    sqlx::query_as(
        "DELETE FROM plans WHERE leased_to_attempt = $1 RETURNING object_key, object_version",
    )
    .bind(attempt_id)
    .fetch_all(conn)
    .await
}

/// Deletes expired plans; returns their objects.
pub async fn plan_delete_expired(
    conn: &mut PgConnection,
    limit: i64,
) -> sqlx::Result<Vec<(String, String)>> {
    sqlx::query_as(
        "DELETE FROM plans WHERE plan_id IN (
            SELECT plan_id FROM plans WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING object_key, object_version",
    )
    .bind(limit)
    .fetch_all(conn)
    .await
}
