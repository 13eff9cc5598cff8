//! The append-only `audit_log` table: INSERT and SELECT only.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection, Postgres, QueryBuilder};
use uuid::Uuid;

use crate::domain::audit::{AuditFilter, AuditRecord, TenantScope};

#[derive(Debug, Clone, FromRow)]
pub struct AuditRow {
    pub seq: i64,
    pub entry_id: Uuid,
    pub tenant_id: Option<Uuid>,
    pub actor: String,
    pub action: String,
    pub object_type: String,
    pub object_id: String,
    pub source: String,
    pub detail: serde_json::Value,
    pub occurred_at: DateTime<Utc>,
    pub recorded_at: DateTime<Utc>,
}

/// Appends an entry; `false` when an entry with its id exists (nothing is written).
pub async fn audit_insert(conn: &mut PgConnection, r: &AuditRecord) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "INSERT INTO audit_log (entry_id, tenant_id, actor, action, object_type, object_id,
                                source, detail, occurred_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (entry_id) DO NOTHING",
    )
    .bind(r.entry_id)
    .bind(r.tenant_id)
    .bind(&r.actor)
    .bind(r.action())
    .bind(&r.object_type)
    .bind(&r.object_id)
    .bind(r.source.as_str())
    .bind(&r.detail)
    .bind(r.occurred_at)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Entries matching `f`, newest first.
pub async fn audit_list(conn: &mut PgConnection, f: &AuditFilter) -> sqlx::Result<Vec<AuditRow>> {
    let mut q: QueryBuilder<Postgres> = QueryBuilder::new(
        "SELECT seq, entry_id, tenant_id, actor, action, object_type, object_id, source, \
         detail, occurred_at, recorded_at FROM audit_log WHERE true",
    );
    if let TenantScope::Tenant(tenant) = f.scope {
        q.push(" AND tenant_id = ").push_bind(tenant);
    }
    if let Some(v) = &f.actor {
        q.push(" AND actor = ").push_bind(v.clone());
    }
    if let Some(v) = &f.object_type {
        q.push(" AND object_type = ").push_bind(v.clone());
    }
    if let Some(v) = &f.object_id {
        q.push(" AND object_id = ").push_bind(v.clone());
    }
    if let Some(v) = &f.action {
        q.push(" AND action = ").push_bind(v.clone());
    }
    if let Some(v) = f.since {
        q.push(" AND occurred_at >= ").push_bind(v);
    }
    if let Some(v) = f.until {
        q.push(" AND occurred_at < ").push_bind(v);
    }
    if let Some(v) = f.before_seq {
        q.push(" AND seq < ").push_bind(v);
    }
    q.push(" ORDER BY seq DESC LIMIT ").push_bind(f.limit);
    q.build_query_as().fetch_all(conn).await
}
