//! What the two outboxes' relays ([`crate::OutboxRelay`] for domain events,
//! [`crate::MessageRelay`] for jobs and run requests) do alike: their settings
//! ([`RelaySettings`]), the loop that catches up, prunes and waits to be woken, the
//! acknowledgements a batch collects and the rows it marks sent. What differs (the table,
//! how a row becomes a subject and a message) is each relay's [`Outbox`] implementation.
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::context::PublishAckFuture;
use sqlx::{PgConnection, PgPool};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{BusError, Chain};
use crate::subjects::Namespace;

/// How a relay runs; both relays' defaults are [`RelaySettings::default`].
#[derive(Debug, Clone)]
pub struct RelaySettings {
    /// How often the relay looks without being woken (default 1 s); also the retry delay
    /// after a NATS or database error.
    pub poll_interval: Duration,
    /// Rows published per transaction (default 100).
    pub batch_size: usize,
    /// Sent rows older than this are deleted (default 24 h).
    pub retention: Duration,
    /// How often pruning runs (default 5 min).
    pub prune_interval: Duration,
    /// How long the relay waits after a wake-up before it looks (default 0: at once), so
    /// that the rows committed meanwhile are published in the same transaction: at most one
    /// batch per `linger` however many commits wake it. For an outbox whose messages nobody
    /// waits for on a hot path (a service whose every write commits an event); a commit's
    /// message is then published up to `linger` later.
    pub linger: Duration,
    /// How long one batch (its transaction, publishes and acknowledgements) or one prune may
    /// take before it is given up and retried at the next wake-up (default
    /// `cairn_db::BACKGROUND_LIMIT`, 30 s): a
    /// connection whose server vanished without a word would otherwise hold the relay for
    /// good (`cairn_db::bounded!`).
    pub time_limit: Duration,
}

impl RelaySettings {
    /// `batch_size` as a statement's `LIMIT`.
    pub(crate) fn limit(&self) -> i64 {
        i64::try_from(self.batch_size).unwrap_or(i64::MAX)
    }
}

impl Default for RelaySettings {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(1),
            batch_size: 100,
            retention: Duration::from_secs(24 * 3600),
            prune_interval: Duration::from_secs(300),
            linger: Duration::ZERO,
            time_limit: cairn_db::BACKGROUND_LIMIT,
        }
    }
}

/// What one batch did.
pub(crate) struct BatchOutcome {
    /// Rows read (locked) for the batch.
    pub fetched: usize,
    /// Rows published and marked sent.
    pub sent: usize,
}

/// What a batch sent: the rows it locked, each row sent and its acknowledgement to come
/// (row, subject, ack), and the send that failed, after which nothing more was sent.
pub(crate) struct Sent {
    pub fetched: usize,
    pub in_flight: Vec<(i64, String, PublishAckFuture)>,
    pub failure: Option<BusError>,
}

/// One outbox table as its relay sees it.
pub(crate) trait Outbox {
    /// The table's name in log lines.
    const WHAT: &'static str;
    /// Marks the rows whose `seq` is in `$1` as sent.
    const MARK_SENT: &'static str;
    /// Deletes the sent rows older than `$1` seconds.
    const PRUNE: &'static str;

    /// The service's pool (its sessions' `search_path` is the service schema) and where to
    /// publish.
    fn endpoints(&self) -> (&PgPool, &jetstream::Context, &Namespace);

    /// Inside the batch's transaction: locks up to `limit` unsent rows (oldest first,
    /// skipping rows another relay has locked) and sends them, stopping at the first send
    /// that fails.
    async fn send_locked(
        js: &jetstream::Context,
        ns: &Namespace,
        conn: &mut PgConnection,
        limit: i64,
    ) -> Result<Sent, BusError>;
}

/// One batch of `outbox` in one transaction: its rows locked and sent, then those JetStream
/// acknowledged marked sent. A failed publish is returned as the error once the rows
/// acknowledged before it are marked (and committed).
/// Given up after `time_limit` (rolled back, unless its commit was already on its way; the
/// rows it published are then published again under the same `Nats-Msg-Id`).
pub(crate) async fn batch<O: Outbox>(
    outbox: &O,
    limit: i64,
    time_limit: Duration,
) -> Result<BatchOutcome, BusError> {
    let (pool, js, ns) = outbox.endpoints();
    // The closure owns its captures: a closure borrowing the relay would make the relay's
    // future not `Send` (rustc's higher-ranked auto-trait limitation with async closures).
    let (js, ns) = (js.clone(), ns.clone());
    let work = async move |conn: &mut PgConnection| {
        let Sent {
            fetched,
            in_flight,
            mut failure,
        } = O::send_locked(&js, &ns, conn, limit).await?;
        let sent = acknowledged(in_flight, &mut failure).await;
        if !sent.is_empty() {
            sqlx::query(O::MARK_SENT)
                .bind(&sent)
                .execute(&mut *conn)
                .await
                .map_err(BusError::db("mark outbox rows sent"))?;
        }
        let outcome = BatchOutcome {
            fetched,
            sent: sent.len(),
        };
        Ok::<_, BusError>((outcome, failure))
    };
    let (outcome, failure) = cairn_db::transaction_within(pool, time_limit, work).await?;
    match failure {
        Some(err) => Err(err),
        None => Ok(outcome),
    }
}

/// Deletes `outbox`'s sent rows older than `retention`; returns how many. Given up after
/// `time_limit`.
pub(crate) async fn prune<O: Outbox>(
    outbox: &O,
    retention: Duration,
    time_limit: Duration,
) -> Result<u64, BusError> {
    let (pool, _, _) = outbox.endpoints();
    let pruned: Result<_, sqlx::Error> = cairn_db::bounded!(pool, within time_limit, |conn| {
        sqlx::query(O::PRUNE)
            .bind(retention.as_secs_f64())
            .execute(conn)
            .await
    });
    Ok(pruned
        .map_err(BusError::db("prune sent outbox rows"))?
        .rows_affected())
}

/// Runs `outbox`'s relay until `cancel` fires: catches up at once, then wakes on `notify`
/// (after the settings' `linger`) or every `poll_interval`, and prunes sent rows every
/// `prune_interval`. Errors are logged (ids only, never payloads) and retried at the next
/// wake-up.
pub(crate) async fn run<O: Outbox>(
    outbox: &O,
    settings: &RelaySettings,
    notify: &Notify,
    cancel: &CancellationToken,
) {
    let mut last_prune: Option<Instant> = None;
    while !cancel.is_cancelled() {
        drain(outbox, settings, cancel).await;
        if last_prune.is_none_or(|at| at.elapsed() >= settings.prune_interval) {
            match prune(outbox, settings.retention, settings.time_limit).await {
                Ok(0) => {}
                Ok(pruned) => tracing::debug!(pruned, "pruned sent {} rows", O::WHAT),
                Err(err) => {
                    tracing::warn!(error = %Chain(&err), "pruning the {} failed", O::WHAT);
                }
            }
            last_prune = Some(Instant::now());
        }
        let woken = tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            () = notify.notified() => true,
            () = tokio::time::sleep(settings.poll_interval) => false,
        };
        // Commits that come while it lingers store one more wake-up, which the next turn
        // takes after its own linger: one batch per linger under any load.
        if woken && !settings.linger.is_zero() {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(settings.linger) => {}
            }
        }
    }
}

/// Publishes batches until the outbox is empty, an error occurs or `cancel` fires.
async fn drain<O: Outbox>(outbox: &O, settings: &RelaySettings, cancel: &CancellationToken) {
    while !cancel.is_cancelled() {
        match batch(outbox, settings.limit(), settings.time_limit).await {
            Ok(outcome) => {
                if outcome.sent > 0 {
                    tracing::debug!(sent = outcome.sent, "published {} rows", O::WHAT);
                }
                // Stop when the outbox is drained; also when a full batch had nothing
                // publishable, so undecodable rows cannot make this loop spin.
                if outcome.fetched < settings.batch_size || outcome.sent == 0 {
                    return;
                }
            }
            Err(err) => {
                let transient = err.is_transient();
                tracing::warn!(error = %Chain(&err), transient, "relaying the {} failed; retrying later", O::WHAT);
                return;
            }
        }
    }
}

/// The rows whose publish JetStream acknowledged, of those sent in `in_flight` (row, subject,
/// acknowledgement); the first failure is kept in `failure` unless one is there already.
async fn acknowledged(
    in_flight: Vec<(i64, String, PublishAckFuture)>,
    failure: &mut Option<BusError>,
) -> Vec<i64> {
    let mut sent = Vec::with_capacity(in_flight.len());
    for (seq, subject, ack) in in_flight {
        match ack.await {
            Ok(_) => sent.push(seq),
            Err(source) => {
                if failure.is_none() {
                    *failure = Some(BusError::Publish { subject, source });
                }
            }
        }
    }
    sent
}
