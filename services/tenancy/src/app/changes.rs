//! Every tenancy change is recorded, in its own transaction, as an audit entry and as a
//! domain event in the outbox, both under the same id (so the audit consumer that later
//! receives the event records nothing twice).
use cairn_proto::events::Event;
use chrono::Utc;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::audit::{AuditRecord, Source};
use crate::error::Result;
use crate::store;

/// A change to record.
pub struct Change<'a> {
    pub tenant_id: Option<Uuid>,
    pub actor: &'a str,
    /// Also the event aggregate: `tenant`, `user`, `api_token`, `target`, `session`, ….
    pub object_type: &'static str,
    pub object_id: String,
    /// `created`, `updated`, `deleted`, `revoked`, `role_changed`, ….
    pub event: &'static str,
    /// Ids and names only.
    pub detail: serde_json::Value,
}

/// Appends the audit entry and the event.
pub async fn record(conn: &mut PgConnection, change: Change<'_>) -> Result<()> {
    let id = Uuid::now_v7();
    let now = Utc::now();
    let entry = AuditRecord {
        entry_id: id,
        tenant_id: change.tenant_id,
        actor: change.actor.to_owned(),
        object_type: change.object_type.to_owned(),
        object_id: change.object_id.clone(),
        event: change.event.to_owned(),
        source: Source::Tenancy,
        detail: change.detail,
        occurred_at: now,
    };
    store::audit::audit_insert(conn, &entry).await?;
    let event = Event {
        event_id: id.to_string(),
        tenant_id: change.tenant_id.map(|t| t.to_string()).unwrap_or_default(),
        aggregate: change.object_type.to_owned(),
        aggregate_id: change.object_id,
        event_type: change.event.to_owned(),
        actor: change.actor.to_owned(),
        occurred_at: Some(prost_types::Timestamp {
            seconds: now.timestamp(),
            nanos: i32::try_from(now.timestamp_subsec_nanos()).unwrap_or(0),
        }),
        payload: None,
    };
    cairn_bus::outbox_insert(conn, &event).await?;
    Ok(())
}
