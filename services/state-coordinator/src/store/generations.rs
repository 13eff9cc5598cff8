//! The `generations` table: metadata of each committed state version.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct GenerationRow {
    pub state_id: Uuid,
    pub generation: i64,
    pub object_key: String,
    pub object_version: String,
    pub ciphertext_sha256: String,
    pub plaintext_sha256: String,
    pub size: i64,
    pub key_id: String,
    pub wrapped_key: Vec<u8>,
    pub nonce: Vec<u8>,
    pub tofu_serial: i64,
    pub lineage: String,
    pub run_id: Option<Uuid>,
    pub attempt: Option<i32>,
    pub is_final: bool,
    pub recovered_from: Option<i64>,
    pub created_at: DateTime<Utc>,
}

const COLS: &str = "state_id, generation, object_key, object_version, ciphertext_sha256,
    plaintext_sha256, size, key_id, wrapped_key, nonce, tofu_serial, lineage, run_id, attempt,
    is_final, recovered_from, created_at";

pub async fn generation_get(
    conn: &mut PgConnection,
    state_id: Uuid,
    generation: i64,
) -> sqlx::Result<Option<GenerationRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM generations WHERE state_id = $1 AND generation = $2"
    )))
    .bind(state_id)
    .bind(generation)
    .fetch_optional(conn)
    .await
}

pub async fn generation_list(
    conn: &mut PgConnection,
    state_id: Uuid,
) -> sqlx::Result<Vec<GenerationRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM generations WHERE state_id = $1 ORDER BY generation"
    )))
    .bind(state_id)
    .fetch_all(conn)
    .await
}

/// Everything needed to insert a generation.
#[derive(Debug, Clone)]
pub struct NewGeneration {
    pub state_id: Uuid,
    pub generation: i64,
    pub object_key: String,
    pub object_version: String,
    pub ciphertext_sha256: String,
    pub plaintext_sha256: String,
    pub size: i64,
    pub key_id: String,
    pub wrapped_key: Vec<u8>,
    pub nonce: Vec<u8>,
    pub tofu_serial: i64,
    pub lineage: String,
    pub run_id: Option<Uuid>,
    pub attempt: Option<i32>,
    pub is_final: bool,
    pub recovered_from: Option<i64>,
}

pub async fn generation_insert(conn: &mut PgConnection, g: &NewGeneration) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO generations (state_id, generation, object_key, object_version,
            ciphertext_sha256, plaintext_sha256, size, key_id, wrapped_key, nonce, tofu_serial,
            lineage, run_id, attempt, is_final, recovered_from)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16)",
    )
    .bind(g.state_id)
    .bind(g.generation)
    .bind(&g.object_key)
    .bind(&g.object_version)
    .bind(&g.ciphertext_sha256)
    .bind(&g.plaintext_sha256)
    .bind(g.size)
    .bind(&g.key_id)
    .bind(&g.wrapped_key)
    .bind(&g.nonce)
    .bind(g.tofu_serial)
    .bind(&g.lineage)
    .bind(g.run_id)
    .bind(g.attempt)
    .bind(g.is_final)
    .bind(g.recovered_from)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn generation_mark_final(
    conn: &mut PgConnection,
    state_id: Uuid,
    generation: i64,
) -> sqlx::Result<()> {
    sqlx::query("UPDATE generations SET is_final = true WHERE state_id = $1 AND generation = $2")
        .bind(state_id)
        .bind(generation)
        .execute(conn)
        .await?;
    Ok(())
}

/// Deletes intermediate generations of finished runs older than `min_age_secs`, never a
/// state's current generation; returns the objects to delete afterwards.
pub async fn generation_prune_intermediate(
    conn: &mut PgConnection,
    min_age_secs: f64,
    limit: i64,
) -> sqlx::Result<Vec<(String, String)>> {
    sqlx::query_as(
        "DELETE FROM generations g
         WHERE (g.state_id, g.generation) IN (
            SELECT g2.state_id, g2.generation FROM generations g2
            JOIN states s ON s.state_id = g2.state_id
            JOIN runs r ON r.run_id = g2.run_id
            WHERE NOT g2.is_final
              AND r.finished_at IS NOT NULL
              AND g2.generation <> s.current_generation
              AND g2.created_at < now() - make_interval(secs => $1)
            LIMIT $2)
         RETURNING g.object_key, g.object_version",
    )
    .bind(min_age_secs)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// Every object the database references (generations, pending, plans, masked plans,
/// quarantine).
pub async fn known_objects(conn: &mut PgConnection) -> sqlx::Result<Vec<(String, Option<String>)>> {
    sqlx::query_as(
        "SELECT object_key, object_version FROM generations
         UNION ALL SELECT object_key, NULL FROM pending_objects
         UNION ALL SELECT object_key, object_version FROM plans
         UNION ALL SELECT object_key, object_version FROM masked_plans
            WHERE object_key IS NOT NULL
         UNION ALL SELECT object_key, object_version FROM quarantine",
    )
    .fetch_all(conn)
    .await
}
