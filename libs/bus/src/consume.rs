//! Durable pull consumers with one filter subject each (NATS 2.9), and the idempotent event
//! loop: every event is handled inside a database transaction that first records
//! `(consumer, event_id)` in `processed_events`, so a redelivered event is skipped, and the
//! message is acknowledged only after that transaction committed.

use std::time::Duration;

use async_nats::jetstream::consumer::pull::{self, MessagesErrorKind};
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::{self, AckKind};
use cairn_db::IsRetryable;
use cairn_proto::events::Event;
use futures::StreamExt;
use prost::Message;
use sqlx::{PgConnection, PgPool};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::error::{BusError, Chain};
use crate::publish::event_uuid;
use crate::subjects::validate_token;

/// How a durable consumer is created and how failures are retried.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerOptions {
    /// How long the server waits for an acknowledgement before redelivering; also how long
    /// [`Consumer::run`] and [`Consumer::run_batched`] let one event's (one batch's)
    /// transaction take, and [`Consumer::run_raw`] and [`Consumer::run_raw_batched`] one
    /// message's (one batch's) handler, before they give it up and redeliver: the server
    /// would hand the event out again by then anyway, and a connection whose server vanished
    /// without a word would otherwise hold the consumer for good.
    pub ack_wait: Duration,
    /// Deliveries before the server gives up on a message (-1 = never).
    pub max_deliver: i64,
    /// Redelivery delay after the first failure; doubles per delivery (default 1 s).
    pub retry_delay: Duration,
    /// Upper bound of the redelivery delay (default 1 min).
    pub max_retry_delay: Duration,
    /// Messages requested per pull (default 16).
    pub batch: usize,
    /// Pause before pulling again after the server or the connection failed (default 1 s).
    pub reconnect_delay: Duration,
    /// How long [`Consumer::run_raw_batched`] and [`Consumer::run_batched`] wait, after a
    /// batch's first message, for more to join it (default zero: only what has arrived already). A consumer whose
    /// messages come in bursts trades that much latency for fewer, larger batches.
    pub linger: Duration,
}

impl ConsumerOptions {
    pub fn new(ack_wait: Duration) -> Self {
        Self {
            ack_wait,
            max_deliver: -1,
            retry_delay: Duration::from_secs(1),
            max_retry_delay: Duration::from_secs(60),
            batch: 16,
            reconnect_delay: Duration::from_secs(1),
            linger: Duration::ZERO,
        }
    }

    /// The redelivery delay after the `delivered`-th delivery failed.
    pub fn retry_delay_after(&self, delivered: i64) -> Duration {
        let doublings = u32::try_from(delivered.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
        self.retry_delay
            .saturating_mul(1u32 << doublings)
            .min(self.max_retry_delay)
    }
}

/// A durable pull consumer bound to one stream and one filter subject.
pub struct Consumer {
    js: jetstream::Context,
    stream: String,
    durable: String,
    config: pull::Config,
    options: ConsumerOptions,
    inner: PullConsumer,
}

/// What happened to one event message (traced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disposition {
    Handled,
    Duplicate,
    Retry,
    Dropped,
}

impl Consumer {
    /// Creates the durable consumer `durable_name` on `stream_name`, or binds to it when it
    /// exists (its ack wait is updated). `filter_subject` is the one subject (wildcards
    /// allowed) it receives; on a work-queue stream no two consumers may share one.
    pub async fn new(
        js: &jetstream::Context,
        stream_name: &str,
        durable_name: &str,
        filter_subject: &str,
        ack_wait: Duration,
    ) -> Result<Self, BusError> {
        Self::with_options(
            js,
            stream_name,
            durable_name,
            filter_subject,
            ConsumerOptions::new(ack_wait),
        )
        .await
    }

    /// [`Consumer::new`] with every option.
    pub async fn with_options(
        js: &jetstream::Context,
        stream_name: &str,
        durable_name: &str,
        filter_subject: &str,
        options: ConsumerOptions,
    ) -> Result<Self, BusError> {
        validate_token("stream name", stream_name)?;
        validate_token("durable consumer name", durable_name)?;
        if filter_subject.is_empty()
            || filter_subject.chars().any(|c| c.is_whitespace())
            || filter_subject.split('.').any(str::is_empty)
        {
            return Err(BusError::ConsumerSettings(format!(
                "filter subject {filter_subject:?} is not a subject"
            )));
        }
        if options.batch == 0 {
            return Err(BusError::ConsumerSettings(
                "batch must be at least 1".into(),
            ));
        }
        let config = pull::Config {
            durable_name: Some(durable_name.to_owned()),
            filter_subject: filter_subject.to_owned(),
            ack_policy: AckPolicy::Explicit,
            ack_wait: options.ack_wait,
            max_deliver: options.max_deliver,
            deliver_policy: DeliverPolicy::All,
            ..Default::default()
        };
        let inner = create(js, stream_name, &config).await?;
        Ok(Self {
            js: js.clone(),
            stream: stream_name.to_owned(),
            durable: durable_name.to_owned(),
            config,
            options,
            inner,
        })
    }

    pub fn stream_name(&self) -> &str {
        &self.stream
    }

    pub fn durable_name(&self) -> &str {
        &self.durable
    }

    pub fn options(&self) -> &ConsumerOptions {
        &self.options
    }

    /// Handles domain events until `cancel` fires. For each message one transaction
    /// (retried on serialization failures and deadlocks, like `cairn_db::transaction`) runs
    /// `INSERT INTO processed_events (consumer, event_id) … ON CONFLICT DO NOTHING` and, if
    /// the row is new, `handler(conn, event)`; then the message is acknowledged. An event
    /// already processed by `consumer_name` is acknowledged without calling the handler. A
    /// handler or database error rolls back and the message is redelivered after a growing
    /// delay (nak), as is an event whose transaction took longer than the options'
    /// `ack_wait`. A message that is not an `Event` or has no UUID id is terminated.
    ///
    /// Returns `Ok(())` after cancellation; NATS trouble is logged and retried, only a
    /// permanent failure to re-create the consumer is returned.
    ///
    /// To spawn the returned future, give a handler that owns its captures
    /// (`async move |conn, event| …` over `Arc`s/clones): an async closure that borrows from
    /// its surroundings makes the future not `Send` (a rustc limitation).
    pub async fn run<H, E>(
        &self,
        pool: &PgPool,
        consumer_name: &str,
        mut handler: H,
        cancel: CancellationToken,
    ) -> Result<(), BusError>
    where
        H: AsyncFnMut(&mut PgConnection, Event) -> Result<(), E>,
        E: std::error::Error + From<sqlx::Error> + IsRetryable + 'static,
    {
        check_consumer_name(consumer_name)?;
        let mut puller = Puller::new(self);
        while let Some(msg) = puller.next(&cancel).await? {
            let span = message_span(&msg);
            let disposition = self
                .handle_event(pool, consumer_name, &mut handler, msg)
                .instrument(span)
                .await;
            tracing::trace!(?disposition, "event processed");
        }
        Ok(())
    }

    /// Handles raw messages (payloads other than `Event`, e.g. run results) until `cancel`
    /// fires, without database deduplication: `Ok` acknowledges the message, `Err`
    /// redelivers it after a growing delay. A handler still running after the options'
    /// `ack_wait` is given up (dropped) and its message redelivered the same way: the server
    /// would hand the message out again by then anyway, and a handler waiting on a
    /// connection whose server vanished without a word would otherwise hold the consumer
    /// for good. So the handler must be idempotent and stop at any await, and work that
    /// needs longer than `ack_wait` belongs in a loop of its own that extends its deadline
    /// (`AckKind::Progress`), as the deployment worker's does. Use [`decode`] to read the
    /// payload. As with [`Consumer::run`], a handler that owns its captures keeps the
    /// future `Send`.
    pub async fn run_raw<H, E>(
        &self,
        mut handler: H,
        cancel: CancellationToken,
    ) -> Result<(), BusError>
    where
        H: AsyncFnMut(&jetstream::Message) -> Result<(), E>,
        E: std::error::Error + 'static,
    {
        let mut puller = Puller::new(self);
        while let Some(msg) = puller.next(&cancel).await? {
            let handled = handler(&msg).instrument(message_span(&msg));
            let delay = self.nak_delay(&msg);
            match tokio::time::timeout(self.options.ack_wait, handled).await {
                Ok(Ok(())) => {
                    ack(&msg, AckKind::Ack).await;
                    continue;
                }
                Ok(Err(err)) => {
                    tracing::warn!(subject = %msg.subject, error = %Chain(&err), retry_in = ?delay, "handler failed; message will be redelivered");
                }
                Err(_) => {
                    tracing::warn!(subject = %msg.subject, given_up_after = ?self.options.ack_wait, retry_in = ?delay, "handler did not finish within the ack wait; message will be redelivered");
                }
            }
            ack(&msg, AckKind::Nak(Some(delay))).await;
        }
        Ok(())
    }

    /// Like [`Consumer::run_raw`], but hands the handler every message that is ready at
    /// once (at least one, at most `max`; after the first, only those delivered already or
    /// within the options' `linger`): a handler that writes
    /// to a database does one transaction per batch instead of one per message. All of a
    /// batch is acknowledged after the handler succeeded, or redelivered when it failed, so
    /// the handler must be idempotent per message (a redelivered batch, or a message that
    /// appears twice in one batch). A batch whose handler is still running after the
    /// options' `ack_wait` is given up and redelivered, as in [`Consumer::run_raw`].
    pub async fn run_raw_batched<H, E>(
        &self,
        max: usize,
        mut handler: H,
        cancel: CancellationToken,
    ) -> Result<(), BusError>
    where
        H: AsyncFnMut(&[jetstream::Message]) -> Result<(), E>,
        E: std::error::Error + 'static,
    {
        let max = max.max(1);
        let mut puller = Puller::new(self);
        while let Some(batch) = self.next_batch(&mut puller, max, &cancel).await? {
            let span = tracing::debug_span!("message_batch", messages = batch.len());
            let handled = handler(&batch).instrument(span);
            match tokio::time::timeout(self.options.ack_wait, handled).await {
                Ok(Ok(())) => {
                    for msg in &batch {
                        ack(msg, AckKind::Ack).await;
                    }
                    continue;
                }
                Ok(Err(err)) => {
                    tracing::warn!(messages = batch.len(), error = %Chain(&err), "batch handler failed; its messages will be redelivered");
                }
                Err(_) => {
                    tracing::warn!(messages = batch.len(), given_up_after = ?self.options.ack_wait, "batch handler did not finish within the ack wait; its messages will be redelivered");
                }
            }
            for msg in &batch {
                let delay = self.nak_delay(msg);
                ack(msg, AckKind::Nak(Some(delay))).await;
            }
        }
        Ok(())
    }

    /// Like [`Consumer::run`], but the events that are ready (at least one, at most `max`,
    /// and those arriving within the options' `linger`) are handled in one transaction:
    /// each recorded in `processed_events` and, when new, handed to the handler, in the
    /// batch's order; all acknowledged after the commit. A batch whose transaction fails is
    /// handled again one event at a time, as [`Consumer::run`] handles it, so one event's
    /// failure redelivers only that event.
    pub async fn run_batched<H, E>(
        &self,
        pool: &PgPool,
        consumer_name: &str,
        max: usize,
        mut handler: H,
        cancel: CancellationToken,
    ) -> Result<(), BusError>
    where
        H: AsyncFnMut(&mut PgConnection, Event) -> Result<(), E>,
        E: std::error::Error + From<sqlx::Error> + IsRetryable + 'static,
    {
        check_consumer_name(consumer_name)?;
        let max = max.max(1);
        let mut puller = Puller::new(self);
        while let Some(batch) = self.next_batch(&mut puller, max, &cancel).await? {
            let mut events = Vec::with_capacity(batch.len());
            let mut messages = Vec::with_capacity(batch.len());
            for msg in batch {
                match decode_event(&msg) {
                    Ok(decoded) => {
                        events.push(decoded);
                        messages.push(msg);
                    }
                    Err(err) => {
                        tracing::error!(subject = %msg.subject, error = %Chain(&err), "message is not a valid event; dropping it");
                        ack(&msg, AckKind::Term).await;
                    }
                }
            }
            if events.is_empty() {
                continue;
            }
            let span = tracing::debug_span!("event_batch", events = events.len());
            let result: Result<(), E> = process_batch(
                pool,
                self.options.ack_wait,
                consumer_name,
                &mut handler,
                &events,
            )
            .instrument(span)
            .await;
            match result {
                Ok(()) => {
                    for msg in &messages {
                        ack(msg, AckKind::Ack).await;
                    }
                }
                Err(err) => {
                    tracing::warn!(events = events.len(), error = %Chain(&err), "event batch failed; handling its events one at a time");
                    for msg in messages {
                        let span = message_span(&msg);
                        self.handle_event(pool, consumer_name, &mut handler, msg)
                            .instrument(span)
                            .await;
                    }
                }
            }
        }
        Ok(())
    }

    /// The next batch: the first message to arrive, then what the pull has delivered
    /// already and what arrives within the options' `linger`, up to `max`. `None` once
    /// `cancel` fired.
    async fn next_batch(
        &self,
        puller: &mut Puller<'_>,
        max: usize,
        cancel: &CancellationToken,
    ) -> Result<Option<Vec<jetstream::Message>>, BusError> {
        use futures::FutureExt as _;
        let Some(first) = puller.next(cancel).await? else {
            return Ok(None);
        };
        let mut batch = vec![first];
        let until = tokio::time::Instant::now() + self.options.linger;
        while batch.len() < max {
            let next = match puller.next(cancel).now_or_never() {
                Some(next) => next,
                None if self.options.linger.is_zero() => break,
                None => match tokio::time::timeout_at(until, puller.next(cancel)).await {
                    Ok(next) => next,
                    Err(_) => break,
                },
            };
            match next? {
                Some(msg) => batch.push(msg),
                None => break,
            }
        }
        Ok(Some(batch))
    }

    /// Pulls exactly one message, waiting until one arrives or `cancel` fires (`None`).
    /// Nothing is fetched ahead: a worker that handles one message at a time for minutes
    /// (a tofu run) never holds a second one whose ack deadline runs out unseen, so the
    /// server can give it to another worker. NATS trouble is logged and retried; a deleted
    /// consumer is re-created. The caller acknowledges the message.
    pub async fn next_message(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Option<jetstream::Message>, BusError> {
        // How long one pull request waits on the server before it is renewed.
        const PULL_EXPIRES: Duration = Duration::from_secs(30);
        let mut consumer = self.inner.clone();
        while !cancel.is_cancelled() {
            let batch = consumer
                .batch()
                .max_messages(1)
                .expires(PULL_EXPIRES)
                .messages();
            let mut batch = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(None),
                batch = batch => match batch {
                    Ok(batch) => batch,
                    Err(err) => {
                        tracing::warn!(durable = %self.durable, error = %err, "cannot pull a message; retrying");
                        self.pause(cancel).await;
                        if let Some(fresh) = self.recreate(cancel).await? {
                            consumer = fresh;
                        }
                        continue;
                    }
                },
            };
            let next = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(None),
                next = batch.next() => next,
            };
            match next {
                Some(Ok(msg)) => return Ok(Some(msg)),
                // The pull expired with nothing to deliver: ask again.
                None => {}
                Some(Err(err)) => {
                    tracing::warn!(durable = %self.durable, error = %err, "pulling a message failed; retrying");
                    self.pause(cancel).await;
                    if let Some(fresh) = self.recreate(cancel).await? {
                        consumer = fresh;
                    }
                }
            }
        }
        Ok(None)
    }

    async fn handle_event<H, E>(
        &self,
        pool: &PgPool,
        consumer_name: &str,
        handler: &mut H,
        msg: jetstream::Message,
    ) -> Disposition
    where
        H: AsyncFnMut(&mut PgConnection, Event) -> Result<(), E>,
        E: std::error::Error + From<sqlx::Error> + IsRetryable + 'static,
    {
        let (event, event_id) = match decode_event(&msg) {
            Ok(decoded) => decoded,
            Err(err) => {
                tracing::error!(subject = %msg.subject, error = %Chain(&err), "message is not a valid event; dropping it");
                ack(&msg, AckKind::Term).await;
                return Disposition::Dropped;
            }
        };
        let result: Result<bool, E> = process_once(
            pool,
            self.options.ack_wait,
            consumer_name,
            event_id,
            handler,
            &event,
        )
        .await;
        match result {
            Ok(fresh) => {
                ack(&msg, AckKind::Ack).await;
                if fresh {
                    Disposition::Handled
                } else {
                    tracing::debug!(%event_id, "event already processed; acknowledged again");
                    Disposition::Duplicate
                }
            }
            Err(err) => {
                let delay = self.nak_delay(&msg);
                tracing::warn!(%event_id, event_type = %event.event_type, error = %Chain(&err), retry_in = ?delay, "event handler failed; event will be redelivered");
                ack(&msg, AckKind::Nak(Some(delay))).await;
                Disposition::Retry
            }
        }
    }

    fn nak_delay(&self, msg: &jetstream::Message) -> Duration {
        let delivered = msg.info().map(|info| info.delivered).unwrap_or(1);
        self.options.retry_delay_after(delivered)
    }

    /// Re-creates the consumer; transient failures are retried until it works, `cancel`
    /// fires (`None`) or a permanent error says it never will.
    async fn recreate(&self, cancel: &CancellationToken) -> Result<Option<PullConsumer>, BusError> {
        while !cancel.is_cancelled() {
            match create(&self.js, &self.stream, &self.config).await {
                Ok(consumer) => return Ok(Some(consumer)),
                Err(err) if err.is_transient() => {
                    tracing::warn!(error = %Chain(&err), "re-creating consumer failed; retrying");
                    self.pause(cancel).await;
                }
                Err(err) => return Err(err),
            }
        }
        Ok(None)
    }

    async fn pause(&self, cancel: &CancellationToken) {
        tokio::select! {
            () = cancel.cancelled() => {}
            () = tokio::time::sleep(self.options.reconnect_delay) => {}
        }
    }
}

/// The `processed_events` name of an idempotent consumer may not be empty.
fn check_consumer_name(consumer_name: &str) -> Result<(), BusError> {
    if consumer_name.is_empty() {
        return Err(BusError::ConsumerSettings(
            "consumer name for processed_events must not be empty".into(),
        ));
    }
    Ok(())
}

/// A message's event and its id.
fn decode_event(msg: &jetstream::Message) -> Result<(Event, uuid::Uuid), BusError> {
    let event = Event::decode(msg.payload.clone())?;
    let id = event_uuid(&event)?;
    Ok((event, id))
}

/// Records a batch's events as processed by `consumer_name` (one statement) and runs the
/// handler for each that was new, in order, in one transaction, given up after `limit`
/// (`cairn_db::bounded!`). An event twice in the batch is handled once.
async fn process_batch<H, E>(
    pool: &PgPool,
    limit: Duration,
    consumer_name: &str,
    handler: &mut H,
    events: &[(Event, uuid::Uuid)],
) -> Result<(), E>
where
    H: AsyncFnMut(&mut PgConnection, Event) -> Result<(), E>,
    E: From<sqlx::Error>,
{
    let ids: Vec<uuid::Uuid> = events.iter().map(|(_, id)| *id).collect();
    cairn_db::bounded!(pool, within limit, |conn| {
        let mut tx = sqlx::Connection::begin(conn).await?;
        let fresh: Vec<uuid::Uuid> = sqlx::query_scalar(
            "INSERT INTO processed_events (consumer, event_id) \
             SELECT $1, unnest($2::uuid[]) ON CONFLICT DO NOTHING RETURNING event_id",
        )
        .bind(consumer_name)
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?;
        let mut fresh: std::collections::HashSet<uuid::Uuid> = fresh.into_iter().collect();
        for (event, id) in events {
            if fresh.remove(id) {
                handler(&mut tx, event.clone()).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    })
}

/// Records the event as processed by `consumer_name` and runs the handler, in one
/// transaction; retried like `cairn_db::transaction` on serialization failures and
/// deadlocks, each attempt given up after `limit` as there. Returns whether the event was
/// new. (Written out instead of calling `cairn_db::transaction`: a closure borrowing the
/// handler would make the consumer's future not `Send`, a rustc limitation with
/// higher-ranked async closures.)
async fn process_once<H, E>(
    pool: &PgPool,
    limit: Duration,
    consumer_name: &str,
    event_id: uuid::Uuid,
    handler: &mut H,
    event: &Event,
) -> Result<bool, E>
where
    H: AsyncFnMut(&mut PgConnection, Event) -> Result<(), E>,
    E: From<sqlx::Error> + IsRetryable,
{
    let mut attempt = 1;
    loop {
        let result = cairn_db::bounded!(pool, within limit, |conn| {
                let mut tx = sqlx::Connection::begin(conn).await?;
                let fresh = sqlx::query(
                    "INSERT INTO processed_events (consumer, event_id) VALUES ($1, $2) \
                     ON CONFLICT DO NOTHING",
                )
                .bind(consumer_name)
                .bind(event_id)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                    == 1;
                if fresh {
                    handler(&mut tx, event.clone()).await?;
                }
                tx.commit().await?;
                Ok::<bool, E>(fresh)
        });
        match result {
            Err(err) if err.is_retryable() && attempt < cairn_db::MAX_ATTEMPTS => {
                tracing::debug!(
                    attempt,
                    "retrying event transaction after serialization failure"
                );
                tokio::time::sleep(Duration::from_millis(5 << attempt)).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Pulls messages one at a time; re-opens the pull (and re-creates the consumer if it was
/// deleted) after failures.
struct Puller<'c> {
    owner: &'c Consumer,
    consumer: PullConsumer,
    messages: Option<pull::Stream>,
}

impl<'c> Puller<'c> {
    fn new(owner: &'c Consumer) -> Self {
        Self {
            owner,
            consumer: owner.inner.clone(),
            messages: None,
        }
    }

    /// The next message, or `None` once `cancel` fired.
    async fn next(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<Option<jetstream::Message>, BusError> {
        let owner = self.owner;
        while !cancel.is_cancelled() {
            let messages = match &mut self.messages {
                Some(messages) => messages,
                None => {
                    let opened = self
                        .consumer
                        .stream()
                        .max_messages_per_batch(owner.options.batch)
                        .messages()
                        .await;
                    match opened {
                        Ok(messages) => self.messages.insert(messages),
                        Err(source) => {
                            let err = BusError::Messages {
                                durable: owner.durable.clone(),
                                source,
                            };
                            tracing::warn!(error = %Chain(&err), "cannot pull messages; retrying");
                            owner.pause(cancel).await;
                            continue;
                        }
                    }
                }
            };
            let next = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(None),
                next = messages.next() => next,
            };
            match next {
                Some(Ok(msg)) => return Ok(Some(msg)),
                Some(Err(err)) => match err.kind() {
                    MessagesErrorKind::MissingHeartbeat | MessagesErrorKind::Pull => {
                        tracing::debug!(error = %err, "pull interrupted; continuing");
                    }
                    MessagesErrorKind::ConsumerDeleted => {
                        tracing::warn!("consumer was deleted; re-creating it");
                        self.messages = None;
                        owner.pause(cancel).await;
                        match owner.recreate(cancel).await? {
                            Some(consumer) => self.consumer = consumer,
                            None => return Ok(None),
                        }
                    }
                    MessagesErrorKind::NoResponders
                    | MessagesErrorKind::RequestLimitExceeded
                    | MessagesErrorKind::PushBasedConsumer
                    | MessagesErrorKind::Other => {
                        tracing::warn!(error = %err, "pulling messages failed; retrying");
                        self.messages = None;
                        owner.pause(cancel).await;
                    }
                },
                None => {
                    self.messages = None;
                    owner.pause(cancel).await;
                }
            }
        }
        Ok(None)
    }
}

async fn create(
    js: &jetstream::Context,
    stream: &str,
    config: &pull::Config,
) -> Result<PullConsumer, BusError> {
    let durable = config.durable_name.clone().unwrap_or_default();
    let wrap = |source| BusError::Consumer {
        stream: stream.to_owned(),
        durable: durable.clone(),
        source,
    };
    js.create_consumer_on_stream(config.clone(), stream)
        .await
        .map_err(wrap)
}

/// Sends an acknowledgement; a lost one only causes a redelivery, which is harmless.
async fn ack(msg: &jetstream::Message, kind: AckKind) {
    if let Err(err) = msg.ack_with(kind).await {
        tracing::warn!(subject = %msg.subject, error = %err, "acknowledging a message failed; it will be redelivered");
    }
}

/// The span to handle `msg` in: `message` with its subject, continuing the publisher's trace
/// when the message carries a `traceparent` header (traces on).
pub fn message_span(msg: &jetstream::Message) -> tracing::Span {
    let span = tracing::info_span!("message", subject = %msg.subject);
    if cairn_telemetry::trace::enabled()
        && let Some(headers) = msg.headers.as_ref()
    {
        cairn_telemetry::TraceContext::from_headers(|name| headers.get(name).map(|v| v.as_str()))
            .parent(&span);
    }
    span
}

/// Decodes a protobuf payload of a raw message.
pub fn decode<M: Message + Default>(msg: &jetstream::Message) -> Result<M, BusError> {
    Ok(M::decode(msg.payload.clone())?)
}

/// Deletes `processed_events` rows older than `older_than` (keep them well beyond the
/// streams' retention and the longest redelivery horizon); returns how many.
pub async fn processed_events_prune(pool: &PgPool, older_than: Duration) -> Result<u64, BusError> {
    let result = sqlx::query(
        "DELETE FROM processed_events WHERE processed_at < now() - make_interval(secs => $1)",
    )
    .bind(older_than.as_secs_f64())
    .execute(pool)
    .await
    .map_err(BusError::db("prune processed events"))?;
    Ok(result.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_grows_and_is_capped() {
        let options = ConsumerOptions {
            retry_delay: Duration::from_millis(100),
            max_retry_delay: Duration::from_secs(1),
            ..ConsumerOptions::new(Duration::from_secs(30))
        };
        assert_eq!(options.retry_delay_after(0), Duration::from_millis(100));
        assert_eq!(options.retry_delay_after(1), Duration::from_millis(100));
        assert_eq!(options.retry_delay_after(2), Duration::from_millis(200));
        assert_eq!(options.retry_delay_after(4), Duration::from_millis(800));
        assert_eq!(options.retry_delay_after(5), Duration::from_secs(1));
        assert_eq!(options.retry_delay_after(i64::MAX), Duration::from_secs(1));
    }
}
