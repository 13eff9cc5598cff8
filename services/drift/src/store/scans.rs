//! Scans (one per resource and slot) and the per-target bound on scans in flight, settled
//! by compare-and-set on `target_scans`.
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ScanRow {
    pub scan_id: Uuid,
    pub resource_id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub target_id: String,
    pub applied_run_id: Uuid,
    pub slot_at: DateTime<Utc>,
    pub deployments: i64,
    pub replica: String,
    pub status: String,
}

const SCAN_COLUMNS: &str = "scan_id, resource_id, tenant_id, instance_id, target_id, \
    applied_run_id, slot_at, deployments, replica, status";

/// Takes one of the target's `max` slots; false when all are taken.
pub async fn slot_take(
    conn: &mut PgConnection,
    target_id: &str,
    max: i32,
) -> Result<bool, sqlx::Error> {
    sqlx::query("INSERT INTO target_scans (target_id) VALUES ($1) ON CONFLICT DO NOTHING")
        .bind(target_id)
        .execute(&mut *conn)
        .await?;
    let taken = sqlx::query(
        "UPDATE target_scans SET in_flight = in_flight + 1 WHERE target_id = $1 AND in_flight < $2",
    )
    .bind(target_id)
    .bind(max)
    .execute(conn)
    .await?;
    Ok(taken.rows_affected() == 1)
}

/// Gives a slot back (call it in the transaction that ends the scan, once).
pub async fn slot_release(conn: &mut PgConnection, target_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE target_scans SET in_flight = in_flight - 1 WHERE target_id = $1 AND in_flight > 0",
    )
    .bind(target_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// A scan claimed for its slot; false when that slot of the resource was scanned already.
pub async fn scan_insert(conn: &mut PgConnection, s: &ScanRow) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO scans (scan_id, resource_id, tenant_id, instance_id, target_id, \
           applied_run_id, slot_at, deployments, replica, status) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'claimed') \
         ON CONFLICT (resource_id, slot_at) DO NOTHING",
    )
    .bind(s.scan_id)
    .bind(s.resource_id)
    .bind(s.tenant_id)
    .bind(s.instance_id)
    .bind(&s.target_id)
    .bind(s.applied_run_id)
    .bind(s.slot_at)
    .bind(s.deployments)
    .bind(&s.replica)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// claimed → requested; false when the scan ended meanwhile.
pub async fn scan_requested(conn: &mut PgConnection, scan_id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE scans SET status = 'requested', requested_at = now() \
         WHERE scan_id = $1 AND status = 'claimed'",
    )
    .bind(scan_id)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The open scan, not locked (a first look before asking a peer); `None` when unknown or
/// already ended.
pub async fn scan_open(
    conn: &mut PgConnection,
    scan_id: Uuid,
) -> Result<Option<ScanRow>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {SCAN_COLUMNS} FROM scans WHERE scan_id = $1 AND status IN ('claimed', 'requested')"
    )))
    .bind(scan_id)
    .fetch_optional(conn)
    .await
}

/// The open scan, locked; `None` when unknown or already ended.
pub async fn scan_open_lock(
    conn: &mut PgConnection,
    scan_id: Uuid,
) -> Result<Option<ScanRow>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {SCAN_COLUMNS} FROM scans \
         WHERE scan_id = $1 AND status IN ('claimed', 'requested') FOR UPDATE"
    )))
    .bind(scan_id)
    .fetch_optional(conn)
    .await
}

/// Ends an open scan with `status`; false when it had ended already.
pub async fn scan_end(
    conn: &mut PgConnection,
    scan_id: Uuid,
    status: &str,
    error_class: &str,
    message: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE scans SET status = $2, error_class = $3, message = $4, finished_at = now() \
         WHERE scan_id = $1 AND status IN ('claimed', 'requested')",
    )
    .bind(scan_id)
    .bind(status)
    .bind(error_class)
    .bind(message)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Open scans older than `older_than` seconds, locked (other replicas skip them).
pub async fn scans_stale(
    conn: &mut PgConnection,
    older_than_secs: f64,
    limit: i64,
) -> Result<Vec<ScanRow>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {SCAN_COLUMNS} FROM scans \
         WHERE status IN ('claimed', 'requested') \
           AND created_at < now() - make_interval(secs => $1) \
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED"
    )))
    .bind(older_than_secs)
    .bind(limit)
    .fetch_all(conn)
    .await
}
