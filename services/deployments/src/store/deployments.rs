//! The `deployments` and `approvals` tables.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct DeploymentRow {
    pub deployment_id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub kind: String,
    pub status: String,
    pub requested_by: String,
    pub instance_name: String,
    pub target_id: Uuid,
    pub environment: String,
    pub template_id: Uuid,
    pub template_version: i32,
    pub snapshot_id: Option<Uuid>,
    pub previous_snapshot_id: Option<Uuid>,
    pub instance_status_before: String,
    pub plan_set_hash: String,
    pub summary: String,
    pub idempotency_key: Option<String>,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub awaiting_since: Option<DateTime<Utc>>,
    pub cancel_requested_at: Option<DateTime<Utc>>,
    pub cancel_reason: String,
}

const COLS: &str = "deployment_id, tenant_id, instance_id, kind, status, requested_by, \
    instance_name, target_id, environment, template_id, template_version, snapshot_id, \
    previous_snapshot_id, instance_status_before, plan_set_hash, summary, idempotency_key, \
    created_at, finished_at, awaiting_since, cancel_requested_at, cancel_reason";

#[derive(Debug, Clone, FromRow)]
pub struct ApprovalRow {
    pub decision: String,
    pub decided_by: String,
    pub plan_set_hash: String,
    pub comment: String,
    pub decided_at: DateTime<Utc>,
}

/// What a new deployment row holds.
pub struct NewDeployment<'a> {
    pub deployment_id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub kind: &'a str,
    pub requested_by: &'a str,
    pub instance_name: &'a str,
    pub target_id: Uuid,
    pub environment: &'a str,
    pub template_id: Uuid,
    pub template_version: i32,
    pub parameters: serde_json::Value,
    pub snapshot_id: Option<Uuid>,
    pub previous_snapshot_id: Option<Uuid>,
    pub instance_status_before: &'a str,
    pub idempotency_key: Option<&'a str>,
}

/// Inserts a queued deployment; `None` when the instance already has one with this
/// idempotency key (the unique constraint decides).
pub async fn deployment_insert(
    conn: &mut PgConnection,
    d: &NewDeployment<'_>,
) -> sqlx::Result<Option<DeploymentRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO deployments (deployment_id, tenant_id, instance_id, kind, status,
             requested_by, instance_name, target_id, environment, template_id, template_version,
             parameters, snapshot_id, previous_snapshot_id, instance_status_before, idempotency_key)
         VALUES ($1, $2, $3, $4, 'queued', $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
         ON CONFLICT (instance_id, idempotency_key) DO NOTHING RETURNING {COLS}"
    )))
    .bind(d.deployment_id)
    .bind(d.tenant_id)
    .bind(d.instance_id)
    .bind(d.kind)
    .bind(d.requested_by)
    .bind(d.instance_name)
    .bind(d.target_id)
    .bind(d.environment)
    .bind(d.template_id)
    .bind(d.template_version)
    .bind(&d.parameters)
    .bind(d.snapshot_id)
    .bind(d.previous_snapshot_id)
    .bind(d.instance_status_before)
    .bind(d.idempotency_key)
    .fetch_optional(conn)
    .await
}

/// The instance's deployment with this idempotency key.
pub async fn deployment_by_key(
    conn: &mut PgConnection,
    instance_id: Uuid,
    key: &str,
) -> sqlx::Result<Option<DeploymentRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM deployments WHERE instance_id = $1 AND idempotency_key = $2"
    )))
    .bind(instance_id)
    .bind(key)
    .fetch_optional(conn)
    .await
}

/// The tenant's deployment.
pub async fn deployment_get(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    deployment_id: Uuid,
) -> sqlx::Result<Option<DeploymentRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM deployments WHERE tenant_id = $1 AND deployment_id = $2"
    )))
    .bind(tenant_id)
    .bind(deployment_id)
    .fetch_optional(conn)
    .await
}

/// A page of the tenant's deployments (of one instance if given), newest first, before
/// `before`.
pub async fn deployment_list(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Option<Uuid>,
    before: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<DeploymentRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM deployments
          WHERE tenant_id = $1 AND ($2::uuid IS NULL OR instance_id = $2)
            AND ($3::uuid IS NULL OR deployment_id < $3)
          ORDER BY deployment_id DESC LIMIT $4"
    )))
    .bind(tenant_id)
    .bind(instance_id)
    .bind(before)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// Moves the deployment to `to` (terminal: `finished_at` is set) if it is in one of
/// `from` (compare-and-set); `None` when it is not.
pub async fn deployment_finish(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    from: &[&str],
    to: &str,
    summary: &str,
) -> sqlx::Result<Option<DeploymentRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE deployments
            SET status = $3, summary = $4, finished_at = now(), updated_at = now()
          WHERE deployment_id = $1 AND status = ANY($2)
         RETURNING {COLS}"
    )))
    .bind(deployment_id)
    .bind(from)
    .bind(to)
    .bind(summary)
    .fetch_optional(conn)
    .await
}

/// The decisions on a deployment, in order.
pub async fn approvals_of(
    conn: &mut PgConnection,
    deployment_id: Uuid,
) -> sqlx::Result<Vec<ApprovalRow>> {
    sqlx::query_as(
        "SELECT decision, decided_by, plan_set_hash, comment, decided_at
           FROM approvals WHERE deployment_id = $1 ORDER BY seq",
    )
    .bind(deployment_id)
    .fetch_all(conn)
    .await
}

/// A deployment by id (the worker's read; no tenant check).
pub async fn deployment_by_id(
    conn: &mut PgConnection,
    deployment_id: Uuid,
) -> sqlx::Result<Option<DeploymentRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM deployments WHERE deployment_id = $1"
    )))
    .bind(deployment_id)
    .fetch_optional(conn)
    .await
}

/// Moves the deployment between non-terminal statuses (compare-and-set on `from`): to
/// `running` (its start time set once), to `awaiting_approval` (the plan-set hash and the
/// time it started waiting set), or back to `queued`. `None` when it was not in `from`.
pub async fn deployment_move(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    from: &[&str],
    to: &str,
    plan_set_hash: Option<&str>,
) -> sqlx::Result<Option<DeploymentRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE deployments
            SET status = $3, plan_set_hash = COALESCE($4, plan_set_hash), updated_at = now(),
                started_at = CASE WHEN $3 = 'running' THEN COALESCE(started_at, now()) ELSE started_at END,
                awaiting_since = CASE WHEN $3 = 'awaiting_approval' THEN now() ELSE NULL END
          WHERE deployment_id = $1 AND status = ANY($2)
         RETURNING {COLS}"
    )))
    .bind(deployment_id)
    .bind(from)
    .bind(to)
    .bind(plan_set_hash)
    .fetch_optional(conn)
    .await
}

/// Sets the plan-set hash of a running deployment.
pub async fn deployment_set_hash(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    plan_set_hash: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE deployments SET plan_set_hash = $2, updated_at = now() WHERE deployment_id = $1",
    )
    .bind(deployment_id)
    .bind(plan_set_hash)
    .execute(conn)
    .await?;
    Ok(())
}

/// Asks the workflow to cancel an active deployment (kept once set); `None` when it is not
/// active.
pub async fn deployment_request_cancel(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    reason: &str,
) -> sqlx::Result<Option<DeploymentRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE deployments
            SET cancel_requested_at = COALESCE(cancel_requested_at, now()),
                cancel_reason = CASE WHEN cancel_requested_at IS NULL THEN $2 ELSE cancel_reason END,
                updated_at = now()
          WHERE deployment_id = $1 AND status IN ('queued', 'running', 'awaiting_approval')
         RETURNING {COLS}"
    )))
    .bind(deployment_id)
    .bind(reason)
    .fetch_optional(conn)
    .await
}

/// Records a decision on the deployment (the next sequence number).
pub async fn approval_insert(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    decision: &str,
    decided_by: &str,
    plan_set_hash: &str,
    comment: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO approvals (deployment_id, seq, decision, decided_by, plan_set_hash, comment)
         SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, $4, $5 FROM approvals WHERE deployment_id = $1",
    )
    .bind(deployment_id)
    .bind(decision)
    .bind(decided_by)
    .bind(plan_set_hash)
    .bind(comment)
    .execute(conn)
    .await?;
    Ok(())
}

/// How many non-preview deployments are queued, running or awaiting approval, by status
/// (the partial index of active deployments answers it).
pub async fn deployments_active_counts(
    conn: &mut PgConnection,
) -> sqlx::Result<Vec<(String, i64)>> {
    sqlx::query_as(
        "SELECT status, count(*) FROM deployments
          WHERE kind <> 'preview' AND status IN ('queued', 'running', 'awaiting_approval')
          GROUP BY status",
    )
    .fetch_all(conn)
    .await
}

/// Deployments awaiting approval for longer than `ttl_secs`.
pub async fn deployments_expired(
    conn: &mut PgConnection,
    ttl_secs: f64,
) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar(
        "SELECT deployment_id FROM deployments
          WHERE status = 'awaiting_approval'
            AND awaiting_since < now() - make_interval(secs => $1)
          ORDER BY awaiting_since LIMIT 100",
    )
    .bind(ttl_secs)
    .fetch_all(conn)
    .await
}
