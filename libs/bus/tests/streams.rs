//! setup_streams against a real NATS server: creation, idempotence, concurrency, updates.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use async_nats::jetstream::stream::{RetentionPolicy, StorageType};
use cairn_bus::{StreamKind, StreamSettings, publish_msg, setup_streams};
use common::Bus;

#[tokio::test]
async fn setup_streams_creates_all_five_and_is_idempotent() {
    let bus = Bus::without_streams().await;
    let settings = StreamSettings::default();
    setup_streams(&bus.js, &bus.ns, &settings).await.unwrap();
    setup_streams(&bus.js, &bus.ns, &settings).await.unwrap();

    for kind in StreamKind::ALL {
        let mut stream = bus.js.get_stream(bus.ns.stream_name(kind)).await.unwrap();
        let config = stream.info().await.unwrap().config.clone();
        assert_eq!(config.subjects, vec![bus.ns.stream_subject(kind)]);
        assert_eq!(config.storage, StorageType::File);
        assert_eq!(config.duplicate_window, Duration::from_secs(120));
        let expected = match kind {
            StreamKind::RunQ | StreamKind::DeployQ => RetentionPolicy::WorkQueue,
            _ => RetentionPolicy::Limits,
        };
        assert_eq!(config.retention, expected, "{kind}");
        if kind == StreamKind::RunLog {
            assert_eq!(config.max_age, Duration::from_secs(3600));
        }
    }
    let prefix = bus.ns.prefix().unwrap().to_ascii_uppercase();
    assert_eq!(bus.ns.events_stream(), format!("{prefix}_CAIRN_EVENTS"));
    bus.cleanup().await;
}

#[tokio::test]
async fn setup_streams_from_two_callers_at_once() {
    let bus = Bus::without_streams().await;
    let settings = StreamSettings::default();
    let other = async_nats::jetstream::new(
        async_nats::connect(common::env("CAIRN_TEST_NATS_URL"))
            .await
            .unwrap(),
    );
    let (a, b) = tokio::join!(
        setup_streams(&bus.js, &bus.ns, &settings),
        setup_streams(&other, &bus.ns, &settings),
    );
    a.unwrap();
    b.unwrap();
    for kind in StreamKind::ALL {
        bus.js.get_stream(bus.ns.stream_name(kind)).await.unwrap();
    }
    bus.cleanup().await;
}

#[tokio::test]
async fn changed_settings_update_existing_streams() {
    let bus = Bus::without_streams().await;
    setup_streams(&bus.js, &bus.ns, &StreamSettings::default())
        .await
        .unwrap();
    let changed = StreamSettings {
        duplicate_window: Duration::from_secs(30),
        runlog_max_age: Duration::from_secs(600),
        ..StreamSettings::default()
    };
    setup_streams(&bus.js, &bus.ns, &changed).await.unwrap();
    let mut runlog = bus.js.get_stream(bus.ns.runlog_stream()).await.unwrap();
    let config = runlog.info().await.unwrap().config.clone();
    assert_eq!(config.max_age, Duration::from_secs(600));
    assert_eq!(config.duplicate_window, Duration::from_secs(30));
    bus.cleanup().await;
}

/// A run queue made before validation requests had a subject of their own
/// (`cairn.runq.*`) is widened to `cairn.runq.>`; its messages stay.
#[tokio::test]
async fn an_old_run_queue_gets_the_validation_subjects() {
    let bus = Bus::without_streams().await;
    let settings = StreamSettings::default();
    let mut old = cairn_bus::stream_config(&bus.ns, &settings, StreamKind::RunQ);
    old.subjects = vec![format!("{}.cairn.runq.*", bus.ns.prefix().unwrap())];
    bus.js.create_stream(old).await.unwrap();
    let msg = cairn_proto::events::Event::default();
    let run = bus.ns.runq("tgt").unwrap();
    let validate = bus.ns.runq_validate("tgt").unwrap();
    publish_msg(&bus.js, &run, "run-1", &msg).await.unwrap();
    assert!(
        publish_msg(&bus.js, &validate, "v-1", &msg).await.is_err(),
        "no stream captures a validation request yet"
    );

    setup_streams(&bus.js, &bus.ns, &settings).await.unwrap();
    setup_streams(&bus.js, &bus.ns, &settings).await.unwrap();
    let mut stream = bus.js.get_stream(bus.ns.runq_stream()).await.unwrap();
    let config = stream.info().await.unwrap().config.clone();
    assert_eq!(
        config.subjects,
        vec![bus.ns.stream_subject(StreamKind::RunQ)]
    );
    assert_eq!(bus.count(StreamKind::RunQ).await, 1);
    publish_msg(&bus.js, &validate, "v-2", &msg).await.unwrap();
    assert_eq!(bus.count(StreamKind::RunQ).await, 2);
    bus.cleanup().await;
}
