//! A durable consumer of `cairn.events.>` that queues webhook deliveries: for an event of a
//! known type, one delivery per enabled subscription of its tenant that names the type, each
//! with the next sequence of its subscription, in the same transaction as the event id's
//! idempotency key (so a redelivered event queues nothing twice).
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use cairn_bus::{BusError, Consumer, Namespace};
use cairn_proto::events::{Event, event::Payload};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use sqlx::{PgConnection, PgPool};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::domain::webhook::EventType;
use crate::domain::webhook::event_types::of_event;
use crate::error::{Error, Result};
use crate::store::webhook_deliveries::{NewDelivery, delivery_insert};
use crate::store::webhooks::sequences_for_event;

/// The durable consumer's name and the `processed_events` consumer key.
pub const CONSUMER: &str = "tenancy-webhooks";

/// The event's ids and non-secret summary: a fixed subset of each payload (never a
/// credential, parameter value, state, plan or config — events carry none, and new payload
/// fields are not sent until they are added here).
pub fn data_of(event: &Event) -> Value {
    let mut data = json!({
        "aggregate": event.aggregate,
        "aggregate_id": event.aggregate_id,
        "actor": event.actor,
    });
    let extra = match event.payload.as_ref() {
        None => json!({}),
        Some(Payload::Deployment(p)) => json!({
            "deployment_id": p.deployment_id, "instance_id": p.instance_id,
            "instance_name": p.instance_name, "kind": p.kind, "status": p.status,
            "target_id": p.target_id, "environment": p.environment, "steps": p.steps,
            "succeeded": p.succeeded, "failed": p.failed, "skipped": p.skipped,
            "summary": p.summary,
        }),
        Some(Payload::Instance(p)) => json!({
            "instance_id": p.instance_id, "name": p.name, "template_id": p.template_id,
            "template_version": p.template_version, "target_id": p.target_id,
            "environment": p.environment, "status": p.status,
        }),
        Some(Payload::Resource(p)) => json!({
            "instance_id": p.instance_id, "resource": p.resource, "target_id": p.target_id,
            "environment": p.environment, "deployment_id": p.deployment_id, "run_id": p.run_id,
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
        Some(Payload::Drift(p)) => json!({
            "instance_id": p.instance_id, "resource": p.resource, "finding_id": p.finding_id,
            "target_id": p.target_id, "environment": p.environment, "status": p.status,
            "summary": p.summary,
        }),
        Some(Payload::GenerationCommitted(p)) => json!({
            "state_id": p.state_id, "generation": p.generation, "run_id": p.run_id,
        }),
        Some(Payload::RunAdmitted(p)) => json!({
            "state_id": p.state_id, "run_id": p.run_id, "kind": p.kind,
        }),
        Some(Payload::RunFinished(p)) => json!({
            "state_id": p.state_id, "run_id": p.run_id, "outcome": p.outcome,
        }),
        Some(Payload::TargetValidated(p)) => json!({
            "validation_id": p.validation_id, "target_id": p.target_id, "ok": p.ok,
            "account_id": p.account_id, "error": p.error, "transient": p.transient,
        }),
    };
    if let (Value::Object(base), Value::Object(more)) = (&mut data, extra) {
        base.extend(more.into_iter().collect::<Map<_, _>>());
    }
    data
}

/// Queues the deliveries of one event (called inside the consumer's transaction). Events of
/// no tenant or of a type no subscription may name queue nothing.
pub async fn handle(conn: &mut PgConnection, event: &Event) -> Result<usize> {
    let Ok(tenant) = Uuid::parse_str(&event.tenant_id) else {
        return Ok(0);
    };
    let event_type = of_event(&event.aggregate, &event.event_type);
    if EventType::parse(&event_type).is_err() {
        return Ok(0);
    }
    let subscriptions = sequences_for_event(conn, tenant, &event_type).await?;
    if subscriptions.is_empty() {
        return Ok(0);
    }
    let event_id = Uuid::parse_str(&event.event_id)
        .map_err(|_| Error::invalid_argument("event id is not a UUID".to_owned()))?;
    let occurred_at = event
        .occurred_at
        .as_ref()
        .and_then(|t| DateTime::<Utc>::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?))
        .unwrap_or_else(Utc::now);
    let data = data_of(event);
    for (subscription_id, sequence) in &subscriptions {
        delivery_insert(
            conn,
            &NewDelivery {
                subscription_id: *subscription_id,
                tenant_id: tenant,
                sequence: *sequence,
                event_id,
                event_type: &event_type,
                occurred_at,
                data: &data,
            },
        )
        .await?;
    }
    Ok(subscriptions.len())
}

/// Creates (or binds to) the durable consumer.
pub async fn consumer(
    js: &jetstream::Context,
    ns: &Namespace,
    ack_wait: Duration,
) -> Result<Consumer, BusError> {
    super::events_consumer(js, ns, CONSUMER, ack_wait).await
}

/// Runs the consumer until `cancel` fires; `sender` is woken when deliveries were queued.
pub async fn run(consumer: Consumer, pool: PgPool, sender: Arc<Notify>, cancel: CancellationToken) {
    let result = consumer
        .run_batched(
            &pool,
            CONSUMER,
            super::EVENT_BATCH,
            async move |conn, event| {
                let queued = handle(conn, &event).await?;
                if queued > 0 {
                    // Before the commit: the sender may look too early, then finds the
                    // deliveries at its next poll.
                    sender.notify_one();
                }
                Ok::<_, Error>(())
            },
            cancel,
        )
        .await;
    if let Err(err) = result {
        tracing::error!(error = %cairn_bus::Chain(&err), "webhook consumer stopped");
    }
}
