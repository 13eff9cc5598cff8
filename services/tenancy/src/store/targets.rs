//! The `targets` table; a target is read with its last validation (`target_validations`).
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

use super::target_validations::{JOINED_COLS, JoinedValidation};
use crate::domain::target::{ExternalId, Provider, TargetSpec};

#[derive(Debug, Clone, FromRow)]
pub struct TargetRow {
    pub target_id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    pub provider_kind: String,
    pub local_base_dir: Option<String>,
    pub aws_region: Option<String>,
    pub aws_role_arn: Option<String>,
    /// Generated at creation, never changed (a trigger rejects any update).
    pub external_id: String,
    pub credential_ref: String,
    pub max_concurrent_deployments: i32,
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Its last validation (all null when none).
    #[sqlx(flatten)]
    pub validation: JoinedValidation,
}

/// A target row `t`; read with its validation `v` as `SELECT {COLS}, {JOINED_COLS} FROM
/// targets t {JOIN}`.
const COLS: &str = "t.target_id, t.tenant_id, t.name, t.provider_kind, t.local_base_dir, \
                    t.aws_region, t.aws_role_arn, t.external_id, t.credential_ref, \
                    t.max_concurrent_deployments, t.enabled, t.created_at, t.updated_at";
/// See [`COLS`]; a data-modifying statement names its `RETURNING *` rows `t` in a CTE.
const JOIN: &str = "LEFT JOIN target_validations v ON v.target_id = t.target_id";

struct Columns<'a> {
    kind: &'static str,
    base_dir: Option<&'a str>,
    region: Option<&'a str>,
    role_arn: Option<&'a str>,
    max: i32,
}

fn columns(spec: &TargetSpec) -> Columns<'_> {
    let max = i32::try_from(spec.max_concurrent_deployments).unwrap_or(i32::MAX);
    match &spec.provider {
        Provider::Local { base_dir } => Columns {
            kind: "local",
            base_dir: Some(base_dir),
            region: None,
            role_arn: None,
            max,
        },
        Provider::Aws { region, role_arn } => Columns {
            kind: "aws",
            base_dir: None,
            region: Some(region),
            role_arn: Some(role_arn),
            max,
        },
    }
}

/// Inserts a target with its external id; `None` when the tenant has a target of that name.
pub async fn target_insert(
    conn: &mut PgConnection,
    target_id: Uuid,
    tenant_id: Uuid,
    name: &str,
    spec: &TargetSpec,
    external_id: &ExternalId,
) -> sqlx::Result<Option<TargetRow>> {
    let c = columns(spec);
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "WITH t AS (
             INSERT INTO targets (target_id, tenant_id, name, provider_kind, local_base_dir,
                                  aws_region, aws_role_arn, credential_ref,
                                  max_concurrent_deployments, enabled, external_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
             ON CONFLICT (tenant_id, name) DO NOTHING RETURNING *)
         SELECT {COLS}, {JOINED_COLS} FROM t {JOIN}"
    )))
    .bind(target_id)
    .bind(tenant_id)
    .bind(name)
    .bind(c.kind)
    .bind(c.base_dir)
    .bind(c.region)
    .bind(c.role_arn)
    .bind(spec.credential_ref.as_str())
    .bind(c.max)
    .bind(spec.enabled)
    .bind(external_id.as_str())
    .fetch_optional(conn)
    .await
}

pub async fn target_get(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    target_id: Uuid,
) -> sqlx::Result<Option<TargetRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS}, {JOINED_COLS} FROM targets t {JOIN}
         WHERE t.tenant_id = $1 AND t.target_id = $2"
    )))
    .bind(tenant_id)
    .bind(target_id)
    .fetch_optional(conn)
    .await
}

/// A tenant's target, locked until the transaction ends (an update compares its settings).
pub async fn target_get_for_update(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    target_id: Uuid,
) -> sqlx::Result<Option<TargetRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS}, {JOINED_COLS} FROM targets t {JOIN}
         WHERE t.tenant_id = $1 AND t.target_id = $2 FOR UPDATE OF t"
    )))
    .bind(tenant_id)
    .bind(target_id)
    .fetch_optional(conn)
    .await
}

/// A tenant's target by name (names are unique per tenant).
pub async fn target_get_by_name(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    name: &str,
) -> sqlx::Result<Option<TargetRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS}, {JOINED_COLS} FROM targets t {JOIN}
         WHERE t.tenant_id = $1 AND t.name = $2"
    )))
    .bind(tenant_id)
    .bind(name)
    .fetch_optional(conn)
    .await
}

pub async fn target_list(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<TargetRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS}, {JOINED_COLS} FROM targets t {JOIN}
         WHERE t.tenant_id = $1 AND ($2::uuid IS NULL OR t.target_id > $2)
         ORDER BY t.target_id LIMIT $3"
    )))
    .bind(tenant_id)
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await
}

pub async fn target_update(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    target_id: Uuid,
    spec: &TargetSpec,
) -> sqlx::Result<Option<TargetRow>> {
    let c = columns(spec);
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "WITH t AS (
             UPDATE targets SET provider_kind = $3, local_base_dir = $4, aws_region = $5,
                    aws_role_arn = $6, credential_ref = $7, max_concurrent_deployments = $8,
                    enabled = $9, updated_at = now()
             WHERE tenant_id = $1 AND target_id = $2 RETURNING *)
         SELECT {COLS}, {JOINED_COLS} FROM t {JOIN}"
    )))
    .bind(tenant_id)
    .bind(target_id)
    .bind(c.kind)
    .bind(c.base_dir)
    .bind(c.region)
    .bind(c.role_arn)
    .bind(spec.credential_ref.as_str())
    .bind(c.max)
    .bind(spec.enabled)
    .fetch_optional(conn)
    .await
}

pub async fn target_delete(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    target_id: Uuid,
) -> sqlx::Result<Option<TargetRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "WITH t AS (DELETE FROM targets WHERE tenant_id = $1 AND target_id = $2 RETURNING *)
         SELECT {COLS}, {JOINED_COLS} FROM t {JOIN}"
    )))
    .bind(tenant_id)
    .bind(target_id)
    .fetch_optional(conn)
    .await
}
