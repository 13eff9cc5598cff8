//! The projection fed by the events: instances (deployment counter, ignore rules, deleted
//! ones as tombstones), deployments in progress, tracked resources.
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// A tracked resource row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TrackedRow {
    pub resource_id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub resource: String,
    pub state_id: Uuid,
    pub applied_run_id: Uuid,
    pub target_id: String,
    pub environment: String,
    pub phase: i64,
    pub next_due_at: DateTime<Utc>,
    pub scan_id: Option<Uuid>,
    pub status: String,
    pub error_class: String,
    pub message: String,
    pub fingerprint: String,
    pub finding_id: Option<Uuid>,
    pub last_scan_at: Option<DateTime<Utc>>,
}

const TRACKED_COLUMNS: &str = "resource_id, tenant_id, instance_id, resource, state_id, \
    applied_run_id, target_id, environment, phase, next_due_at, scan_id, status, error_class, \
    message, fingerprint, finding_id, last_scan_at";

/// What a `resource.applied` event says.
#[derive(Debug, Clone)]
pub struct Applied {
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub resource: String,
    pub state_id: Uuid,
    pub applied_run_id: Uuid,
    pub target_id: String,
    pub environment: String,
}

/// Makes sure the instance has a row (of `tenant_id`); returns false when it belongs to
/// another tenant or was deleted (the event is then ignored).
pub async fn instance_ensure(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Uuid,
) -> Result<bool, sqlx::Error> {
    sqlx::query(
        "INSERT INTO instances (instance_id, tenant_id) VALUES ($1, $2) \
         ON CONFLICT (instance_id) DO NOTHING",
    )
    .bind(instance_id)
    .bind(tenant_id)
    .execute(&mut *conn)
    .await?;
    let (owner, deleted): (Uuid, bool) = sqlx::query_as(
        "SELECT tenant_id, deleted_at IS NOT NULL FROM instances WHERE instance_id = $1",
    )
    .bind(instance_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok(owner == tenant_id && !deleted)
}

/// Marks the instance deleted (a tombstone, written even when drift never heard of it) and
/// removes its tracked resources, findings, ignore rules and deployments; returns false
/// when it belongs to another tenant (nothing changed). Idempotent.
pub async fn instance_delete(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Uuid,
) -> Result<bool, sqlx::Error> {
    let ours = sqlx::query(
        "INSERT INTO instances (instance_id, tenant_id, deleted_at) VALUES ($1, $2, now()) \
         ON CONFLICT (instance_id) DO UPDATE \
           SET deleted_at = COALESCE(instances.deleted_at, now()), ignore_rules = '{}', \
               updated_at = now() \
           WHERE instances.tenant_id = $2",
    )
    .bind(instance_id)
    .bind(tenant_id)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1;
    if !ours {
        return Ok(false);
    }
    // Scans in flight stay open: their results find no tracked resource and are discarded.
    for sql in [
        "DELETE FROM tracked_resources WHERE instance_id = $1",
        "DELETE FROM findings WHERE instance_id = $1",
        "DELETE FROM deployments WHERE instance_id = $1",
    ] {
        sqlx::query(sql)
            .bind(instance_id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(true)
}

/// The instance's deployment counter and ignore rules, if drift knows it in `tenant_id`
/// (and it was not deleted).
pub async fn instance_get(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Uuid,
) -> Result<Option<(i64, Vec<String>)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT deployments, ignore_rules FROM instances \
         WHERE instance_id = $1 AND tenant_id = $2 AND deleted_at IS NULL",
    )
    .bind(instance_id)
    .bind(tenant_id)
    .fetch_optional(conn)
    .await
}

/// The deployment counter and whether a deployment is in progress (locks the instance row
/// so a concurrent event waits for the caller's transaction).
pub async fn instance_fence(
    conn: &mut PgConnection,
    instance_id: Uuid,
) -> Result<(i64, bool, Vec<String>), sqlx::Error> {
    let row: Option<(i64, Vec<String>)> = sqlx::query_as(
        "SELECT deployments, ignore_rules FROM instances WHERE instance_id = $1 FOR SHARE",
    )
    .bind(instance_id)
    .fetch_optional(&mut *conn)
    .await?;
    let (deployments, rules) = row.unwrap_or((0, Vec::new()));
    let in_progress: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM deployments WHERE instance_id = $1 AND ended_at IS NULL)",
    )
    .bind(instance_id)
    .fetch_one(conn)
    .await?;
    Ok((deployments, in_progress, rules))
}

pub async fn ignore_rules_set(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Uuid,
    rules: &[String],
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE instances SET ignore_rules = $3, updated_at = now() \
         WHERE instance_id = $1 AND tenant_id = $2 AND deleted_at IS NULL",
    )
    .bind(instance_id)
    .bind(tenant_id)
    .bind(rules)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Records a requested deployment; bumps the instance's counter once per deployment.
pub async fn deployment_requested(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    instance_id: Uuid,
) -> Result<(), sqlx::Error> {
    let fresh = sqlx::query(
        "INSERT INTO deployments (deployment_id, instance_id, requested_at) VALUES ($1, $2, now()) \
         ON CONFLICT (deployment_id) DO UPDATE SET requested_at = now() \
           WHERE deployments.requested_at IS NULL",
    )
    .bind(deployment_id)
    .bind(instance_id)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1;
    if fresh {
        sqlx::query(
            "UPDATE instances SET deployments = deployments + 1, updated_at = now() \
             WHERE instance_id = $1",
        )
        .bind(instance_id)
        .execute(conn)
        .await?;
    }
    Ok(())
}

/// Records a deployment's end (before or after its request was seen).
pub async fn deployment_ended(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    instance_id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO deployments (deployment_id, instance_id, ended_at) VALUES ($1, $2, now()) \
         ON CONFLICT (deployment_id) DO UPDATE SET ended_at = COALESCE(deployments.ended_at, now())",
    )
    .bind(deployment_id)
    .bind(instance_id)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn tracked_by_name(
    conn: &mut PgConnection,
    instance_id: Uuid,
    resource: &str,
) -> Result<Option<TrackedRow>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {TRACKED_COLUMNS} FROM tracked_resources \
         WHERE instance_id = $1 AND resource = $2 FOR UPDATE"
    )))
    .bind(instance_id)
    .bind(resource)
    .fetch_optional(conn)
    .await
}

pub async fn tracked_lock(
    conn: &mut PgConnection,
    resource_id: Uuid,
) -> Result<Option<TrackedRow>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {TRACKED_COLUMNS} FROM tracked_resources WHERE resource_id = $1 FOR UPDATE"
    )))
    .bind(resource_id)
    .fetch_optional(conn)
    .await
}

pub async fn tracked_insert(
    conn: &mut PgConnection,
    resource_id: Uuid,
    a: &Applied,
    phase: i64,
    next_due_at: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO tracked_resources (resource_id, tenant_id, instance_id, resource, state_id, \
           applied_run_id, target_id, environment, phase, next_due_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(resource_id)
    .bind(a.tenant_id)
    .bind(a.instance_id)
    .bind(&a.resource)
    .bind(a.state_id)
    .bind(a.applied_run_id)
    .bind(&a.target_id)
    .bind(&a.environment)
    .bind(phase)
    .bind(next_due_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// A new apply of a tracked resource: its config, and `status` (a drifted or failed one
/// is in sync again; one never scanned stays unknown).
pub async fn tracked_applied(
    conn: &mut PgConnection,
    resource_id: Uuid,
    a: &Applied,
    status: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE tracked_resources SET state_id = $2, applied_run_id = $3, target_id = $4, \
           environment = $5, status = $6, error_class = '', message = '', fingerprint = '', \
           finding_id = NULL, applied_at = now() \
         WHERE resource_id = $1",
    )
    .bind(resource_id)
    .bind(a.state_id)
    .bind(a.applied_run_id)
    .bind(&a.target_id)
    .bind(&a.environment)
    .bind(status)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn tracked_delete(conn: &mut PgConnection, resource_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM tracked_resources WHERE resource_id = $1")
        .bind(resource_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// The outcome of a counted scan on its resource.
#[derive(Debug, Clone)]
pub struct ScanOutcome<'a> {
    pub status: &'a str,
    pub error_class: &'a str,
    pub message: &'a str,
    pub fingerprint: &'a str,
    pub finding_id: Option<Uuid>,
}

pub async fn tracked_scanned(
    conn: &mut PgConnection,
    resource_id: Uuid,
    o: &ScanOutcome<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE tracked_resources SET scan_id = NULL, status = $2, error_class = $3, message = $4, \
           fingerprint = $5, finding_id = $6, last_scan_at = now() \
         WHERE resource_id = $1",
    )
    .bind(resource_id)
    .bind(o.status)
    .bind(o.error_class)
    .bind(o.message)
    .bind(o.fingerprint)
    .bind(o.finding_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether the resource is still tracked.
pub async fn tracked_exists(
    conn: &mut PgConnection,
    resource_id: Uuid,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM tracked_resources WHERE resource_id = $1)")
        .bind(resource_id)
        .fetch_one(conn)
        .await
}

/// Clears the scan in flight of a resource (its scan ended without a verdict).
pub async fn tracked_scan_clear(
    conn: &mut PgConnection,
    resource_id: Uuid,
    scan_id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE tracked_resources SET scan_id = NULL WHERE resource_id = $1 AND scan_id = $2",
    )
    .bind(resource_id)
    .bind(scan_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Makes a resource due again by `at` (sooner if it already is) and clears its scan, when
/// `scan_id` is still its scan in flight.
pub async fn tracked_retry(
    conn: &mut PgConnection,
    resource_id: Uuid,
    scan_id: Uuid,
    at: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE tracked_resources SET next_due_at = LEAST(next_due_at, $3), scan_id = NULL \
         WHERE resource_id = $1 AND scan_id = $2",
    )
    .bind(resource_id)
    .bind(scan_id)
    .bind(at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Resources of an instance, by name.
pub async fn tracked_of_instance(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Uuid,
) -> Result<Vec<TrackedRow>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {TRACKED_COLUMNS} FROM tracked_resources \
         WHERE tenant_id = $1 AND instance_id = $2 ORDER BY resource"
    )))
    .bind(tenant_id)
    .bind(instance_id)
    .fetch_all(conn)
    .await
}

/// Makes an instance's resources (or one) due now unless a scan is in flight; returns how
/// many.
pub async fn tracked_due_now(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Uuid,
    resource: Option<&str>,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE tracked_resources SET next_due_at = now() \
         WHERE tenant_id = $1 AND instance_id = $2 AND ($3::text IS NULL OR resource = $3) \
           AND scan_id IS NULL",
    )
    .bind(tenant_id)
    .bind(instance_id)
    .bind(resource)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// The statement of [`tracked_due`] (`$1` the time, `$2` the limit), also for its plan.
pub fn tracked_due_sql() -> String {
    format!(
        "SELECT {TRACKED_COLUMNS} FROM tracked_resources \
         WHERE scan_id IS NULL AND next_due_at <= $1 \
         ORDER BY next_due_at LIMIT $2 FOR UPDATE SKIP LOCKED"
    )
}

/// Resources due by `now` without a scan in flight, oldest due first, locked for this
/// transaction (other replicas skip them): the index on `next_due_at` makes this O(due).
pub async fn tracked_due(
    conn: &mut PgConnection,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<TrackedRow>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(tracked_due_sql()))
        .bind(now)
        .bind(limit)
        .fetch_all(conn)
        .await
}

pub async fn tracked_reschedule(
    conn: &mut PgConnection,
    resource_id: Uuid,
    next_due_at: DateTime<Utc>,
    scan_id: Option<Uuid>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE tracked_resources SET next_due_at = $2, scan_id = $3 WHERE resource_id = $1",
    )
    .bind(resource_id)
    .bind(next_due_at)
    .bind(scan_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Resources parked at `never` (tracked while the schedule was off), a batch at a time.
pub async fn tracked_parked(
    conn: &mut PgConnection,
    never: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<(Uuid, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT resource_id, phase FROM tracked_resources \
         WHERE scan_id IS NULL AND next_due_at >= $1 LIMIT $2 FOR UPDATE SKIP LOCKED",
    )
    .bind(never)
    .bind(limit)
    .fetch_all(conn)
    .await
}
