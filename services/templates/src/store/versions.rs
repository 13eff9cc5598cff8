//! The `template_versions` table: immutable, content-addressed documents.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

use crate::domain::VersionRef;

#[derive(Debug, Clone, FromRow)]
pub struct VersionRow {
    pub template_id: Uuid,
    pub tenant_id: Uuid,
    pub number: i32,
    pub content_hash: String,
    pub document: String,
    pub created_at: DateTime<Utc>,
}

const COLS: &str = "template_id, tenant_id, number, content_hash, document, created_at";

pub async fn version_by_hash(
    conn: &mut PgConnection,
    template_id: Uuid,
    content_hash: &str,
) -> sqlx::Result<Option<VersionRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM template_versions WHERE template_id = $1 AND content_hash = $2"
    )))
    .bind(template_id)
    .bind(content_hash)
    .fetch_optional(&mut *conn)
    .await
}

pub async fn version_get(
    conn: &mut PgConnection,
    template_id: Uuid,
    version: &VersionRef,
) -> sqlx::Result<Option<VersionRow>> {
    match version {
        VersionRef::Hash(h) => version_by_hash(conn, template_id, h).await,
        VersionRef::Number(n) => {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {COLS} FROM template_versions WHERE template_id = $1 AND number = $2"
            )))
            .bind(template_id)
            .bind(*n)
            .fetch_optional(&mut *conn)
            .await
        }
    }
}

/// Inserts the next version unless this content was published before (the unique
/// constraint on (template_id, content_hash) settles it); call with the template row
/// locked. Returns the row and whether it was created.
pub async fn version_publish(
    conn: &mut PgConnection,
    template_id: Uuid,
    tenant_id: Uuid,
    content_hash: &str,
    document: &str,
) -> sqlx::Result<(VersionRow, bool)> {
    let inserted: Option<VersionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO template_versions (template_id, tenant_id, number, content_hash, document)
         SELECT $1, $2, COALESCE(max(number), 0) + 1, $3, $4
           FROM template_versions WHERE template_id = $1
         ON CONFLICT (template_id, content_hash) DO NOTHING
         RETURNING {COLS}"
    )))
    .bind(template_id)
    .bind(tenant_id)
    .bind(content_hash)
    .bind(document)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(row) = inserted {
        return Ok((row, true));
    }
    let row = version_by_hash(conn, template_id, content_hash)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    Ok((row, false))
}

/// A page of versions (documents left empty), by number, after `after`.
pub async fn version_list(
    conn: &mut PgConnection,
    template_id: Uuid,
    after: i32,
    limit: i64,
) -> sqlx::Result<Vec<VersionRow>> {
    sqlx::query_as(
        "SELECT template_id, tenant_id, number, content_hash, '' AS document, created_at
           FROM template_versions WHERE template_id = $1 AND number > $2
          ORDER BY number LIMIT $3",
    )
    .bind(template_id)
    .bind(after)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await
}

/// How many versions a template has (tests check that refusals store nothing).
pub async fn version_count(conn: &mut PgConnection, template_id: Uuid) -> sqlx::Result<i64> {
    sqlx::query_scalar("SELECT count(*) FROM template_versions WHERE template_id = $1")
        .bind(template_id)
        .fetch_one(&mut *conn)
        .await
}
