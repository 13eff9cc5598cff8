//! The `locks` table: at most one lock per state, owned by one attempt.
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct LockRow {
    pub state_id: Uuid,
    pub lock_id: String,
    pub attempt_id: Uuid,
    pub info: serde_json::Value,
}

/// Frees a lock whose attempt is revoked, finished or past its lease.
pub async fn lock_release_dead(conn: &mut PgConnection, state_id: Uuid) -> sqlx::Result<u64> {
    let done = sqlx::query(
        "DELETE FROM locks l USING attempts a
         WHERE l.state_id = $1 AND a.attempt_id = l.attempt_id
           AND (a.revoked_at IS NOT NULL OR a.finished_at IS NOT NULL
                OR a.lease_expires_at <= now())",
    )
    .bind(state_id)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Takes the lock if free; returns the holder (which is us when we got it).
pub async fn lock_acquire(
    conn: &mut PgConnection,
    state_id: Uuid,
    lock_id: &str,
    attempt_id: Uuid,
    info: &serde_json::Value,
) -> sqlx::Result<LockRow> {
    sqlx::query(
        "INSERT INTO locks (state_id, lock_id, attempt_id, info) VALUES ($1, $2, $3, $4)
         ON CONFLICT (state_id) DO NOTHING",
    )
    .bind(state_id)
    .bind(lock_id)
    .bind(attempt_id)
    .bind(info)
    .execute(&mut *conn)
    .await?;
    sqlx::query_as("SELECT state_id, lock_id, attempt_id, info FROM locks WHERE state_id = $1")
        .bind(state_id)
        .fetch_one(conn)
        .await
}

pub async fn lock_get(conn: &mut PgConnection, state_id: Uuid) -> sqlx::Result<Option<LockRow>> {
    sqlx::query_as("SELECT state_id, lock_id, attempt_id, info FROM locks WHERE state_id = $1")
        .bind(state_id)
        .fetch_optional(conn)
        .await
}

/// Deletes the lock if it is the one named; true when deleted.
pub async fn lock_release(
    conn: &mut PgConnection,
    state_id: Uuid,
    lock_id: &str,
    attempt_id: Option<Uuid>,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "DELETE FROM locks WHERE state_id = $1 AND lock_id = $2
           AND ($3::uuid IS NULL OR attempt_id = $3)",
    )
    .bind(state_id)
    .bind(lock_id)
    .bind(attempt_id)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn lock_release_by_attempt(
    conn: &mut PgConnection,
    attempt_id: Uuid,
) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM locks WHERE attempt_id = $1")
        .bind(attempt_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Drops the state's lock whoever holds it (a recovery fences live writers).
pub async fn lock_drop_state(conn: &mut PgConnection, state_id: Uuid) -> sqlx::Result<bool> {
    let done = sqlx::query("DELETE FROM locks WHERE state_id = $1")
        .bind(state_id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() == 1)
}
