//! The `users` and `memberships` tables.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct UserRow {
    pub user_id: Uuid,
    pub email: String,
    pub display_name: String,
    pub password_hash: Option<String>,
    pub platform_admin: bool,
}

/// A membership joined with its user.
#[derive(Debug, Clone, FromRow)]
pub struct MemberRow {
    pub tenant_id: Uuid,
    pub user_id: Uuid,
    pub email: String,
    pub display_name: String,
    pub role: String,
    pub created_at: DateTime<Utc>,
}

const USER_COLS: &str = "user_id, email, display_name, password_hash, platform_admin";
const MEMBER_COLS: &str = "m.tenant_id, m.user_id, u.email, u.display_name, m.role, m.created_at";

pub async fn user_get(conn: &mut PgConnection, user_id: Uuid) -> sqlx::Result<Option<UserRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {USER_COLS} FROM users WHERE user_id = $1"
    )))
    .bind(user_id)
    .fetch_optional(conn)
    .await
}

pub async fn user_get_by_email(
    conn: &mut PgConnection,
    email: &str,
) -> sqlx::Result<Option<UserRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {USER_COLS} FROM users WHERE email = $1"
    )))
    .bind(email)
    .fetch_optional(conn)
    .await
}

/// Inserts a user unless the email exists; returns the user of that email either way and
/// whether it was created now.
pub async fn user_insert_or_get(
    conn: &mut PgConnection,
    user_id: Uuid,
    email: &str,
    display_name: &str,
    password_hash: Option<&str>,
    platform_admin: bool,
) -> sqlx::Result<(UserRow, bool)> {
    let inserted: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO users (user_id, email, display_name, password_hash, platform_admin)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (email) DO NOTHING RETURNING {USER_COLS}"
    )))
    .bind(user_id)
    .bind(email)
    .bind(display_name)
    .bind(password_hash)
    .bind(platform_admin)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(row) = inserted {
        return Ok((row, true));
    }
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {USER_COLS} FROM users WHERE email = $1"
    )))
    .bind(email)
    .fetch_one(conn)
    .await?;
    Ok((row, false))
}

pub async fn user_set_password(
    conn: &mut PgConnection,
    user_id: Uuid,
    password_hash: &str,
) -> sqlx::Result<bool> {
    let done = sqlx::query("UPDATE users SET password_hash = $2 WHERE user_id = $1")
        .bind(user_id)
        .bind(password_hash)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn membership_get(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
) -> sqlx::Result<Option<MemberRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {MEMBER_COLS} FROM memberships m JOIN users u USING (user_id)
         WHERE m.tenant_id = $1 AND m.user_id = $2"
    )))
    .bind(tenant_id)
    .bind(user_id)
    .fetch_optional(conn)
    .await
}

/// Locks the membership row for a change.
pub async fn membership_get_for_update(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
) -> sqlx::Result<Option<MemberRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {MEMBER_COLS} FROM memberships m JOIN users u USING (user_id)
         WHERE m.tenant_id = $1 AND m.user_id = $2 FOR UPDATE OF m"
    )))
    .bind(tenant_id)
    .bind(user_id)
    .fetch_optional(conn)
    .await
}

/// Adds a membership; `false` when the user is already a member (nothing changes).
pub async fn membership_insert(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
    role: &str,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, $3)
         ON CONFLICT DO NOTHING",
    )
    .bind(tenant_id)
    .bind(user_id)
    .bind(role)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Members ordered by user id, after `after`.
pub async fn membership_list(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<MemberRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {MEMBER_COLS} FROM memberships m JOIN users u USING (user_id)
         WHERE m.tenant_id = $1 AND ($2::uuid IS NULL OR m.user_id > $2)
         ORDER BY m.user_id LIMIT $3"
    )))
    .bind(tenant_id)
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await
}

pub async fn membership_set_role(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
    role: &str,
) -> sqlx::Result<bool> {
    let done =
        sqlx::query("UPDATE memberships SET role = $3 WHERE tenant_id = $1 AND user_id = $2")
            .bind(tenant_id)
            .bind(user_id)
            .bind(role)
            .execute(conn)
            .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn membership_delete(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
) -> sqlx::Result<bool> {
    let done = sqlx::query("DELETE FROM memberships WHERE tenant_id = $1 AND user_id = $2")
        .bind(tenant_id)
        .bind(user_id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Locks the tenant's owner memberships and returns how many there are (serializes changes
/// that could remove the last owner).
pub async fn owners_lock_count(conn: &mut PgConnection, tenant_id: Uuid) -> sqlx::Result<usize> {
    let owners: Vec<Uuid> = sqlx::query_scalar(
        "SELECT user_id FROM memberships WHERE tenant_id = $1 AND role = 'owner' FOR UPDATE",
    )
    .bind(tenant_id)
    .fetch_all(conn)
    .await?;
    Ok(owners.len())
}
