//! Findings: one per new or changed drift of a resource, open until resolved.
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FindingRow {
    pub finding_id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub resource: String,
    pub scan_id: Uuid,
    pub fingerprint: String,
    pub summary: String,
    pub changes: serde_json::Value,
    pub status: String,
    pub detected_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
}

const FINDING_COLUMNS: &str = "finding_id, tenant_id, instance_id, resource, scan_id, \
    fingerprint, summary, changes, status, detected_at, resolved_at";

pub async fn finding_insert(conn: &mut PgConnection, f: &FindingRow) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO findings (finding_id, tenant_id, instance_id, resource, scan_id, \
           fingerprint, summary, changes, status) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'open')",
    )
    .bind(f.finding_id)
    .bind(f.tenant_id)
    .bind(f.instance_id)
    .bind(&f.resource)
    .bind(f.scan_id)
    .bind(&f.fingerprint)
    .bind(&f.summary)
    .bind(&f.changes)
    .execute(conn)
    .await?;
    Ok(())
}

/// Resolves the resource's open finding; returns its id when there was one.
pub async fn finding_resolve(
    conn: &mut PgConnection,
    instance_id: Uuid,
    resource: &str,
) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar(
        "UPDATE findings SET status = 'resolved', resolved_at = now() \
         WHERE instance_id = $1 AND resource = $2 AND status = 'open' RETURNING finding_id",
    )
    .bind(instance_id)
    .bind(resource)
    .fetch_optional(conn)
    .await
}

/// A page of a tenant's findings, newest first, after `before` (a finding id; ids are
/// time-ordered).
pub async fn findings_page(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Option<Uuid>,
    status: Option<&str>,
    before: Option<Uuid>,
    limit: i64,
) -> Result<Vec<FindingRow>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {FINDING_COLUMNS} FROM findings \
         WHERE tenant_id = $1 AND ($2::uuid IS NULL OR instance_id = $2) \
           AND ($3::text IS NULL OR status = $3) AND ($4::uuid IS NULL OR finding_id < $4) \
         ORDER BY finding_id DESC LIMIT $5"
    )))
    .bind(tenant_id)
    .bind(instance_id)
    .bind(status)
    .bind(before)
    .bind(limit)
    .fetch_all(conn)
    .await
}
