//! Publishing protobuf messages to JetStream with a `Nats-Msg-Id`, confirmed by the stream's
//! acknowledgement; plus core-NATS publishing for the stream-less `runctl` subjects.

use async_nats::jetstream;
use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use bytes::Bytes;
use cairn_proto::events::Event;
use prost::Message;
use uuid::Uuid;

use crate::error::BusError;
use crate::subjects::Namespace;

/// The tenant token used for events that belong to no tenant (service-level events).
pub const NO_TENANT: &str = "_";

/// The event id as a UUID; it is the `Nats-Msg-Id` and every consumer's idempotency key.
pub fn event_uuid(event: &Event) -> Result<Uuid, BusError> {
    Uuid::parse_str(&event.event_id).map_err(|_| {
        BusError::InvalidEvent(format!(
            "event id {:?} of {}.{} is not a UUID",
            event.event_id, event.aggregate, event.event_type
        ))
    })
}

/// `[<prefix>.]cairn.events.<tenant or _>.<aggregate>.<event_type>` for `event`.
pub fn event_subject(ns: &Namespace, event: &Event) -> Result<String, BusError> {
    let tenant = if event.tenant_id.is_empty() {
        NO_TENANT
    } else {
        event.tenant_id.as_str()
    };
    Ok(ns.events_subject(tenant, &event.aggregate, &event.event_type)?)
}

/// Publishes a domain event to `CAIRN_EVENTS` and waits for the stream's acknowledgement.
/// Publishing the same event id again within the duplicate window stores nothing new.
pub async fn publish_event(
    js: &jetstream::Context,
    ns: &Namespace,
    event: &Event,
) -> Result<(), BusError> {
    // The canonical UUID text, so that the outbox relay and direct publishing dedup alike.
    let msg_id = event_uuid(event)?.to_string();
    let subject = event_subject(ns, event)?;
    publish_msg(js, &subject, &msg_id, event).await
}

/// Publishes `msg` on `subject` with `Nats-Msg-Id: msg_id` and waits for the stream's
/// acknowledgement. Choose `msg_id` so that a retry of the same logical message carries the
/// same id (e.g. `<run_id>.<attempt>` for a run result).
pub async fn publish_msg<M: Message>(
    js: &jetstream::Context,
    subject: &str,
    msg_id: &str,
    msg: &M,
) -> Result<(), BusError> {
    // The publisher's trace continues in the consumer (no header when traces are off).
    let trace = cairn_telemetry::TraceContext::current();
    let ack = send_traced(
        js,
        subject,
        msg_id,
        Bytes::from(msg.encode_to_vec()),
        &trace,
    )
    .await?;
    ack.await.map_err(|source| BusError::Publish {
        subject: subject.to_owned(),
        source,
    })?;
    Ok(())
}

/// Publishes `msg` on core NATS (no stream, no acknowledgement): for `runctl` subjects.
pub async fn publish_core<M: Message>(
    client: &async_nats::Client,
    subject: &str,
    msg: &M,
) -> Result<(), BusError> {
    client
        .publish(subject.to_owned(), Bytes::from(msg.encode_to_vec()))
        .await
        .map_err(|source| BusError::CorePublish {
            subject: subject.to_owned(),
            source,
        })
}

/// Sends without waiting for the acknowledgement (the caller awaits the returned future).
pub(crate) async fn send(
    js: &jetstream::Context,
    subject: &str,
    msg_id: &str,
    payload: Bytes,
) -> Result<PublishAckFuture, BusError> {
    send_traced(
        js,
        subject,
        msg_id,
        payload,
        &cairn_telemetry::TraceContext::default(),
    )
    .await
}

/// [`send`] with `trace` in the message headers (`traceparent`/`tracestate`).
pub(crate) async fn send_traced(
    js: &jetstream::Context,
    subject: &str,
    msg_id: &str,
    payload: Bytes,
    trace: &cairn_telemetry::TraceContext,
) -> Result<PublishAckFuture, BusError> {
    if msg_id.is_empty() {
        return Err(BusError::InvalidMessage(format!(
            "message for {subject} has an empty Nats-Msg-Id"
        )));
    }
    let message = trace.headers().fold(
        PublishMessage::build().payload(payload).message_id(msg_id),
        |message, (name, value)| message.header(name, value),
    );
    js.send_publish(subject.to_owned(), message)
        .await
        .map_err(|source| BusError::Publish {
            subject: subject.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(tenant: &str, id: &str) -> Event {
        Event {
            event_id: id.into(),
            tenant_id: tenant.into(),
            aggregate: "state".into(),
            aggregate_id: "s1".into(),
            event_type: "recovered".into(),
            ..Default::default()
        }
    }

    #[test]
    fn subject_of_event() {
        let ns = Namespace::root();
        let id = Uuid::new_v4().to_string();
        assert_eq!(
            event_subject(&ns, &event("ten", &id)).expect("valid"),
            "cairn.events.ten.state.recovered"
        );
        assert_eq!(
            event_subject(&ns, &event("", &id)).expect("valid"),
            "cairn.events._.state.recovered"
        );
        assert!(event_subject(&ns, &event("a.b", &id)).is_err());
    }

    #[test]
    fn event_ids_must_be_uuids() {
        assert!(event_uuid(&event("t", "not-a-uuid")).is_err());
        assert!(event_uuid(&event("t", "")).is_err());
        let id = Uuid::new_v4();
        assert_eq!(event_uuid(&event("t", &id.to_string())).expect("uuid"), id);
    }
}
