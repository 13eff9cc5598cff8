//! The `instances` and `instance_resources` tables.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

use crate::domain::Ref;

#[derive(Debug, Clone, FromRow)]
pub struct InstanceRow {
    pub instance_id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    pub template_id: Uuid,
    pub template_version: i32,
    pub target_id: Uuid,
    pub environment: String,
    pub parameters: serde_json::Value,
    pub status: String,
    pub active_deployment_id: Option<Uuid>,
    pub last_applied_snapshot_id: Option<Uuid>,
    pub revision: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const COLS: &str = "instance_id, tenant_id, name, template_id, template_version, target_id, \
    environment, parameters, status, active_deployment_id, last_applied_snapshot_id, revision, \
    created_at, updated_at";

#[derive(Debug, Clone, FromRow)]
pub struct ResourceRow {
    pub instance_id: Uuid,
    pub name: String,
    pub module: String,
    pub state_id: Option<Uuid>,
    pub status: String,
    pub last_generation: i64,
    pub last_applied_run_id: Option<Uuid>,
    pub drift_status: String,
}

/// What a new instance row holds.
pub struct NewInstance<'a> {
    pub instance_id: Uuid,
    pub tenant_id: Uuid,
    pub name: &'a str,
    pub template_id: Uuid,
    pub template_version: i32,
    pub target_id: Uuid,
    pub environment: &'a str,
    pub parameters: serde_json::Value,
}

/// Inserts a pending instance; `None` when the tenant has one of that name.
pub async fn instance_insert(
    conn: &mut PgConnection,
    i: &NewInstance<'_>,
) -> sqlx::Result<Option<InstanceRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO instances (instance_id, tenant_id, name, template_id, template_version,
                                target_id, environment, parameters, status)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending')
         ON CONFLICT (tenant_id, name) DO NOTHING RETURNING {COLS}"
    )))
    .bind(i.instance_id)
    .bind(i.tenant_id)
    .bind(i.name)
    .bind(i.template_id)
    .bind(i.template_version)
    .bind(i.target_id)
    .bind(i.environment)
    .bind(&i.parameters)
    .fetch_optional(conn)
    .await
}

/// The tenant's instance named by `r`.
pub async fn instance_get(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    r: &Ref,
) -> sqlx::Result<Option<InstanceRow>> {
    let (id, name) = match r {
        Ref::Id(id) => (Some(*id), None),
        Ref::Name(n) => (None, Some(n.as_str())),
    };
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM instances
          WHERE tenant_id = $1 AND (instance_id = $2 OR name = $3)"
    )))
    .bind(tenant_id)
    .bind(id)
    .bind(name)
    .fetch_optional(conn)
    .await
}

/// A page of the tenant's instances, by id, after `after`.
pub async fn instance_list(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<InstanceRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM instances
          WHERE tenant_id = $1 AND ($2::uuid IS NULL OR instance_id > $2)
          ORDER BY instance_id LIMIT $3"
    )))
    .bind(tenant_id)
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// Sets version and parameters if the instance is still at `revision` and has no active
/// deployment (compare-and-set); `None` when it moved on.
pub async fn instance_update(
    conn: &mut PgConnection,
    instance_id: Uuid,
    revision: i64,
    template_version: i32,
    parameters: &serde_json::Value,
) -> sqlx::Result<Option<InstanceRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE instances
            SET template_version = $3, parameters = $4, revision = revision + 1, updated_at = now()
          WHERE instance_id = $1 AND revision = $2 AND active_deployment_id IS NULL
         RETURNING {COLS}"
    )))
    .bind(instance_id)
    .bind(revision)
    .bind(template_version)
    .bind(parameters)
    .fetch_optional(conn)
    .await
}

/// Takes the instance for `deployment_id` (compare-and-set on `revision` and no active
/// deployment): sets its status, version and parameters. `None` when it moved on.
pub async fn instance_take(
    conn: &mut PgConnection,
    instance_id: Uuid,
    revision: i64,
    deployment_id: Uuid,
    status: &str,
    template_version: i32,
    parameters: &serde_json::Value,
) -> sqlx::Result<Option<InstanceRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE instances
            SET status = $4, active_deployment_id = $3, template_version = $5, parameters = $6,
                revision = revision + 1, updated_at = now()
          WHERE instance_id = $1 AND revision = $2 AND active_deployment_id IS NULL
         RETURNING {COLS}"
    )))
    .bind(instance_id)
    .bind(revision)
    .bind(deployment_id)
    .bind(status)
    .bind(template_version)
    .bind(parameters)
    .fetch_optional(conn)
    .await
}

/// Releases the instance from `deployment_id` with `status` (compare-and-set on the
/// active deployment); false when another deployment (or none) holds it.
pub async fn instance_release(
    conn: &mut PgConnection,
    instance_id: Uuid,
    deployment_id: Uuid,
    status: &str,
) -> sqlx::Result<bool> {
    Ok(sqlx::query(
        "UPDATE instances
            SET status = $3, active_deployment_id = NULL, revision = revision + 1, updated_at = now()
          WHERE instance_id = $1 AND active_deployment_id = $2",
    )
    .bind(instance_id)
    .bind(deployment_id)
    .bind(status)
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// Deletes the instance if it is still at `revision` and in one of `statuses` with no
/// active deployment; its deployments and steps go with it.
pub async fn instance_delete(
    conn: &mut PgConnection,
    instance_id: Uuid,
    revision: i64,
    statuses: &[&str],
) -> sqlx::Result<bool> {
    Ok(sqlx::query(
        "DELETE FROM instances
          WHERE instance_id = $1 AND revision = $2 AND active_deployment_id IS NULL
            AND status = ANY($3)",
    )
    .bind(instance_id)
    .bind(revision)
    .bind(statuses)
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// The resources of these instances, in dependency order per instance.
pub async fn resources_of(
    conn: &mut PgConnection,
    instance_ids: &[Uuid],
) -> sqlx::Result<Vec<ResourceRow>> {
    sqlx::query_as(
        "SELECT instance_id, name, module, state_id, status, last_generation,
                last_applied_run_id, drift_status
           FROM instance_resources WHERE instance_id = ANY($1)
          ORDER BY instance_id, position",
    )
    .bind(instance_ids)
    .fetch_all(conn)
    .await
}

/// Releases the instance from `deployment_id` with its final status and, when given, its
/// last applied snapshot (compare-and-set on the active deployment).
pub async fn instance_finish(
    conn: &mut PgConnection,
    instance_id: Uuid,
    deployment_id: Uuid,
    status: &str,
    snapshot: Option<Option<Uuid>>,
) -> sqlx::Result<bool> {
    Ok(sqlx::query(
        "UPDATE instances
            SET status = $3, active_deployment_id = NULL, revision = revision + 1, updated_at = now(),
                last_applied_snapshot_id = CASE WHEN $4 THEN $5 ELSE last_applied_snapshot_id END
          WHERE instance_id = $1 AND active_deployment_id = $2",
    )
    .bind(instance_id)
    .bind(deployment_id)
    .bind(status)
    .bind(snapshot.is_some())
    .bind(snapshot.flatten())
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// What the workflow records of a resource after a run.
pub struct ResourceUpdate<'a> {
    pub instance_id: Uuid,
    pub name: &'a str,
    pub module: &'a str,
    pub state_id: Uuid,
    pub status: &'a str,
    pub last_generation: i64,
    pub last_applied_run_id: Option<Uuid>,
    pub position: i32,
}

/// Inserts or updates a resource of an instance. An applied resource is in sync with what
/// was applied and a destroyed one has no drift to know of, as of now: an older drift event
/// no longer changes it (see [`resource_drift`]).
pub async fn resource_upsert(conn: &mut PgConnection, r: &ResourceUpdate<'_>) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO instance_resources (instance_id, name, module, state_id, status,
                                         last_generation, last_applied_run_id, position,
                                         drift_status, drift_as_of)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                 CASE $5 WHEN 'applied' THEN 'in_sync' ELSE 'unknown' END,
                 CASE WHEN $5 IN ('applied', 'destroyed') THEN now() END)
         ON CONFLICT (instance_id, name) DO UPDATE
            SET module = EXCLUDED.module, state_id = EXCLUDED.state_id, status = EXCLUDED.status,
                last_generation = EXCLUDED.last_generation,
                last_applied_run_id = COALESCE(EXCLUDED.last_applied_run_id,
                                               instance_resources.last_applied_run_id),
                position = EXCLUDED.position, updated_at = now(),
                drift_status = CASE WHEN EXCLUDED.status IN ('applied', 'destroyed')
                                    THEN EXCLUDED.drift_status
                                    ELSE instance_resources.drift_status END,
                drift_as_of = COALESCE(EXCLUDED.drift_as_of, instance_resources.drift_as_of)",
    )
    .bind(r.instance_id)
    .bind(r.name)
    .bind(r.module)
    .bind(r.state_id)
    .bind(r.status)
    .bind(r.last_generation)
    .bind(r.last_applied_run_id)
    .bind(r.position)
    .execute(conn)
    .await?;
    Ok(())
}

/// Sets a resource's drift status from a drift event that occurred at `as_of`, if the
/// resource belongs to `tenant_id` and nothing newer is known of it (an apply, a destroy or
/// a later event): false when it changed nothing.
pub async fn resource_drift(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Uuid,
    name: &str,
    drift_status: &str,
    as_of: DateTime<Utc>,
) -> sqlx::Result<bool> {
    Ok(sqlx::query(
        "UPDATE instance_resources r
            SET drift_status = $4, drift_as_of = $5
           FROM instances i
          WHERE r.instance_id = $2 AND r.name = $3 AND i.instance_id = r.instance_id
            AND i.tenant_id = $1 AND (r.drift_as_of IS NULL OR r.drift_as_of < $5)",
    )
    .bind(tenant_id)
    .bind(instance_id)
    .bind(name)
    .bind(drift_status)
    .bind(as_of)
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}
