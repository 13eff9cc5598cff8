//! The message outbox and its relay against real PostgreSQL and NATS: a committed message
//! is published once to its subject in the relay's namespace with its id as Nats-Msg-Id, a
//! rolled-back one never, and relaying again (a crash before marking) adds no duplicate.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use cairn_bus::{BusError, MessageRelay, Namespace, StreamKind, message_outbox_insert};
use common::Bus;
use tokio::sync::Notify;

#[tokio::test]
async fn committed_messages_are_published_once_to_their_namespaced_subject() {
    let bus = Bus::new().await;
    let pool = common::database().await;
    let relay = MessageRelay::new(
        pool.clone(),
        bus.js.clone(),
        bus.ns.clone(),
        Arc::new(Notify::new()),
    );
    let subject = Namespace::root().runq("target-1").unwrap();

    let mut tx = pool.begin().await.unwrap();
    message_outbox_insert(&mut tx, &subject, "rolled-back", b"x")
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(relay.relay_once().await.unwrap(), 0);

    let mut tx = pool.begin().await.unwrap();
    assert!(
        message_outbox_insert(&mut tx, &subject, "run-1", b"request")
            .await
            .unwrap()
    );
    // The same id again is a no-op.
    assert!(
        !message_outbox_insert(&mut tx, &subject, "run-1", b"request")
            .await
            .unwrap()
    );
    message_outbox_insert(&mut tx, &bus_deployq(), "job-1", b"job")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(relay.relay_once().await.unwrap(), 2);
    assert_eq!(relay.relay_once().await.unwrap(), 0);
    assert_eq!(bus.count(StreamKind::RunQ).await, 1);
    assert_eq!(bus.count(StreamKind::DeployQ).await, 1);

    let stream = bus.js.get_stream(bus.ns.runq_stream()).await.unwrap();
    let stored = stream.get_raw_message(1).await.unwrap();
    assert_eq!(stored.subject.as_str(), bus.ns.runq("target-1").unwrap());
    assert_eq!(stored.payload.as_ref(), b"request");

    // A relay that crashed after publishing and before marking publishes again: the stream
    // drops the duplicate by its message id.
    sqlx::query("UPDATE message_outbox SET sent_at = NULL")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(relay.relay_once().await.unwrap(), 2);
    assert_eq!(bus.count(StreamKind::RunQ).await, 1);
    assert_eq!(bus.count(StreamKind::DeployQ).await, 1);
    bus.cleanup().await;
}

fn bus_deployq() -> String {
    Namespace::root().deployq()
}

#[tokio::test]
async fn bad_messages_are_refused_at_insert() {
    let pool = common::database().await;
    let mut tx = pool.begin().await.unwrap();
    let err = message_outbox_insert(&mut tx, "cairn.runq.t", "", b"x")
        .await
        .unwrap_err();
    assert!(matches!(err, BusError::InvalidMessage(_)), "{err}");
    let err = message_outbox_insert(&mut tx, "cairn.runq.*", "id", b"x")
        .await
        .unwrap_err();
    assert!(matches!(err, BusError::InvalidMessage(_)), "{err}");
}
