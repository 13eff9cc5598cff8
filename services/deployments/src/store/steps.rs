//! The `steps` table: every step of a deployment, created with it.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

use crate::domain::NewStep;

#[derive(Debug, Clone, FromRow)]
pub struct StepRow {
    pub step_id: Uuid,
    pub deployment_id: Uuid,
    pub position: i32,
    pub kind: String,
    pub resource: String,
    pub depends_on: Vec<String>,
    pub status: String,
    pub reason: String,
    pub run_id: Option<Uuid>,
    pub tries: i32,
    pub error_class: String,
    pub plan_add: Option<i32>,
    pub plan_change: Option<i32>,
    pub plan_destroy: Option<i32>,
    pub plan_replaced: Option<Vec<String>>,
    pub plan_risk: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

const COLS: &str = "step_id, deployment_id, position, kind, resource, depends_on, status, reason, \
    run_id, tries, error_class, plan_add, plan_change, plan_destroy, plan_replaced, plan_risk, \
    started_at, finished_at";

/// Inserts a deployment's steps in order (positions 1, 2, …); finished ones (the resolve
/// step) get their start and finish times now.
pub async fn steps_insert(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    steps: &[NewStep],
) -> sqlx::Result<()> {
    let mut ids = Vec::with_capacity(steps.len());
    let mut positions = Vec::with_capacity(steps.len());
    let mut kinds = Vec::with_capacity(steps.len());
    let mut resources = Vec::with_capacity(steps.len());
    let mut depends = Vec::with_capacity(steps.len());
    let mut statuses = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        ids.push(Uuid::now_v7());
        positions.push(i32::try_from(i + 1).unwrap_or(i32::MAX));
        kinds.push(s.kind.as_str());
        resources.push(s.resource.as_str());
        // One text per step (arrays of arrays must be rectangular in PostgreSQL).
        depends.push(serde_json::Value::from(s.depends_on.clone()));
        statuses.push(s.status.as_str());
    }
    sqlx::query(
        "INSERT INTO steps (step_id, deployment_id, position, kind, resource, depends_on, status,
                            started_at, finished_at)
         SELECT u.step_id, $1, u.position, u.kind, u.resource,
                ARRAY(SELECT jsonb_array_elements_text(u.depends_on)), u.status,
                CASE WHEN u.status = 'succeeded' THEN now() END,
                CASE WHEN u.status = 'succeeded' THEN now() END
           FROM unnest($2::uuid[], $3::int[], $4::text[], $5::text[], $6::jsonb[], $7::text[])
                AS u(step_id, position, kind, resource, depends_on, status)",
    )
    .bind(deployment_id)
    .bind(&ids)
    .bind(&positions)
    .bind(&kinds)
    .bind(&resources)
    .bind(&depends)
    .bind(&statuses)
    .execute(conn)
    .await?;
    Ok(())
}

/// A deployment's steps in order.
pub async fn steps_of(conn: &mut PgConnection, deployment_id: Uuid) -> sqlx::Result<Vec<StepRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM steps WHERE deployment_id = $1 ORDER BY position"
    )))
    .bind(deployment_id)
    .fetch_all(conn)
    .await
}

/// One step as it is now.
pub async fn step_get(conn: &mut PgConnection, step_id: Uuid) -> sqlx::Result<Option<StepRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM steps WHERE step_id = $1"
    )))
    .bind(step_id)
    .fetch_optional(conn)
    .await
}

/// The deployment's first step (by position) of one of `kinds` for `resource`.
pub async fn step_of_resource(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    resource: &str,
    kinds: &[&str],
) -> sqlx::Result<Option<StepRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM steps
          WHERE deployment_id = $1 AND resource = $2 AND kind = ANY($3)
          ORDER BY position LIMIT 1"
    )))
    .bind(deployment_id)
    .bind(resource)
    .bind(kinds)
    .fetch_optional(conn)
    .await
}

/// Ends a deployment's pending steps CANCELLED with `reason`; returns how many.
pub async fn steps_cancel_pending(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    reason: &str,
) -> sqlx::Result<u64> {
    Ok(sqlx::query(
        "UPDATE steps SET status = 'cancelled', reason = $2, finished_at = now()
          WHERE deployment_id = $1 AND status = 'pending'",
    )
    .bind(deployment_id)
    .bind(reason)
    .execute(conn)
    .await?
    .rows_affected())
}

/// Ends a step (compare-and-set: pending or running) with `status` and `reason`; false
/// when it had already ended.
pub async fn step_end(
    conn: &mut PgConnection,
    step_id: Uuid,
    status: &str,
    reason: &str,
    error_class: &str,
) -> sqlx::Result<bool> {
    Ok(sqlx::query(
        "UPDATE steps SET status = $2, reason = $3, error_class = $4, finished_at = now(),
                          started_at = COALESCE(started_at, now())
          WHERE step_id = $1 AND status IN ('pending', 'running')",
    )
    .bind(step_id)
    .bind(status)
    .bind(reason)
    .bind(error_class)
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// What a plan of the step found.
pub struct StepPlan<'a> {
    pub add: i32,
    pub change: i32,
    pub destroy: i32,
    pub replaced: &'a [String],
    pub risk: &'a str,
}

/// Records the step's plan summary.
pub async fn step_plan(
    conn: &mut PgConnection,
    step_id: Uuid,
    p: &StepPlan<'_>,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE steps SET plan_add = $2, plan_change = $3, plan_destroy = $4, plan_replaced = $5,
                          plan_risk = $6
          WHERE step_id = $1",
    )
    .bind(step_id)
    .bind(p.add)
    .bind(p.change)
    .bind(p.destroy)
    .bind(p.replaced)
    .bind(p.risk)
    .execute(conn)
    .await?;
    Ok(())
}

/// Turns a probe that found changes into a plan step.
pub async fn step_probe_to_plan(conn: &mut PgConnection, step_id: Uuid) -> sqlx::Result<()> {
    sqlx::query("UPDATE steps SET kind = 'plan' WHERE step_id = $1 AND kind = 'probe'")
        .bind(step_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Ends a deployment's steps that did not end (pending or running) with `status` and
/// `reason`; returns how many.
pub async fn steps_end_open(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    status: &str,
    reason: &str,
) -> sqlx::Result<u64> {
    Ok(sqlx::query(
        "UPDATE steps SET status = $2, reason = $3, finished_at = now()
          WHERE deployment_id = $1 AND status IN ('pending', 'running')",
    )
    .bind(deployment_id)
    .bind(status)
    .bind(reason)
    .execute(conn)
    .await?
    .rows_affected())
}
