//! A durable consumer of `cairn.events.>` that appends every event to the audit log, and
//! stores a runner's `target.validated` answer as the target's last validation (in the same
//! transaction). It is idempotent twice over: `processed_events` (by event id, in the
//! handler's transaction) and the audit log's unique entry id, which also makes tenancy's
//! own events (already recorded in the change's transaction) no-ops; a stored answer is
//! written by compare-and-set on its validation id, so a second copy changes nothing.
use std::time::Duration;

use async_nats::jetstream;
use cairn_bus::{BusError, Consumer, Namespace};
use cairn_proto::events::{Event, event::Payload};
use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::{PgConnection, PgPool};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::domain::audit::{AuditRecord, Source};
use crate::error::{Error, Result};
use crate::store;

/// The durable consumer's name and the `processed_events` consumer key.
pub const CONSUMER: &str = "tenancy-audit";

/// The audit entry of another service's event.
pub fn record_of(event: &Event) -> Result<AuditRecord> {
    let entry_id = Uuid::parse_str(&event.event_id)
        .map_err(|_| Error::invalid_argument("event id is not a UUID".to_owned()))?;
    let tenant_id = if event.tenant_id.is_empty() || event.tenant_id == cairn_bus::NO_TENANT {
        None
    } else {
        Some(Uuid::parse_str(&event.tenant_id).map_err(|_| {
            Error::invalid_argument(format!("event tenant {:?} is not a UUID", event.tenant_id))
        })?)
    };
    let occurred_at = event
        .occurred_at
        .as_ref()
        .and_then(|t| {
            DateTime::<Utc>::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap_or(0))
        })
        .unwrap_or_else(Utc::now);
    Ok(AuditRecord {
        entry_id,
        tenant_id,
        actor: event.actor.clone(),
        object_type: event.aggregate.clone(),
        object_id: event.aggregate_id.clone(),
        event: event.event_type.clone(),
        source: Source::Events,
        detail: detail_of(event.payload.as_ref()),
        occurred_at,
    })
}

/// The ids of a payload (events carry ids and references only).
fn detail_of(payload: Option<&Payload>) -> serde_json::Value {
    match payload {
        None => json!({}),
        Some(Payload::GenerationCommitted(p)) => json!({
            "state_id": p.state_id, "generation": p.generation, "run_id": p.run_id,
            "attempt": p.attempt, "recovered_from": p.recovered_from,
        }),
        Some(Payload::RecoveryRequired(p)) => json!({
            "state_id": p.state_id, "generation": p.generation, "reason": p.reason,
        }),
        Some(Payload::Recovered(p)) => json!({
            "state_id": p.state_id, "new_generation": p.new_generation,
            "recovered_from": p.recovered_from, "reason": p.reason,
        }),
        Some(Payload::LockForced(p)) => json!({
            "state_id": p.state_id, "lock_id": p.lock_id, "reason": p.reason,
        }),
        Some(Payload::RunAdmitted(p)) => json!({
            "state_id": p.state_id, "run_id": p.run_id, "attempt": p.attempt, "kind": p.kind,
            "base_generation": p.base_generation,
        }),
        Some(Payload::RunFinished(p)) => json!({
            "state_id": p.state_id, "run_id": p.run_id, "attempt": p.attempt,
            "outcome": p.outcome, "final_generation": p.final_generation,
        }),
        Some(Payload::Instance(p)) => json!({
            "instance_id": p.instance_id, "name": p.name, "template_id": p.template_id,
            "template_version": p.template_version, "target_id": p.target_id,
            "environment": p.environment, "status": p.status,
        }),
        Some(Payload::Deployment(p)) => json!({
            "deployment_id": p.deployment_id, "instance_id": p.instance_id,
            "instance_name": p.instance_name, "kind": p.kind, "status": p.status,
            "target_id": p.target_id, "environment": p.environment, "steps": p.steps,
            "succeeded": p.succeeded, "failed": p.failed, "skipped": p.skipped,
            "plan_set_hash": p.plan_set_hash, "summary": p.summary,
        }),
        Some(Payload::Resource(p)) => json!({
            "instance_id": p.instance_id, "resource": p.resource, "state_id": p.state_id,
            "run_id": p.run_id, "target_id": p.target_id, "environment": p.environment,
            "deployment_id": p.deployment_id,
        }),
        Some(Payload::Drift(p)) => json!({
            "instance_id": p.instance_id, "resource": p.resource, "finding_id": p.finding_id,
            "target_id": p.target_id, "environment": p.environment, "scan_id": p.scan_id,
            "status": p.status, "summary": p.summary, "fingerprint": p.fingerprint,
        }),
        Some(Payload::TargetValidated(p)) => json!({
            "validation_id": p.validation_id, "target_id": p.target_id, "ok": p.ok,
            "account_id": p.account_id, "arn": p.arn, "error": p.error,
            "transient": p.transient, "runner_instance": p.runner_instance,
        }),
    }
}

/// Records one event (called inside the consumer's transaction). An event that cannot be
/// recorded faithfully (bad tenant id) is recorded without a tenant, visible to platform
/// admins, rather than retried forever.
pub async fn handle(conn: &mut PgConnection, event: Event) -> Result<()> {
    let record = match record_of(&event) {
        Ok(record) => record,
        Err(err) => {
            tracing::warn!(event_id = %event.event_id, error = %err, "event recorded without its tenant");
            let entry_id = Uuid::parse_str(&event.event_id)
                .map_err(|_| Error::invalid_argument("event id is not a UUID".to_owned()))?;
            AuditRecord {
                entry_id,
                tenant_id: None,
                actor: event.actor.clone(),
                object_type: event.aggregate.clone(),
                object_id: event.aggregate_id.clone(),
                event: event.event_type.clone(),
                source: Source::Events,
                detail: json!({ "tenant": event.tenant_id }),
                occurred_at: Utc::now(),
            }
        }
    };
    store::audit::audit_insert(conn, &record).await?;
    // A runner's answer to a target validation is also the target's last validation.
    if event.aggregate == "target" && event.event_type == "validated" {
        crate::app::target_validation::record_answer(conn, &event).await?;
    }
    Ok(())
}

/// Creates (or binds to) the durable consumer.
pub async fn consumer(
    js: &jetstream::Context,
    ns: &Namespace,
    ack_wait: Duration,
) -> Result<Consumer, BusError> {
    super::events_consumer(js, ns, CONSUMER, ack_wait).await
}

/// Runs the consumer until `cancel` fires.
pub async fn run(consumer: Consumer, pool: PgPool, cancel: CancellationToken) {
    let result = consumer
        .run_batched(
            &pool,
            CONSUMER,
            super::EVENT_BATCH,
            async move |conn, event| handle(conn, event).await,
            cancel,
        )
        .await;
    if let Err(err) = result {
        tracing::error!(error = %cairn_bus::Chain(&err), "audit consumer stopped");
    }
}

/// `processed_events` rows are kept well beyond the events stream's 30-day retention.
pub const PROCESSED_RETENTION: Duration = Duration::from_secs(40 * 24 * 3600);
/// How often old `processed_events` rows are pruned.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(3600);

/// Prunes old idempotency keys every [`PRUNE_INTERVAL`] until `cancel` fires (the audit
/// entries themselves are never deleted).
pub async fn prune_processed(pool: PgPool, cancel: CancellationToken) {
    loop {
        match cairn_bus::processed_events_prune(&pool, PROCESSED_RETENTION).await {
            Ok(0) => {}
            Ok(pruned) => tracing::debug!(pruned, "pruned processed event ids"),
            Err(err) => {
                tracing::warn!(error = %cairn_bus::Chain(&err), "pruning processed event ids failed")
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(PRUNE_INTERVAL) => {}
        }
    }
}
