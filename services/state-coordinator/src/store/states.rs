//! The `states` table: ownership, the current-generation pointer and the fence.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct StateRow {
    pub state_id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub key: String,
    pub status: String,
    pub fence_reason: Option<String>,
    pub current_generation: i64,
    pub created_at: DateTime<Utc>,
}

impl StateRow {
    pub fn fenced(&self) -> bool {
        self.status == "recovery_required"
    }
}

pub(crate) const COLS: &str =
    "state_id, tenant_id, instance_id, key, status, fence_reason, current_generation, created_at";

/// Inserts the state unless its key exists; returns the row for the key and whether it was
/// created by this call.
pub async fn state_create(
    conn: &mut PgConnection,
    state_id: Uuid,
    tenant_id: Uuid,
    instance_id: Uuid,
    key: &str,
) -> sqlx::Result<(StateRow, bool)> {
    let inserted: Option<StateRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO states (state_id, tenant_id, instance_id, key) VALUES ($1, $2, $3, $4)
         ON CONFLICT (key) DO NOTHING RETURNING {COLS}"
    )))
    .bind(state_id)
    .bind(tenant_id)
    .bind(instance_id)
    .bind(key)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(row) = inserted {
        return Ok((row, true));
    }
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM states WHERE key = $1"
    )))
    .bind(key)
    .fetch_one(&mut *conn)
    .await?;
    Ok((row, false))
}

pub async fn state_get(conn: &mut PgConnection, state_id: Uuid) -> sqlx::Result<Option<StateRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM states WHERE state_id = $1"
    )))
    .bind(state_id)
    .fetch_optional(conn)
    .await
}

/// Same, holding a row lock until the transaction ends.
pub async fn state_get_for_update(
    conn: &mut PgConnection,
    state_id: Uuid,
) -> sqlx::Result<Option<StateRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM states WHERE state_id = $1 FOR UPDATE"
    )))
    .bind(state_id)
    .fetch_optional(conn)
    .await
}

/// Keyset pagination by (created_at, state_id) within a tenant.
pub async fn state_list(
    conn: &mut PgConnection,
    tenant_id: Option<Uuid>,
    instance_id: Option<Uuid>,
    fenced_only: bool,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<StateRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM states
         WHERE ($1::uuid IS NULL OR tenant_id = $1)
           AND ($2::uuid IS NULL OR instance_id = $2)
           AND (NOT $3 OR status = 'recovery_required')
           AND ($4::uuid IS NULL OR state_id > $4)
         ORDER BY state_id LIMIT $5"
    )))
    .bind(tenant_id)
    .bind(instance_id)
    .bind(fenced_only)
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// Compare-and-set of the current-generation pointer; false when another writer moved it,
/// or the state is fenced.
pub async fn state_advance(
    conn: &mut PgConnection,
    state_id: Uuid,
    expected: i64,
    next: i64,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "UPDATE states SET current_generation = $3
         WHERE state_id = $1 AND current_generation = $2 AND status = 'healthy'",
    )
    .bind(state_id)
    .bind(expected)
    .bind(next)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Sets the fence only if the state is still at the generation the reader saw, so a
/// reader that raced a commit never fences a healthy newer generation.
pub async fn state_fence(
    conn: &mut PgConnection,
    state_id: Uuid,
    seen_generation: i64,
    reason: &str,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "UPDATE states SET status = 'recovery_required', fence_reason = $3, fenced_at = now()
         WHERE state_id = $1 AND current_generation = $2 AND status = 'healthy'",
    )
    .bind(state_id)
    .bind(seen_generation)
    .bind(reason)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Clears the fence, optionally moving the pointer (rollback writes a new generation).
pub async fn state_clear_fence(
    conn: &mut PgConnection,
    state_id: Uuid,
    expected_generation: i64,
    new_generation: i64,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "UPDATE states SET status = 'healthy', fence_reason = NULL, fenced_at = NULL,
                current_generation = $3
         WHERE state_id = $1 AND current_generation = $2 AND status = 'recovery_required'",
    )
    .bind(state_id)
    .bind(expected_generation)
    .bind(new_generation)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn state_all_ids(conn: &mut PgConnection) -> sqlx::Result<Vec<StateRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM states ORDER BY state_id"
    )))
    .fetch_all(conn)
    .await
}
