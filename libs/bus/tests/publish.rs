//! Publishing with server-side deduplication against a real NATS server.
#![allow(clippy::unwrap_used)]

mod common;

use cairn_bus::{BusError, ErrorClass, StreamKind, publish_event, publish_msg};
use cairn_proto::events::{Event, RunFinished};
use common::Bus;
use prost::Message;

#[tokio::test]
async fn same_event_id_twice_is_stored_once() {
    let bus = Bus::new().await;
    let event = common::event("tenant-a");
    publish_event(&bus.js, &bus.ns, &event).await.unwrap();
    publish_event(&bus.js, &bus.ns, &event).await.unwrap();
    assert_eq!(bus.count(StreamKind::Events).await, 1);

    publish_event(&bus.js, &bus.ns, &common::event("tenant-a"))
        .await
        .unwrap();
    assert_eq!(bus.count(StreamKind::Events).await, 2);

    // The stored message is the event, on its tenant/aggregate/event subject.
    let stream = bus.js.get_stream(bus.ns.events_stream()).await.unwrap();
    let stored = stream.get_raw_message(1).await.unwrap();
    assert_eq!(
        stored.subject.as_str(),
        format!(
            "{}.cairn.events.tenant-a.state.run_finished",
            bus.ns.prefix().unwrap()
        )
    );
    assert_eq!(Event::decode(stored.payload).unwrap(), event);
    bus.cleanup().await;
}

#[tokio::test]
async fn events_without_tenant_use_the_placeholder_token() {
    let bus = Bus::new().await;
    let event = common::event("");
    publish_event(&bus.js, &bus.ns, &event).await.unwrap();
    let stream = bus.js.get_stream(bus.ns.events_stream()).await.unwrap();
    let stored = stream.get_raw_message(1).await.unwrap();
    assert!(
        stored
            .subject
            .as_str()
            .ends_with(".cairn.events._.state.run_finished")
    );
    bus.cleanup().await;
}

#[tokio::test]
async fn invalid_events_are_refused_as_permanent() {
    let bus = Bus::new().await;
    let mut bad_id = common::event("t");
    bad_id.event_id = "not-a-uuid".into();
    let err = publish_event(&bus.js, &bus.ns, &bad_id).await.unwrap_err();
    assert!(matches!(err, BusError::InvalidEvent(_)), "{err:?}");
    assert_eq!(err.class(), ErrorClass::Permanent);

    let mut bad_subject = common::event("t");
    bad_subject.event_type = "finished.twice".into();
    let err = publish_event(&bus.js, &bus.ns, &bad_subject)
        .await
        .unwrap_err();
    assert!(matches!(err, BusError::Subject(_)), "{err:?}");
    assert_eq!(bus.count(StreamKind::Events).await, 0);
    bus.cleanup().await;
}

#[tokio::test]
async fn publish_msg_dedups_by_the_given_id() {
    let bus = Bus::new().await;
    let subject = bus.ns.runres("run-1").unwrap();
    let result = RunFinished {
        run_id: "run-1".into(),
        attempt: 1,
        ..Default::default()
    };
    publish_msg(&bus.js, &subject, "run-1.1", &result)
        .await
        .unwrap();
    publish_msg(&bus.js, &subject, "run-1.1", &result)
        .await
        .unwrap();
    publish_msg(&bus.js, &subject, "run-1.2", &result)
        .await
        .unwrap();
    assert_eq!(bus.count(StreamKind::RunRes).await, 2);

    let err = publish_msg(&bus.js, &subject, "", &result)
        .await
        .unwrap_err();
    assert!(matches!(err, BusError::InvalidMessage(_)), "{err:?}");
    bus.cleanup().await;
}

#[tokio::test]
async fn publishing_where_no_stream_listens_is_transient() {
    // Streams are not created in this namespace: the ack never comes.
    let bus = Bus::without_streams().await;
    let err = publish_event(&bus.js, &bus.ns, &common::event("t"))
        .await
        .unwrap_err();
    assert!(matches!(err, BusError::Publish { .. }), "{err:?}");
    assert!(err.is_transient(), "{err:?}");
}
