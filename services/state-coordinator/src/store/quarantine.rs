//! The `quarantine` table: errored.tfstate files handed in by runners, sealed.
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

pub async fn quarantine_insert(conn: &mut PgConnection, q: &NewQuarantine<'_>) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO quarantine (quarantine_id, state_id, run_id, attempt, object_key,
            object_version, key_id, wrapped_key, nonce, plaintext_sha256)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
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
    .execute(conn)
    .await?;
    Ok(())
}
