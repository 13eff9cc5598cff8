//! Drift's own domain events, written to the outbox in the verdict's transaction: ids, the
//! resource and a value-free summary only.
use cairn_bus::{Aggregate, ServiceRole};
use cairn_proto::events::{DriftChange, event::Payload};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::{Error, Result};

/// What an event says about one resource.
pub struct DriftNews<'a> {
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub resource: &'a str,
    pub finding_id: Uuid,
    pub target_id: &'a str,
    pub environment: &'a str,
    pub scan_id: Option<Uuid>,
    pub summary: &'a str,
    pub fingerprint: &'a str,
}

/// `instance.drift_detected` (`detected`) or `instance.drift_resolved`.
pub async fn drift(conn: &mut PgConnection, n: &DriftNews<'_>, detected: bool) -> Result<()> {
    let (event_type, status) = if detected {
        ("drift_detected", "drift_detected")
    } else {
        ("drift_resolved", "in_sync")
    };
    let payload = Payload::Drift(DriftChange {
        instance_id: n.instance_id.to_string(),
        resource: n.resource.to_owned(),
        finding_id: n.finding_id.to_string(),
        target_id: n.target_id.to_owned(),
        environment: n.environment.to_owned(),
        scan_id: n.scan_id.map(|s| s.to_string()).unwrap_or_default(),
        status: status.to_owned(),
        summary: n.summary.to_owned(),
        fingerprint: n.fingerprint.to_owned(),
    });
    let event = cairn_bus::new_event(
        ServiceRole::Drift,
        n.tenant_id,
        Aggregate::Instance,
        n.instance_id,
        event_type,
        "svc:drift",
        payload,
    )
    .map_err(|e| Error::internal(format!("drift event: {e}")))?;
    Ok(cairn_bus::outbox_insert(conn, &event).await?)
}
