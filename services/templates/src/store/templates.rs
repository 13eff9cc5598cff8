//! The `templates` table: one template per (tenant, name).
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct TemplateRow {
    pub template_id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    pub description: String,
    pub created_at: DateTime<Utc>,
    /// Highest version number; 0 without versions.
    pub latest_version: i32,
}

const SELECT: &str = "SELECT t.template_id, t.tenant_id, t.name, t.description, t.created_at,
        COALESCE((SELECT max(v.number) FROM template_versions v WHERE v.template_id = t.template_id), 0) AS latest_version
   FROM templates t";

/// Inserts unless the tenant has a template of that name; returns the row and whether it
/// was created by this call.
pub async fn template_create(
    conn: &mut PgConnection,
    template_id: Uuid,
    tenant_id: Uuid,
    name: &str,
    description: &str,
) -> sqlx::Result<(TemplateRow, bool)> {
    let inserted = sqlx::query(
        "INSERT INTO templates (template_id, tenant_id, name, description) VALUES ($1, $2, $3, $4)
         ON CONFLICT (tenant_id, name) DO NOTHING",
    )
    .bind(template_id)
    .bind(tenant_id)
    .bind(name)
    .bind(description)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1;
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{SELECT} WHERE t.tenant_id = $1 AND t.name = $2"
    )))
    .bind(tenant_id)
    .bind(name)
    .fetch_one(&mut *conn)
    .await?;
    Ok((row, inserted))
}

pub async fn template_get(
    conn: &mut PgConnection,
    template_id: Uuid,
) -> sqlx::Result<Option<TemplateRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{SELECT} WHERE t.template_id = $1"
    )))
    .bind(template_id)
    .fetch_optional(&mut *conn)
    .await
}

/// A tenant's template by name (names are unique per tenant).
pub async fn template_get_by_name(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    name: &str,
) -> sqlx::Result<Option<TemplateRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{SELECT} WHERE t.tenant_id = $1 AND t.name = $2"
    )))
    .bind(tenant_id)
    .bind(name)
    .fetch_optional(&mut *conn)
    .await
}

/// Locks the template row so concurrent publishes number their versions one at a time.
pub async fn template_lock(conn: &mut PgConnection, template_id: Uuid) -> sqlx::Result<bool> {
    Ok(
        sqlx::query("SELECT 1 FROM templates WHERE template_id = $1 FOR UPDATE")
            .bind(template_id)
            .fetch_optional(&mut *conn)
            .await?
            .is_some(),
    )
}

/// A page of a tenant's templates, by id, after `after`.
pub async fn template_list(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<TemplateRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{SELECT} WHERE t.tenant_id = $1 AND ($2::uuid IS NULL OR t.template_id > $2)
         ORDER BY t.template_id LIMIT $3"
    )))
    .bind(tenant_id)
    .bind(after)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await
}
