//! The `pending_objects` table: step 1 of the write path, consumed by the commit.
use sqlx::PgConnection;
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct NewPending<'a> {
    pub pending_id: Uuid,
    pub state_id: Uuid,
    pub attempt_id: Option<Uuid>,
    pub target_generation: i64,
    pub object_key: &'a str,
}

/// The statement of [`pending_insert`] (one of the write path's hot statements).
pub const PENDING_INSERT_SQL: &str =
    "INSERT INTO pending_objects (pending_id, state_id, attempt_id, target_generation,
        object_key)
     VALUES ($1,$2,$3,$4,$5)";

pub async fn pending_insert(conn: &mut PgConnection, p: &NewPending<'_>) -> sqlx::Result<()> {
    sqlx::query(PENDING_INSERT_SQL)
        .bind(p.pending_id)
        .bind(p.state_id)
        .bind(p.attempt_id)
        .bind(p.target_generation)
        .bind(p.object_key)
        .execute(conn)
        .await?;
    Ok(())
}

/// Consumes the pending row; false when the sweeper already removed it.
pub async fn pending_consume(conn: &mut PgConnection, pending_id: Uuid) -> sqlx::Result<bool> {
    let done = sqlx::query("DELETE FROM pending_objects WHERE pending_id = $1")
        .bind(pending_id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes pending rows older than the TTL and returns their object keys; the caller then
/// deletes those objects (committed objects never have a pending row).
pub async fn pending_sweep(
    conn: &mut PgConnection,
    ttl_secs: f64,
    limit: i64,
) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "DELETE FROM pending_objects WHERE pending_id IN (
            SELECT pending_id FROM pending_objects
            WHERE created_at < now() - make_interval(secs => $1)
            ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING object_key",
    )
    .bind(ttl_secs)
    .bind(limit)
    .fetch_all(conn)
    .await
}
