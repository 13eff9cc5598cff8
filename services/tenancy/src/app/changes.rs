//! Every tenancy change is recorded, in its own transaction, as an audit entry and as a
//! domain event in the outbox, both under the same id (so the audit consumer that later
//! receives the event records nothing twice).
use cairn_bus::{Aggregate, ServiceRole};
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
    /// Also the event aggregate (its name is the audit entry's object type): one tenancy
    /// owns (`cairn_bus::OWNERS`), or the event is refused.
    pub object_type: Aggregate,
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
        object_type: change.object_type.name().to_owned(),
        object_id: change.object_id.clone(),
        event: change.event.to_owned(),
        source: Source::Tenancy,
        detail: change.detail,
        occurred_at: now,
    };
    store::audit::audit_insert(conn, &entry).await?;
    // Tenancy's changes carry no payload; the event shares the audit entry's id and time.
    let mut event = cairn_bus::new_event(
        ServiceRole::Tenancy,
        change.tenant_id.map(|t| t.to_string()).unwrap_or_default(),
        change.object_type,
        change.object_id,
        change.event,
        change.actor,
        None,
    )?;
    event.event_id = id.to_string();
    event.occurred_at = Some(prost_types::Timestamp {
        seconds: now.timestamp(),
        nanos: i32::try_from(now.timestamp_subsec_nanos()).unwrap_or(0),
    });
    cairn_bus::outbox_insert(conn, &event).await?;
    Ok(())
}
