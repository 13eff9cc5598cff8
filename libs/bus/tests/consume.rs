//! Idempotent durable consumers and work-queue semantics against real NATS and PostgreSQL.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use cairn_bus::{
    BusError, Consumer, ConsumerOptions, StreamKind, decode, publish_event, publish_msg,
};
use cairn_db::IsRetryable;
use cairn_proto::events::{Event, RunAdmitted};
use common::Bus;
use sqlx::{PgConnection, PgPool};
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
enum HandlerError {
    #[error("database")]
    Db(#[from] sqlx::Error),
    #[error("injected failure")]
    Injected,
}

impl IsRetryable for HandlerError {
    fn is_retryable(&self) -> bool {
        match self {
            HandlerError::Db(err) => cairn_db::is_retryable_sqlx(err),
            HandlerError::Injected => false,
        }
    }
}

fn fast_options() -> ConsumerOptions {
    ConsumerOptions {
        retry_delay: Duration::from_millis(50),
        max_retry_delay: Duration::from_millis(200),
        reconnect_delay: Duration::from_millis(100),
        ..ConsumerOptions::new(Duration::from_secs(10))
    }
}

async fn events_consumer(bus: &Bus, durable: &str) -> Consumer {
    let filter = bus.ns.events_filter(None, None, None).unwrap();
    Consumer::with_options(
        &bus.js,
        &bus.ns.events_stream(),
        durable,
        &filter,
        fast_options(),
    )
    .await
    .unwrap()
}

/// The event's id as the handler writes it.
fn id(e: &Event) -> uuid::Uuid {
    uuid::Uuid::parse_str(&e.event_id).unwrap()
}

/// How many times each of `events` was handled (rows in `handled`), in their order.
async fn times_handled(pool: &PgPool, events: &[&Event]) -> Vec<usize> {
    let handled: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT event_id FROM handled")
        .fetch_all(pool)
        .await
        .unwrap();
    events
        .iter()
        .map(|e| handled.iter().filter(|h| **h == id(e)).count())
        .collect()
}

async fn handled_rows(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM handled")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Runs `consumer` in a spawned task (which also proves its future is `Send`); the handler
/// counts invocations, writes a row in the event's transaction and fails while
/// `failures_left` > 0 (after writing, so the write must be rolled back).
fn spawn_counting(
    consumer: Consumer,
    pool: PgPool,
    name: &'static str,
    calls: Arc<AtomicUsize>,
    failures_left: Arc<AtomicUsize>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<Result<(), BusError>> {
    tokio::spawn(async move {
        consumer
            .run(
                &pool,
                name,
                async move |conn: &mut PgConnection, event: Event| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let id = uuid::Uuid::parse_str(&event.event_id).unwrap();
                    sqlx::query("INSERT INTO handled (event_id, note) VALUES ($1, $2)")
                        .bind(id)
                        .bind(&event.event_type)
                        .execute(&mut *conn)
                        .await?;
                    let fail = failures_left
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok();
                    if fail {
                        return Err(HandlerError::Injected);
                    }
                    Ok(())
                },
                cancel,
            )
            .await
    })
}

#[tokio::test]
async fn duplicate_and_redelivered_events_are_handled_once() {
    let bus = Bus::new().await;
    let pool = common::database().await;
    let event = common::event("t1");
    publish_event(&bus.js, &bus.ns, &event).await.unwrap();
    // The same event again under another message id: a second delivery of it.
    let subject = cairn_bus::event_subject(&bus.ns, &event).unwrap();
    publish_msg(&bus.js, &subject, "another-id", &event)
        .await
        .unwrap();
    let other = common::event("t2");
    publish_event(&bus.js, &bus.ns, &other).await.unwrap();
    assert_eq!(bus.count(StreamKind::Events).await, 3);

    let calls = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let task = spawn_counting(
        events_consumer(&bus, "audit").await,
        pool.clone(),
        "audit",
        calls.clone(),
        Arc::new(AtomicUsize::new(0)),
        cancel.clone(),
    );
    common::eventually("both events were handled", async || {
        handled_rows(&pool).await == 2
    })
    .await;
    let consumer_info = async || {
        let stream = bus.js.get_stream(bus.ns.events_stream()).await.unwrap();
        stream.consumer_info("audit").await.unwrap()
    };
    common::eventually("all three messages were acknowledged", async || {
        let info = consumer_info().await;
        info.ack_floor.stream_sequence == 3 && info.num_ack_pending == 0
    })
    .await;
    cancel.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // A redelivery from scratch (a new durable consumer reading the whole stream under the
    // same processed_events name) hands over nothing new.
    let cancel = CancellationToken::new();
    let task = spawn_counting(
        events_consumer(&bus, "audit-replay").await,
        pool.clone(),
        "audit",
        calls.clone(),
        Arc::new(AtomicUsize::new(0)),
        cancel.clone(),
    );
    common::eventually("the replay was acknowledged", async || {
        let stream = bus.js.get_stream(bus.ns.events_stream()).await.unwrap();
        let info = stream.consumer_info("audit-replay").await.unwrap();
        info.ack_floor.stream_sequence == 3 && info.num_ack_pending == 0
    })
    .await;
    cancel.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(handled_rows(&pool).await, 2);

    // Another consumer name keeps its own idempotency keys.
    let processed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM processed_events WHERE consumer = 'audit'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(processed, 2);
    bus.cleanup().await;
}

#[tokio::test]
async fn failing_handler_is_rolled_back_and_redelivered() {
    let bus = Bus::new().await;
    let pool = common::database().await;
    publish_event(&bus.js, &bus.ns, &common::event("t1"))
        .await
        .unwrap();

    let calls = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let task = spawn_counting(
        events_consumer(&bus, "projection").await,
        pool.clone(),
        "projection",
        calls.clone(),
        Arc::new(AtomicUsize::new(2)),
        cancel.clone(),
    );
    common::eventually("the event was handled after two failures", async || {
        calls.load(Ordering::SeqCst) >= 3 && handled_rows(&pool).await == 1
    })
    .await;
    common::eventually("the event was acknowledged", async || {
        let stream = bus.js.get_stream(bus.ns.events_stream()).await.unwrap();
        let info = stream.consumer_info("projection").await.unwrap();
        info.ack_floor.stream_sequence == 1 && info.num_ack_pending == 0
    })
    .await;
    cancel.cancel();
    task.await.unwrap().unwrap();
    // The failed attempts' writes (handler row and processed_events key) were rolled back.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(handled_rows(&pool).await, 1);
    bus.cleanup().await;
}

#[tokio::test]
async fn undecodable_messages_are_dropped_without_calling_the_handler() {
    let bus = Bus::new().await;
    let pool = common::database().await;
    let subject = bus
        .ns
        .events_subject("t1", "state", "run_finished")
        .unwrap();
    // A valid protobuf, but its event id is not a UUID.
    let mut bad = common::event("t1");
    bad.event_id = "not-a-uuid".into();
    publish_msg(&bus.js, &subject, "bad-1", &bad).await.unwrap();
    let good = common::event("t1");
    publish_event(&bus.js, &bus.ns, &good).await.unwrap();

    let calls = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let task = spawn_counting(
        events_consumer(&bus, "strict").await,
        pool.clone(),
        "strict",
        calls.clone(),
        Arc::new(AtomicUsize::new(0)),
        cancel.clone(),
    );
    common::eventually(
        "the good event was handled and the bad one terminated",
        async || {
            let stream = bus.js.get_stream(bus.ns.events_stream()).await.unwrap();
            let info = stream.consumer_info("strict").await.unwrap();
            handled_rows(&pool).await == 1 && info.num_ack_pending == 0
        },
    )
    .await;
    cancel.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    bus.cleanup().await;
}

async fn runq_consumer(bus: &Bus, target: &str) -> Result<Consumer, BusError> {
    Consumer::with_options(
        &bus.js,
        &bus.ns.runq_stream(),
        &format!("runner-{target}"),
        &bus.ns.runq(target).unwrap(),
        fast_options(),
    )
    .await
}

fn request(run_id: &str) -> RunAdmitted {
    RunAdmitted {
        run_id: run_id.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn runq_is_a_work_queue_with_one_consumer_per_target() {
    let bus = Bus::new().await;
    let a = runq_consumer(&bus, "target-a").await.unwrap();
    let b = runq_consumer(&bus, "target-b").await.unwrap();
    // Binding again to the same durable is fine; a second consumer on the same target's
    // subject is refused by the work-queue stream.
    runq_consumer(&bus, "target-a").await.unwrap();
    let duplicate = Consumer::new(
        &bus.js,
        &bus.ns.runq_stream(),
        "intruder",
        &bus.ns.runq("target-a").unwrap(),
        Duration::from_secs(10),
    )
    .await;
    assert!(
        matches!(duplicate, Err(BusError::Consumer { .. })),
        "{:?}",
        duplicate.err()
    );

    for (target, run) in [
        ("target-a", "run-1"),
        ("target-b", "run-2"),
        ("target-a", "run-3"),
    ] {
        let subject = bus.ns.runq(target).unwrap();
        publish_msg(&bus.js, &subject, run, &request(run))
            .await
            .unwrap();
    }
    assert_eq!(bus.count(StreamKind::RunQ).await, 3);

    let seen = |consumer: Consumer, expected: usize| {
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        tokio::spawn(async move {
            // Handlers own their captures (`async move`), so the future stays `Send`.
            let runs = Arc::new(std::sync::Mutex::new(Vec::new()));
            let seen = runs.clone();
            consumer
                .run_raw(
                    async move |msg: &jetstream::Message| {
                        let req: RunAdmitted = decode(msg)?;
                        let mut runs = seen.lock().unwrap();
                        runs.push(req.run_id);
                        if runs.len() == expected {
                            stop.cancel();
                        }
                        Ok::<(), BusError>(())
                    },
                    cancel,
                )
                .await
                .unwrap();
            // The handler (and its clone of the Arc) is gone once run_raw returned.
            Arc::try_unwrap(runs).unwrap().into_inner().unwrap()
        })
    };
    let (runs_a, runs_b) = tokio::join!(seen(a, 2), seen(b, 1));
    assert_eq!(runs_a.unwrap(), vec!["run-1", "run-3"]);
    assert_eq!(runs_b.unwrap(), vec!["run-2"]);
    // Acknowledged work is removed from the queue.
    common::eventually("the queue is empty", async || {
        bus.count(StreamKind::RunQ).await == 0
    })
    .await;
    bus.cleanup().await;
}

#[tokio::test]
async fn raw_handler_errors_are_redelivered() {
    let bus = Bus::new().await;
    let consumer = Consumer::with_options(
        &bus.js,
        &bus.ns.deployq_stream(),
        "deployments",
        &bus.ns.deployq(),
        fast_options(),
    )
    .await
    .unwrap();
    publish_msg(&bus.js, &bus.ns.deployq(), "dep-1", &request("dep-1"))
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let mut attempts = 0;
    consumer
        .run_raw(
            async |msg: &jetstream::Message| {
                attempts += 1;
                if attempts == 1 {
                    return Err(BusError::InvalidMessage("injected".into()));
                }
                assert_eq!(msg.info().unwrap().delivered, 2);
                stop.cancel();
                Ok(())
            },
            cancel,
        )
        .await
        .unwrap();
    assert_eq!(attempts, 2);
    common::eventually("the job left the queue", async || {
        bus.count(StreamKind::DeployQ).await == 0
    })
    .await;
    bus.cleanup().await;
}

/// Runs `consumer` (batches of at most 3) beside `publish` until a batch was handled; the
/// sizes of the batches handled by then.
async fn first_batches(consumer: Consumer, publish: impl Future<Output = ()>) -> Vec<usize> {
    let batches = Mutex::new(Vec::new());
    let cancel = CancellationToken::new();
    let handle = consumer.run_raw_batched(
        3,
        async |msgs: &[jetstream::Message]| {
            batches.lock().unwrap().push(msgs.len());
            Ok::<_, BusError>(())
        },
        cancel.clone(),
    );
    let drive = async {
        publish.await;
        common::eventually("a batch was handled", async || {
            !batches.lock().unwrap().is_empty()
        })
        .await;
        cancel.cancel();
    };
    let (ran, ()) = tokio::join!(handle, drive);
    ran.unwrap();
    batches.into_inner().unwrap()
}

/// A batched consumer with a linger holds a batch open for more messages after its first,
/// and hands it over as soon as it is full; one with a short linger hands over what it has
/// when the linger ends.
#[tokio::test]
async fn a_batch_waits_its_linger_for_more_messages_but_not_once_full() {
    let bus = Bus::new().await;
    let subject = bus.ns.deployq();
    let consumer = async |durable: &str, linger: Duration| {
        Consumer::with_options(
            &bus.js,
            &bus.ns.deployq_stream(),
            durable,
            &subject,
            ConsumerOptions {
                linger,
                ..fast_options()
            },
        )
        .await
        .unwrap()
    };
    let stream = bus.js.get_stream(bus.ns.deployq_stream()).await.unwrap();

    // A linger far longer than the test: the first message waits for two more, and the
    // full batch goes at once.
    let publish = async {
        publish_msg(&bus.js, &subject, "job-1", &request("job-1"))
            .await
            .unwrap();
        common::eventually("the first message was delivered", async || {
            stream
                .clone()
                .consumer_info("long")
                .await
                .unwrap()
                .num_ack_pending
                == 1
        })
        .await;
        for id in ["job-2", "job-3"] {
            publish_msg(&bus.js, &subject, id, &request(id))
                .await
                .unwrap();
        }
    };
    let batches = first_batches(consumer("long", Duration::from_secs(3600)).await, publish).await;
    assert_eq!(batches, vec![3], "one batch of all three");
    // The acks were sent before the consumer stopped, but the server handles them apart
    // from the request that deletes it: wait until they took the batch off the queue.
    common::eventually("the batch's acks took it off the queue", async || {
        bus.count(StreamKind::DeployQ).await == 0
    })
    .await;

    // A short linger: one message alone is handled once it ends. (The queue takes one
    // consumer at a time.)
    stream.delete_consumer("long").await.unwrap();
    let publish = async {
        publish_msg(&bus.js, &subject, "job-4", &request("job-4"))
            .await
            .unwrap();
    };
    let batches = first_batches(consumer("short", Duration::from_millis(200)).await, publish).await;
    assert_eq!(batches, vec![1]);
    bus.cleanup().await;
}

/// A batch's events are recorded and handled in one transaction, each once (an event twice
/// in the batch, and one processed before, are not handed over again); when one fails, the
/// batch is rolled back and its events are handled one at a time, so only the failing one
/// is redelivered.
#[tokio::test]
async fn a_batch_of_events_is_handled_once_each_and_a_failure_falls_back_to_one_at_a_time() {
    let bus = Bus::new().await;
    let pool = common::database().await;
    let (a, b, c) = (
        common::event("t1"),
        common::event("t2"),
        common::event("t3"),
    );
    for event in [&a, &b, &c] {
        publish_event(&bus.js, &bus.ns, event).await.unwrap();
    }
    let subject = cairn_bus::event_subject(&bus.ns, &a).unwrap();
    publish_msg(&bus.js, &subject, "a-again", &a).await.unwrap();
    sqlx::query("INSERT INTO processed_events (consumer, event_id) VALUES ('batched', $1)")
        .bind(id(&b))
        .execute(&pool)
        .await
        .unwrap();

    // Four messages fill the batch at once; C's redelivery alone waits out the linger.
    let consumer = Consumer::with_options(
        &bus.js,
        &bus.ns.events_stream(),
        "batched",
        &bus.ns.events_filter(None, None, None).unwrap(),
        ConsumerOptions {
            linger: Duration::from_secs(2),
            ..fast_options()
        },
    )
    .await
    .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c_failures = Arc::new(AtomicUsize::new(2));
    let cancel = CancellationToken::new();
    let task = {
        let (pool, calls, cancel) = (pool.clone(), calls.clone(), cancel.clone());
        let c_id = c.event_id.clone();
        tokio::spawn(async move {
            consumer
                .run_batched(
                    &pool,
                    "batched",
                    4,
                    async move |conn: &mut PgConnection, event: Event| {
                        calls.fetch_add(1, Ordering::SeqCst);
                        sqlx::query("INSERT INTO handled (event_id, note) VALUES ($1, $2)")
                            .bind(uuid::Uuid::parse_str(&event.event_id).unwrap())
                            .bind(&event.event_type)
                            .execute(&mut *conn)
                            .await?;
                        let fail = event.event_id == c_id
                            && c_failures
                                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                                    n.checked_sub(1)
                                })
                                .is_ok();
                        if fail {
                            return Err(HandlerError::Injected);
                        }
                        Ok(())
                    },
                    cancel,
                )
                .await
        })
    };
    common::eventually("every message was acknowledged", async || {
        let stream = bus.js.get_stream(bus.ns.events_stream()).await.unwrap();
        let info = stream.consumer_info("batched").await.unwrap();
        info.ack_floor.stream_sequence == 4 && info.num_ack_pending == 0
    })
    .await;
    cancel.cancel();
    task.await.unwrap().unwrap();

    assert_eq!(times_handled(&pool, &[&a, &b, &c]).await, [1, 0, 1]);
    // The batch (A, then C failing), one at a time (A, then C failing again), then C
    // redelivered alone.
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    let processed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM processed_events WHERE consumer = 'batched'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(processed, 3);
    bus.cleanup().await;
}

#[tokio::test]
async fn consumer_settings_are_validated() {
    let bus = Bus::new().await;
    let stream = bus.ns.events_stream();
    for (durable, filter) in [("a.b", "x.y"), ("ok", ""), ("ok", "a..b"), ("ok", "a b")] {
        let result = Consumer::new(&bus.js, &stream, durable, filter, Duration::from_secs(5)).await;
        let err = result.err().unwrap();
        assert!(!err.is_transient(), "{err:?}");
    }
    // Binding to an existing durable with another ack wait updates it.
    let filter = bus.ns.events_filter(Some("t1"), None, None).unwrap();
    Consumer::new(&bus.js, &stream, "upd", &filter, Duration::from_secs(5))
        .await
        .unwrap();
    Consumer::new(&bus.js, &stream, "upd", &filter, Duration::from_secs(7))
        .await
        .unwrap();
    let handle = bus.js.get_stream(&stream).await.unwrap();
    let info = handle.consumer_info("upd").await.unwrap();
    assert_eq!(info.config.ack_wait, Duration::from_secs(7));
    assert_eq!(info.config.filter_subject, filter);
    bus.cleanup().await;
}

/// A consumer whose `ack_wait` (and so the bound on each message's handling) is one second.
async fn acking_within_a_second(bus: &Bus, stream: &str, durable: &str, filter: &str) -> Consumer {
    Consumer::with_options(
        &bus.js,
        stream,
        durable,
        filter,
        ConsumerOptions {
            ack_wait: Duration::from_secs(1),
            ..fast_options()
        },
    )
    .await
    .unwrap()
}

/// An event whose transaction waits on a connection gone silent (its server vanished without
/// FIN or RST) is given up after the consumer's `ack_wait` and redelivered, then handled on
/// a new connection, once; the consumer does not wait on the silent one for good.
#[tokio::test]
async fn an_event_stuck_on_a_connection_gone_silent_is_given_up_and_handled_on_a_new_one() {
    let bus = Bus::new().await;
    let (pool, url) = common::database_and_url().await;
    let (proxy, proxied) = common::proxied_pool(&url).await;
    let filter = bus.ns.events_filter(None, None, None).unwrap();
    let consumer = acking_within_a_second(&bus, &bus.ns.events_stream(), "silent", &filter).await;
    let cancel = CancellationToken::new();
    let task = spawn_counting(
        consumer,
        proxied.clone(),
        "silent",
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        cancel.clone(),
    );
    let first = common::event("t1");
    publish_event(&bus.js, &bus.ns, &first).await.unwrap();
    common::eventually("the first event was handled", async || {
        handled_rows(&pool).await == 1
    })
    .await;
    // The consumer's pool keeps that connection for the next event.
    common::stall_once_idle(&proxy, &proxied).await;
    let second = common::event("t1");
    publish_event(&bus.js, &bus.ns, &second).await.unwrap();
    common::eventually(
        "the second event was handled on a new connection",
        async || handled_rows(&pool).await == 2,
    )
    .await;
    cancel.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(times_handled(&pool, &[&first, &second]).await, [1, 1]);
    bus.cleanup().await;
}

/// A raw consumer (one message at a time, or in batches) whose handler writes each message's
/// event through `proxied`, into `handled`.
fn spawn_raw_writer(
    consumer: Consumer,
    proxied: PgPool,
    batched: bool,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<Result<(), BusError>> {
    async fn write(pool: &PgPool, msg: &jetstream::Message) -> Result<(), HandlerError> {
        let event: Event = decode(msg).map_err(|_| HandlerError::Injected)?;
        sqlx::query("INSERT INTO handled (event_id, note) VALUES ($1, 'raw')")
            .bind(id(&event))
            .execute(pool)
            .await?;
        Ok(())
    }
    tokio::spawn(async move {
        if batched {
            consumer
                .run_raw_batched(
                    4,
                    async move |msgs: &[jetstream::Message]| {
                        for msg in msgs {
                            write(&proxied, msg).await?;
                        }
                        Ok::<(), HandlerError>(())
                    },
                    cancel,
                )
                .await
        } else {
            consumer
                .run_raw(
                    async move |msg: &jetstream::Message| write(&proxied, msg).await,
                    cancel,
                )
                .await
        }
    })
}

/// A raw handler waiting on a connection gone silent (its server vanished without FIN or
/// RST) is given up after the consumer's `ack_wait` and its message redelivered, then
/// handled on a new connection, once: the consumer does not wait on the silent one for good.
async fn raw_handler_stuck_on_a_silent_connection(batched: bool) {
    let bus = Bus::new().await;
    let (pool, url) = common::database_and_url().await;
    let (proxy, proxied) = common::proxied_pool(&url).await;
    let consumer = acking_within_a_second(
        &bus,
        &bus.ns.deployq_stream(),
        "silent-raw",
        &bus.ns.deployq(),
    )
    .await;
    let cancel = CancellationToken::new();
    let task = spawn_raw_writer(consumer, proxied.clone(), batched, cancel.clone());
    let first = common::event("t1");
    publish_msg(&bus.js, &bus.ns.deployq(), &first.event_id, &first)
        .await
        .unwrap();
    common::eventually("the first message was handled", async || {
        handled_rows(&pool).await == 1
    })
    .await;
    common::stall_once_idle(&proxy, &proxied).await;
    let second = common::event("t1");
    publish_msg(&bus.js, &bus.ns.deployq(), &second.event_id, &second)
        .await
        .unwrap();
    common::eventually(
        "the second message was handled on a new connection",
        async || handled_rows(&pool).await == 2,
    )
    .await;
    common::eventually("both messages were acknowledged", async || {
        bus.count(StreamKind::DeployQ).await == 0
    })
    .await;
    cancel.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(times_handled(&pool, &[&first, &second]).await, [1, 1]);
    bus.cleanup().await;
}

#[tokio::test]
async fn a_raw_handler_stuck_on_a_connection_gone_silent_is_given_up_and_its_message_handled_on_a_new_one()
 {
    raw_handler_stuck_on_a_silent_connection(false).await;
}

#[tokio::test]
async fn a_raw_batch_stuck_on_a_connection_gone_silent_is_given_up_and_handled_on_a_new_one() {
    raw_handler_stuck_on_a_silent_connection(true).await;
}
