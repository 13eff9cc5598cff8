//! The transactional outbox and its relay against real PostgreSQL and NATS.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use cairn_bus::{BusError, OutboxRelay, StreamKind, outbox_insert};
use cairn_proto::events::Event;
use common::Bus;
use prost::Message;
use sqlx::{Acquire, PgPool};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

fn relay(bus: &Bus, pool: &PgPool) -> OutboxRelay {
    OutboxRelay::new(
        pool.clone(),
        bus.js.clone(),
        bus.ns.clone(),
        Arc::new(Notify::new()),
    )
}

async fn insert_committed(pool: &PgPool, event: &Event) {
    let mut tx = pool.begin().await.unwrap();
    outbox_insert(&mut tx, event).await.unwrap();
    tx.commit().await.unwrap();
}

async fn unsent(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbox WHERE sent_at IS NULL")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn rolled_back_insert_publishes_nothing_committed_is_published_once() {
    let bus = Bus::new().await;
    let pool = common::database().await;
    let relay = relay(&bus, &pool);

    let rolled_back = common::event("t1");
    let mut tx = pool.begin().await.unwrap();
    outbox_insert(&mut tx, &rolled_back).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(relay.relay_once().await.unwrap(), 0);
    assert_eq!(bus.count(StreamKind::Events).await, 0);

    let committed = common::event("t1");
    insert_committed(&pool, &committed).await;
    assert_eq!(relay.relay_once().await.unwrap(), 1);
    assert_eq!(relay.relay_once().await.unwrap(), 0);
    assert_eq!(bus.count(StreamKind::Events).await, 1);
    assert_eq!(unsent(&pool).await, 0);

    let stream = bus.js.get_stream(bus.ns.events_stream()).await.unwrap();
    let stored = stream.get_raw_message(1).await.unwrap();
    assert_eq!(Event::decode(stored.payload).unwrap(), committed);
    bus.cleanup().await;
}

#[tokio::test]
async fn insert_inside_a_larger_transaction_and_twice_is_one_row() {
    let pool = common::database().await;
    let event = common::event("t1");
    let mut conn = pool.acquire().await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    outbox_insert(&mut tx, &event).await.unwrap();
    outbox_insert(&mut tx, &event).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(unsent(&pool).await, 1);

    let mut bad = common::event("t1");
    bad.event_id = "nope".into();
    let mut tx = pool.begin().await.unwrap();
    let err = outbox_insert(&mut tx, &bad).await.unwrap_err();
    assert!(matches!(err, BusError::InvalidEvent(_)), "{err:?}");
    bad = common::event("bad tenant");
    let err = outbox_insert(&mut tx, &bad).await.unwrap_err();
    assert!(matches!(err, BusError::Subject(_)), "{err:?}");
    // An event no service states (no NATS user could publish it) would stick in the outbox.
    bad = common::event("t1");
    bad.aggregate = "run".into();
    let err = outbox_insert(&mut tx, &bad).await.unwrap_err();
    assert!(
        matches!(&err, BusError::InvalidEvent(m) if m.contains("run.run_finished")),
        "{err:?}"
    );
}

#[tokio::test]
async fn relay_after_a_crash_between_publish_and_mark_does_not_duplicate() {
    let bus = Bus::new().await;
    let pool = common::database().await;
    let relay = relay(&bus, &pool);
    let events: Vec<Event> = (0..3).map(|_| common::event("t1")).collect();
    for event in &events {
        insert_committed(&pool, event).await;
    }
    assert_eq!(relay.relay_once().await.unwrap(), 3);
    // The crash: the events reached the stream but the marks were lost.
    sqlx::query("UPDATE outbox SET sent_at = NULL")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(unsent(&pool).await, 3);

    assert_eq!(relay.relay_once().await.unwrap(), 3);
    assert_eq!(unsent(&pool).await, 0);
    assert_eq!(bus.count(StreamKind::Events).await, 3);
    bus.cleanup().await;
}

#[tokio::test]
async fn concurrent_relays_publish_each_event_exactly_once_in_order() {
    let bus = Bus::new().await;
    let pool = common::database().await;
    let mut first = relay(&bus, &pool);
    first.settings.batch_size = 7;
    let mut second = relay(&bus, &pool);
    second.settings.batch_size = 7;
    let events: Vec<Event> = (0..60).map(|_| common::event("t1")).collect();
    for event in &events {
        insert_committed(&pool, event).await;
    }
    let drain = async |relay: &OutboxRelay| {
        let mut total = 0;
        loop {
            let n = relay.relay_once().await.unwrap();
            if n == 0 {
                return total;
            }
            total += n;
        }
    };
    let (a, b) = tokio::join!(drain(&first), drain(&second));
    assert_eq!(a + b, 60);
    assert_eq!(unsent(&pool).await, 0);
    assert_eq!(bus.count(StreamKind::Events).await, 60);
    bus.cleanup().await;
}

#[tokio::test]
async fn spawned_relay_catches_up_wakes_on_notify_and_stops_on_cancel() {
    let bus = Bus::new().await;
    let pool = common::database().await;
    // Written before the relay starts: published by the catch-up.
    insert_committed(&pool, &common::event("t1")).await;

    let notify = Arc::new(Notify::new());
    let mut relay = relay(&bus, &pool);
    relay.notify = notify.clone();
    // Far longer than the test waits: only the catch-up and the notification can publish.
    relay.settings.poll_interval = Duration::from_secs(3600);
    let cancel = CancellationToken::new();
    let task = relay.spawn(cancel.clone());

    common::eventually("the catch-up published the first event", async || {
        unsent(&pool).await == 0
    })
    .await;
    insert_committed(&pool, &common::event("t1")).await;
    notify.notify_one();
    common::eventually(
        "the notified relay published the second event",
        async || unsent(&pool).await == 0,
    )
    .await;
    assert_eq!(bus.count(StreamKind::Events).await, 2);

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    bus.cleanup().await;
}

#[tokio::test]
async fn a_lingering_relay_publishes_the_commits_of_its_linger_in_one_batch() {
    let bus = Bus::new().await;
    let pool = common::database().await;
    let notify = Arc::new(Notify::new());
    let mut relay = relay(&bus, &pool);
    relay.notify = notify.clone();
    relay.settings.poll_interval = Duration::from_secs(3600);
    // Far longer than five commits take: every wake-up below falls inside the first one's
    // linger.
    relay.settings.linger = Duration::from_secs(2);
    // One event before it starts: once its catch-up published it, the relay waits to be
    // woken.
    insert_committed(&pool, &common::event("t1")).await;
    let cancel = CancellationToken::new();
    let task = relay.spawn(cancel.clone());
    common::eventually("the catch-up published the first event", async || {
        unsent(&pool).await == 0
    })
    .await;

    for _ in 0..5 {
        insert_committed(&pool, &common::event("t1")).await;
        notify.notify_one();
    }
    common::eventually("the relay published all five", async || {
        unsent(&pool).await == 0
    })
    .await;
    assert_eq!(bus.count(StreamKind::Events).await, 6);
    // `sent_at` is the marking transaction's time: the catch-up's, then one for the five.
    let batches = async || -> i64 {
        sqlx::query_scalar("SELECT count(DISTINCT sent_at) FROM outbox")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(
        batches().await,
        2,
        "five commits woke the relay into one batch"
    );

    // A commit after that batch still wakes it (after its linger).
    insert_committed(&pool, &common::event("t1")).await;
    notify.notify_one();
    common::eventually("the relay published the last one", async || {
        unsent(&pool).await == 0
    })
    .await;
    assert_eq!(bus.count(StreamKind::Events).await, 7);
    assert_eq!(batches().await, 3);

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    bus.cleanup().await;
}

#[tokio::test]
async fn relay_retries_after_nats_errors_and_prunes_sent_rows() {
    // No streams yet: publishing fails and rows stay unsent.
    let bus = Bus::without_streams().await;
    let pool = common::database().await;
    let mut relay = relay(&bus, &pool);
    relay.settings.retention = Duration::ZERO;
    insert_committed(&pool, &common::event("t1")).await;
    let err = relay.relay_once().await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(unsent(&pool).await, 1);

    cairn_bus::setup_streams(&bus.js, &bus.ns, &cairn_bus::StreamSettings::default())
        .await
        .unwrap();
    assert_eq!(relay.relay_once().await.unwrap(), 1);
    insert_committed(&pool, &common::event("t1")).await;
    // One sent row (older than the zero retention) is pruned, the unsent one stays.
    assert_eq!(relay.prune_sent().await.unwrap(), 1);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 1);
    assert_eq!(unsent(&pool).await, 1);
    bus.cleanup().await;
}

/// A relay whose connection went silent (its server vanished without FIN or RST: nothing to
/// retransmit, no error ever) gives the batch up after its time limit instead of waiting for
/// good, and its next batch, on a new connection, publishes what the silent one could not.
#[tokio::test]
async fn a_relay_gives_up_a_connection_gone_silent_and_publishes_on_a_new_one() {
    let bus = Bus::new().await;
    let (pool, url) = common::database_and_url().await;
    let (proxy, proxied) = common::proxied_pool(&url).await;
    let mut relay = relay(&bus, &proxied);
    relay.settings.time_limit = Duration::from_millis(500);
    relay.settings.poll_interval = Duration::from_millis(50);
    // The relay's pool keeps the connection of this batch open for the next.
    assert_eq!(relay.relay_once().await.unwrap(), 0);
    common::stall_once_idle(&proxy, &proxied).await;
    let event = common::event("t1");
    insert_committed(&pool, &event).await;

    let given_up = tokio::time::timeout(Duration::from_secs(30), relay.relay_once())
        .await
        .expect("the relay still waits on its silent connection");
    match given_up {
        Err(BusError::Db { ref source, .. }) if cairn_db::is_timed_out(source) => {}
        other => panic!("expected the batch to be given up as timed out, got {other:?}"),
    }
    assert!(given_up.unwrap_err().is_transient());
    assert_eq!(bus.count(StreamKind::Events).await, 0);
    assert_eq!(unsent(&pool).await, 1);

    let cancel = CancellationToken::new();
    let task = relay.spawn(cancel.clone());
    common::eventually("the event was published on a new connection", async || {
        unsent(&pool).await == 0
    })
    .await;
    cancel.cancel();
    task.await.unwrap();
    assert_eq!(bus.count(StreamKind::Events).await, 1);
    let stream = bus.js.get_stream(bus.ns.events_stream()).await.unwrap();
    let stored = stream.get_raw_message(1).await.unwrap();
    assert_eq!(Event::decode(stored.payload).unwrap(), event);
    bus.cleanup().await;
}
