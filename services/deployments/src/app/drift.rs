//! The drift status of an instance's resources, from the drift service's events
//! (`instance.drift_detected` / `instance.drift_resolved`): applied inside the event
//! consumer's transaction, only when the event is newer than what the resource shows (its
//! last apply or destroy, or a later event) — the guard is in the UPDATE.
use cairn_proto::events::{Event, event::Payload};
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::drift::reported;
use crate::error::Result;
use crate::store::instances;

/// What one event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftApplied {
    /// Not a drift event of an instance (or not one this service can place).
    Ignored,
    /// A resource's status changed.
    Changed,
    /// Older than what the resource shows, or of no resource of the tenant's.
    Stale,
}

/// Applies one event of the events stream.
pub async fn on_event(conn: &mut PgConnection, event: &Event) -> Result<DriftApplied> {
    let Some(Payload::Drift(change)) = event.payload.as_ref() else {
        return Ok(DriftApplied::Ignored);
    };
    if event.aggregate != "instance" {
        return Ok(DriftApplied::Ignored);
    }
    let Some(status) = reported(&event.event_type, &change.status) else {
        return Ok(DriftApplied::Ignored);
    };
    let ids = (
        Uuid::parse_str(&event.tenant_id),
        Uuid::parse_str(&change.instance_id),
    );
    let (Ok(tenant_id), Ok(instance_id)) = ids else {
        tracing::warn!(event_id = %event.event_id, "drift event without a tenant or instance id");
        return Ok(DriftApplied::Ignored);
    };
    // Events are ordered by when they occurred; one that says not when cannot be placed.
    let Some(as_of) = event
        .occurred_at
        .as_ref()
        .and_then(|t| DateTime::<Utc>::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?))
    else {
        tracing::warn!(event_id = %event.event_id, "drift event without occurred_at");
        return Ok(DriftApplied::Ignored);
    };
    let changed = instances::resource_drift(
        conn,
        tenant_id,
        instance_id,
        &change.resource,
        status.as_str(),
        as_of,
    )
    .await?;
    tracing::info!(
        %instance_id, resource = %change.resource, %status, changed,
        "drift event"
    );
    Ok(if changed {
        DriftApplied::Changed
    } else {
        DriftApplied::Stale
    })
}
