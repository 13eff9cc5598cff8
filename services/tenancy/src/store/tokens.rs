//! The `api_tokens` table: only the SHA-256 of each secret is stored.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct TokenRow {
    pub token_id: Uuid,
    pub secret_sha256: Vec<u8>,
    pub name: String,
    pub tenant_id: Option<Uuid>,
    pub user_id: Option<Uuid>,
    pub service_account_id: Option<Uuid>,
    pub role: String,
    pub scopes: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

const COLS: &str = "token_id, secret_sha256, name, tenant_id, user_id, service_account_id, \
                    role, scopes, created_at, expires_at, revoked_at, last_used_at";

/// Who a new token belongs to.
#[derive(Debug, Clone, Copy)]
pub enum Owner {
    Member { tenant_id: Uuid, user_id: Uuid },
    Service { service_account_id: Uuid },
}

pub struct NewToken<'a> {
    pub token_id: Uuid,
    pub digest: &'a [u8],
    pub name: &'a str,
    pub owner: Owner,
    pub role: &'a str,
    pub scopes: &'a [String],
    pub expires_at: Option<DateTime<Utc>>,
}

pub async fn token_insert(conn: &mut PgConnection, t: &NewToken<'_>) -> sqlx::Result<TokenRow> {
    let (tenant_id, user_id, service_account_id) = match t.owner {
        Owner::Member { tenant_id, user_id } => (Some(tenant_id), Some(user_id), None),
        Owner::Service { service_account_id } => (None, None, Some(service_account_id)),
    };
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO api_tokens (token_id, secret_sha256, name, tenant_id, user_id,
                                 service_account_id, role, scopes, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {COLS}"
    )))
    .bind(t.token_id)
    .bind(t.digest)
    .bind(t.name)
    .bind(tenant_id)
    .bind(user_id)
    .bind(service_account_id)
    .bind(t.role)
    .bind(t.scopes)
    .bind(t.expires_at)
    .fetch_one(conn)
    .await
}

/// Any token by id (the exchange looks it up before knowing its tenant).
pub async fn token_get(conn: &mut PgConnection, token_id: Uuid) -> sqlx::Result<Option<TokenRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM api_tokens WHERE token_id = $1"
    )))
    .bind(token_id)
    .fetch_optional(conn)
    .await
}

pub async fn token_get_in_tenant(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    token_id: Uuid,
) -> sqlx::Result<Option<TokenRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM api_tokens WHERE tenant_id = $1 AND token_id = $2"
    )))
    .bind(tenant_id)
    .bind(token_id)
    .fetch_optional(conn)
    .await
}

/// A tenant's tokens (optionally one user's), ordered by id, after `after`.
pub async fn token_list(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    user_id: Option<Uuid>,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<TokenRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM api_tokens
         WHERE tenant_id = $1 AND ($2::uuid IS NULL OR user_id = $2)
           AND ($3::uuid IS NULL OR token_id > $3)
         ORDER BY token_id LIMIT $4"
    )))
    .bind(tenant_id)
    .bind(user_id)
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// Revokes a token of the tenant (idempotent: the first revocation time stays). The bool
/// is true only for the call whose statement revoked it: of concurrent revokes exactly one
/// sees the token live (the others wait for its row lock and then find it revoked), so
/// exactly one records the change.
pub async fn token_revoke(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    token_id: Uuid,
) -> sqlx::Result<Option<(TokenRow, bool)>> {
    let revoked: Option<TokenRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE api_tokens SET revoked_at = now()
         WHERE tenant_id = $1 AND token_id = $2 AND revoked_at IS NULL RETURNING {COLS}"
    )))
    .bind(tenant_id)
    .bind(token_id)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(row) = revoked {
        return Ok(Some((row, true)));
    }
    Ok(token_get_in_tenant(conn, tenant_id, token_id)
        .await?
        .map(|row| (row, false)))
}

/// Revokes every token a member holds in a tenant; returns how many were live.
pub async fn tokens_revoke_for_member(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
) -> sqlx::Result<u64> {
    let done = sqlx::query(
        "UPDATE api_tokens SET revoked_at = now()
         WHERE tenant_id = $1 AND user_id = $2 AND revoked_at IS NULL",
    )
    .bind(tenant_id)
    .bind(user_id)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Records a use of the token.
pub async fn token_touch(conn: &mut PgConnection, token_id: Uuid) -> sqlx::Result<()> {
    sqlx::query("UPDATE api_tokens SET last_used_at = now() WHERE token_id = $1")
        .bind(token_id)
        .execute(conn)
        .await?;
    Ok(())
}
