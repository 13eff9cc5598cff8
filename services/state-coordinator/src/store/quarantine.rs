//! The `quarantine` table: errored.tfstate files handed in by runners, sealed. One row per
//! (run, attempt, plaintext sha256): a re-sent file is stored once.
use sqlx::PgConnection;
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct NewQuarantine<'a> {
    pub quarantine_id: Uuid,
    pub state_id: Uuid,
    pub run_id: Uuid,
    pub attempt: i32,
    pub object_key: &'a str,
    pub object_version: &'a str,
    pub key_id: &'a str,
    pub wrapped_key: &'a [u8],
    pub nonce: &'a [u8],
    pub plaintext_sha256: &'a str,
}

/// The id of the entry already holding this file of this attempt, if any.
pub async fn quarantine_find(
    conn: &mut PgConnection,
    run_id: Uuid,
    attempt: i32,
    plaintext_sha256: &str,
) -> sqlx::Result<Option<Uuid>> {
    sqlx::query_scalar(
        "SELECT quarantine_id FROM quarantine
         WHERE run_id = $1 AND attempt = $2 AND plaintext_sha256 = $3",
    )
    .bind(run_id)
    .bind(attempt)
    .bind(plaintext_sha256)
    .fetch_optional(conn)
    .await
}

/// Inserts the entry unless the same file of the same attempt is already there; returns
/// the id that holds it (ours, or the one a concurrent re-send stored first) and whether it
/// is ours.
pub async fn quarantine_insert(
    conn: &mut PgConnection,
    q: &NewQuarantine<'_>,
) -> sqlx::Result<(Uuid, bool)> {
    let inserted: Option<Uuid> = sqlx::query_scalar(
        "INSERT INTO quarantine (quarantine_id, state_id, run_id, attempt, object_key,
            object_version, key_id, wrapped_key, nonce, plaintext_sha256)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)
         ON CONFLICT (run_id, attempt, plaintext_sha256) DO NOTHING
         RETURNING quarantine_id",
    )
    .bind(q.quarantine_id)
    .bind(q.state_id)
    .bind(q.run_id)
    .bind(q.attempt)
    .bind(q.object_key)
    .bind(q.object_version)
    .bind(q.key_id)
    .bind(q.wrapped_key)
    .bind(q.nonce)
    .bind(q.plaintext_sha256)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(id) = inserted {
        return Ok((id, true));
    }
    let existing = quarantine_find(conn, q.run_id, q.attempt, q.plaintext_sha256).await?;
    existing
        .map(|id| (id, false))
        .ok_or(sqlx::Error::RowNotFound)
}
