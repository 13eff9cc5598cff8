//! The projection of the events drift consumes (in the consumer's transaction, after its
//! event-id deduplication): instances, deployments in progress and their counter, tracked
//! resources (`resource.applied` tracks or re-arms one and clears its drift; `destroyed`
//! stops tracking it). `instance.deleted` leaves a tombstone and removes the instance's
//! resources, findings and rules; later events of that instance are ignored.
use cairn_proto::events::{DeploymentChange, Event, ResourceChange, event::Payload};
use chrono::Utc;
use sqlx::PgConnection;
use uuid::Uuid;

use super::events::{DriftNews, drift};
use crate::domain::schedule::{Schedule, phase_of};
use crate::domain::verdict::Status;
use crate::error::Result;
use crate::store::{findings, tracking};

/// Deployment statuses after which nothing of the deployment runs any more.
const TERMINAL: [&str; 5] = ["succeeded", "failed", "cancelled", "rejected", "expired"];

/// What an event did to the projection (the caller wakes the relay on `wrote_events`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Handled {
    pub wrote_events: bool,
}

/// Applies one event. Events of other aggregates, and malformed ones, are ignored (logged):
/// retrying them would never succeed.
pub async fn on_event(
    conn: &mut PgConnection,
    event: &Event,
    schedule: Schedule,
) -> Result<Handled> {
    let Ok(tenant_id) = Uuid::parse_str(&event.tenant_id) else {
        return Ok(Handled::default());
    };
    match (
        event.aggregate.as_str(),
        event.event_type.as_str(),
        &event.payload,
    ) {
        ("resource", "applied", Some(Payload::Resource(p))) => match applied_of(tenant_id, p) {
            Some(a) => resource_applied(conn, &a, schedule).await,
            None => ignored(event),
        },
        ("resource", "destroyed", Some(Payload::Resource(p))) => {
            let (Ok(instance_id), false) = (Uuid::parse_str(&p.instance_id), p.resource.is_empty())
            else {
                return ignored(event);
            };
            resource_destroyed(conn, tenant_id, instance_id, &p.resource).await
        }
        ("deployment", event_type, Some(Payload::Deployment(p))) => {
            deployment(conn, tenant_id, event_type, p).await?;
            Ok(Handled::default())
        }
        ("instance", "created", Some(Payload::Instance(p))) => {
            if let Ok(instance_id) = Uuid::parse_str(&p.instance_id) {
                tracking::instance_ensure(conn, tenant_id, instance_id).await?;
            }
            Ok(Handled::default())
        }
        ("instance", "deleted", Some(Payload::Instance(p))) => {
            let Ok(instance_id) = Uuid::parse_str(&p.instance_id) else {
                return ignored(event);
            };
            if !tracking::instance_delete(conn, tenant_id, instance_id).await? {
                tracing::warn!(%instance_id, "deletion of another tenant's instance ignored");
            }
            Ok(Handled::default())
        }
        _ => Ok(Handled::default()),
    }
}

fn ignored(event: &Event) -> Result<Handled> {
    tracing::warn!(event_id = %event.event_id, event_type = %event.event_type, "malformed event ignored");
    Ok(Handled::default())
}

fn applied_of(tenant_id: Uuid, p: &ResourceChange) -> Option<tracking::Applied> {
    if p.resource.is_empty() || p.target_id.is_empty() {
        return None;
    }
    Some(tracking::Applied {
        tenant_id,
        instance_id: Uuid::parse_str(&p.instance_id).ok()?,
        resource: p.resource.clone(),
        state_id: Uuid::parse_str(&p.state_id).ok()?,
        applied_run_id: Uuid::parse_str(&p.run_id).ok()?,
        target_id: p.target_id.clone(),
        environment: p.environment.clone(),
    })
}

async fn resource_applied(
    conn: &mut PgConnection,
    a: &tracking::Applied,
    schedule: Schedule,
) -> Result<Handled> {
    if !tracking::instance_ensure(conn, a.tenant_id, a.instance_id).await? {
        tracing::warn!(instance_id = %a.instance_id, "resource event of another tenant's instance ignored");
        return Ok(Handled::default());
    }
    let Some(row) = tracking::tracked_by_name(conn, a.instance_id, &a.resource).await? else {
        let resource_id = Uuid::new_v4();
        let phase = phase_of(resource_id);
        tracking::tracked_insert(
            conn,
            resource_id,
            a,
            phase,
            schedule.next_slot(phase, Utc::now()),
        )
        .await?;
        return Ok(Handled::default());
    };
    // Applied again: what was drifted is in sync now; a scan in flight planned the old
    // config and will be discarded.
    let before = Status::parse(&row.status);
    let status = match before {
        Status::Unknown => Status::Unknown,
        Status::InSync | Status::DriftDetected | Status::CheckFailed => Status::InSync,
    };
    tracking::tracked_applied(conn, row.resource_id, a, status.as_str()).await?;
    let mut handled = Handled::default();
    if let Some(finding_id) = findings::finding_resolve(conn, a.instance_id, &a.resource).await? {
        let news = DriftNews {
            tenant_id: a.tenant_id,
            instance_id: a.instance_id,
            resource: &a.resource,
            finding_id,
            target_id: &a.target_id,
            environment: &a.environment,
            scan_id: None,
            summary: "applied again by a deployment",
            fingerprint: "",
        };
        drift(conn, &news, false).await?;
        // Counted in the event's transaction: an event whose commit fails is counted again
        // when it is redelivered.
        crate::metrics::finding("resolved");
        handled.wrote_events = true;
    }
    Ok(handled)
}

async fn resource_destroyed(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Uuid,
    resource: &str,
) -> Result<Handled> {
    let Some(row) = tracking::tracked_by_name(conn, instance_id, resource).await? else {
        return Ok(Handled::default());
    };
    if row.tenant_id != tenant_id {
        return Ok(Handled::default());
    }
    tracking::tracked_delete(conn, row.resource_id).await?;
    findings::finding_resolve(conn, instance_id, resource).await?;
    Ok(Handled::default())
}

async fn deployment(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    event_type: &str,
    p: &DeploymentChange,
) -> Result<()> {
    let (Ok(deployment_id), Ok(instance_id)) = (
        Uuid::parse_str(&p.deployment_id),
        Uuid::parse_str(&p.instance_id),
    ) else {
        return Ok(());
    };
    // A preview changes nothing: scans need not wait for it.
    if p.kind == "preview" {
        return Ok(());
    }
    if !tracking::instance_ensure(conn, tenant_id, instance_id).await? {
        return Ok(());
    }
    if event_type == "requested" {
        tracking::deployment_requested(conn, deployment_id, instance_id).await?;
    }
    if TERMINAL.contains(&p.status.as_str()) {
        tracking::deployment_ended(conn, deployment_id, instance_id).await?;
    }
    Ok(())
}
