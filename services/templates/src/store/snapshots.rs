//! The `snapshots` table: immutable ResolvedInfrastructure documents.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct SnapshotRow {
    pub snapshot_id: Uuid,
    pub tenant_id: Uuid,
    pub template_id: Uuid,
    pub template_number: i32,
    pub instance_id: Uuid,
    pub environment: String,
    pub hash: String,
    pub document: String,
    pub created_at: DateTime<Utc>,
}

const COLS: &str = "snapshot_id, tenant_id, template_id, template_number, instance_id, environment, hash, document, created_at";

/// What a new snapshot row holds.
pub struct NewSnapshot<'a> {
    pub snapshot_id: Uuid,
    pub tenant_id: Uuid,
    pub template_id: Uuid,
    pub template_number: i32,
    pub instance_id: Uuid,
    pub environment: &'a str,
    pub hash: &'a str,
    pub document: &'a str,
}

/// Inserts unless the tenant already has a snapshot with this hash; returns the row and
/// whether it was created.
pub async fn snapshot_insert(
    conn: &mut PgConnection,
    s: &NewSnapshot<'_>,
) -> sqlx::Result<(SnapshotRow, bool)> {
    let inserted: Option<SnapshotRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO snapshots (snapshot_id, tenant_id, template_id, template_number, instance_id, environment, hash, document)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (tenant_id, hash) DO NOTHING RETURNING {COLS}"
    )))
    .bind(s.snapshot_id)
    .bind(s.tenant_id)
    .bind(s.template_id)
    .bind(s.template_number)
    .bind(s.instance_id)
    .bind(s.environment)
    .bind(s.hash)
    .bind(s.document)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(row) = inserted {
        return Ok((row, true));
    }
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM snapshots WHERE tenant_id = $1 AND hash = $2"
    )))
    .bind(s.tenant_id)
    .bind(s.hash)
    .fetch_one(&mut *conn)
    .await?;
    Ok((row, false))
}

pub async fn snapshot_get(
    conn: &mut PgConnection,
    snapshot_id: Uuid,
) -> sqlx::Result<Option<SnapshotRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM snapshots WHERE snapshot_id = $1"
    )))
    .bind(snapshot_id)
    .fetch_optional(&mut *conn)
    .await
}
