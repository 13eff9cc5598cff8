//! The `tenants` table and the one-row `bootstrap` guard.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct TenantRow {
    pub tenant_id: Uuid,
    pub slug: String,
    pub display_name: String,
    pub created_at: DateTime<Utc>,
}

const COLS: &str = "tenant_id, slug, display_name, created_at";

/// Inserts a tenant; `None` when the slug is taken.
pub async fn tenant_insert(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    slug: &str,
    display_name: &str,
) -> sqlx::Result<Option<TenantRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO tenants (tenant_id, slug, display_name) VALUES ($1, $2, $3)
         ON CONFLICT (slug) DO NOTHING RETURNING {COLS}"
    )))
    .bind(tenant_id)
    .bind(slug)
    .bind(display_name)
    .fetch_optional(conn)
    .await
}

pub async fn tenant_get(
    conn: &mut PgConnection,
    tenant_id: Uuid,
) -> sqlx::Result<Option<TenantRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM tenants WHERE tenant_id = $1"
    )))
    .bind(tenant_id)
    .fetch_optional(conn)
    .await
}

pub async fn tenant_get_by_slug(
    conn: &mut PgConnection,
    slug: &str,
) -> sqlx::Result<Option<TenantRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM tenants WHERE slug = $1"
    )))
    .bind(slug)
    .fetch_optional(conn)
    .await
}

/// Tenants ordered by id, after `after`.
pub async fn tenant_list(
    conn: &mut PgConnection,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<TenantRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM tenants WHERE ($1::uuid IS NULL OR tenant_id > $1)
         ORDER BY tenant_id LIMIT $2"
    )))
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// Claims the one bootstrap row for `tenant_id`; `false` when bootstrap already ran.
pub async fn bootstrap_claim(conn: &mut PgConnection, tenant_id: Uuid) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "INSERT INTO bootstrap (singleton, tenant_id) VALUES (true, $1) ON CONFLICT DO NOTHING",
    )
    .bind(tenant_id)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether bootstrap ran or any tenant exists.
pub async fn bootstrap_done_or_not_empty(conn: &mut PgConnection) -> sqlx::Result<bool> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM bootstrap) OR EXISTS (SELECT 1 FROM tenants)")
        .fetch_one(conn)
        .await
}
