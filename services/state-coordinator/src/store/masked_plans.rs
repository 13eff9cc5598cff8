//! The `masked_plans` table: the record of a saved plan that outlives it (its sha256, base
//! generation and the sealed masked plan JSON for review).
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

/// Where the sealed masked JSON lives and how to open it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedJson {
    pub object_key: String,
    pub object_version: String,
    pub key_id: String,
    pub wrapped_key: Vec<u8>,
    pub nonce: Vec<u8>,
    pub ciphertext_sha256: String,
    pub plaintext_sha256: String,
}

#[derive(Debug, Clone)]
pub struct MaskedPlanRow {
    pub plan_id: Uuid,
    pub run_id: Uuid,
    pub state_id: Uuid,
    pub plan_sha256: String,
    pub base_generation: i64,
    /// None when the runner sent no masked JSON.
    pub sealed: Option<SealedJson>,
    pub created_at: DateTime<Utc>,
}

#[derive(FromRow)]
struct Raw {
    plan_id: Uuid,
    run_id: Uuid,
    state_id: Uuid,
    plan_sha256: String,
    base_generation: i64,
    object_key: Option<String>,
    object_version: Option<String>,
    key_id: Option<String>,
    wrapped_key: Option<Vec<u8>>,
    nonce: Option<Vec<u8>>,
    ciphertext_sha256: Option<String>,
    plaintext_sha256: Option<String>,
    created_at: DateTime<Utc>,
}

impl From<Raw> for MaskedPlanRow {
    fn from(r: Raw) -> Self {
        // The table's CHECK keeps the sealed columns all set or all NULL.
        let sealed = match (
            r.object_key,
            r.object_version,
            r.key_id,
            r.wrapped_key,
            r.nonce,
            r.ciphertext_sha256,
            r.plaintext_sha256,
        ) {
            (
                Some(object_key),
                Some(object_version),
                Some(key_id),
                Some(wrapped_key),
                Some(nonce),
                Some(ciphertext_sha256),
                Some(plaintext_sha256),
            ) => Some(SealedJson {
                object_key,
                object_version,
                key_id,
                wrapped_key,
                nonce,
                ciphertext_sha256,
                plaintext_sha256,
            }),
            _ => None,
        };
        Self {
            plan_id: r.plan_id,
            run_id: r.run_id,
            state_id: r.state_id,
            plan_sha256: r.plan_sha256,
            base_generation: r.base_generation,
            sealed,
            created_at: r.created_at,
        }
    }
}

/// Records the plan of a plan run; false when that run already has a record.
pub async fn masked_plan_insert(
    conn: &mut PgConnection,
    plan_id: Uuid,
    run_id: Uuid,
    state_id: Uuid,
    plan_sha256: &str,
    base_generation: i64,
    sealed: Option<&SealedJson>,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "INSERT INTO masked_plans (plan_id, run_id, state_id, plan_sha256, base_generation,
            object_key, object_version, key_id, wrapped_key, nonce, ciphertext_sha256,
            plaintext_sha256)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)
         ON CONFLICT (run_id) DO NOTHING",
    )
    .bind(plan_id)
    .bind(run_id)
    .bind(state_id)
    .bind(plan_sha256)
    .bind(base_generation)
    .bind(sealed.map(|s| &s.object_key))
    .bind(sealed.map(|s| &s.object_version))
    .bind(sealed.map(|s| &s.key_id))
    .bind(sealed.map(|s| &s.wrapped_key))
    .bind(sealed.map(|s| &s.nonce))
    .bind(sealed.map(|s| &s.ciphertext_sha256))
    .bind(sealed.map(|s| &s.plaintext_sha256))
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The record of a plan run's plan, kept after the plan itself was deleted.
pub async fn masked_plan_by_run(
    conn: &mut PgConnection,
    run_id: Uuid,
) -> sqlx::Result<Option<MaskedPlanRow>> {
    let raw: Option<Raw> = sqlx::query_as(
        "SELECT plan_id, run_id, state_id, plan_sha256, base_generation, object_key,
            object_version, key_id, wrapped_key, nonce, ciphertext_sha256, plaintext_sha256,
            created_at
         FROM masked_plans WHERE run_id = $1",
    )
    .bind(run_id)
    .fetch_optional(conn)
    .await?;
    Ok(raw.map(MaskedPlanRow::from))
}
