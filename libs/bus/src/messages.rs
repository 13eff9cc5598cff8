//! The message outbox: any message ("publish these bytes to this subject with this
//! `Nats-Msg-Id`") written in the transaction of the change that makes it due — a deployment
//! job on `cairn.deployq`, a run request on `cairn.runq.<target>` — and published by
//! [`MessageRelay`], which marks what JetStream acknowledged. A crash between publishing and
//! marking republishes with the same id, which the stream's duplicate window drops; the relay
//! catches up on start. Domain events keep their own outbox ([`crate::outbox`]), whose subject
//! is derived from the event.
//!
//! Subjects are stored in the root namespace (`cairn.runq.<target>`); the relay qualifies
//! them with its [`Namespace`], so rows do not depend on a test prefix.

use std::sync::Arc;

use async_nats::jetstream;
use async_nats::jetstream::context::PublishAckFuture;
use bytes::Bytes;
use cairn_telemetry::TraceContext;
use sqlx::{PgConnection, PgPool};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::BusError;
use crate::publish::send_traced;
use crate::relay::{self, Outbox, RelaySettings, Sent};
use crate::subjects::Namespace;

/// The table a service that enqueues messages needs in its own schema. As with
/// [`crate::OUTBOX_MIGRATION_SQL`], each service copies it unchanged into a migration of its
/// own.
pub const MESSAGE_OUTBOX_MIGRATION_SQL: &str = "\
-- Message outbox (from cairn-bus MESSAGE_OUTBOX_MIGRATION_SQL): messages to publish to a
-- subject (root namespace) with a Nats-Msg-Id, written in the transaction that makes them due.
CREATE TABLE message_outbox (
    seq        bigserial   PRIMARY KEY,
    msg_id     text        NOT NULL UNIQUE CHECK (msg_id <> ''),
    subject    text        NOT NULL CHECK (subject <> ''),
    payload    bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);

CREATE INDEX message_outbox_unsent_idx ON message_outbox (seq) WHERE sent_at IS NULL;
CREATE INDEX message_outbox_sent_at_idx ON message_outbox (sent_at) WHERE sent_at IS NOT NULL;
";

/// The trace context columns of the message outbox (issue 15), a later migration of each
/// service that copied [`MESSAGE_OUTBOX_MIGRATION_SQL`]: the W3C context of the span that
/// wrote the message, sent as its `traceparent`/`tracestate` headers by the relay (which
/// runs later, in a task of its own). Null when traces are off.
pub const MESSAGE_OUTBOX_TRACE_MIGRATION_SQL: &str = "\
-- Message outbox trace context (from cairn-bus MESSAGE_OUTBOX_TRACE_MIGRATION_SQL): the W3C
-- trace context of the span that wrote the message, published as its headers.
ALTER TABLE message_outbox ADD COLUMN traceparent text, ADD COLUMN tracestate text;
";

/// Writes a message to the outbox. Call it inside the transaction that makes the message
/// due; after commit, wake the relay (`notify.notify_one()`). `subject` is in the root
/// namespace (e.g. `Namespace::root().runq(target)?`); `msg_id` becomes the `Nats-Msg-Id`,
/// so choose it so that the same logical message always carries the same id. Inserting the
/// same id twice is a no-op (returns false).
pub async fn message_outbox_insert(
    conn: &mut PgConnection,
    subject: &str,
    msg_id: &str,
    payload: &[u8],
) -> Result<bool, BusError> {
    if msg_id.is_empty() {
        return Err(BusError::InvalidMessage(format!(
            "message for {subject} has an empty Nats-Msg-Id"
        )));
    }
    if subject.is_empty()
        || subject
            .chars()
            .any(|c| c.is_whitespace() || c == '*' || c == '>')
        || subject.split('.').any(str::is_empty)
    {
        return Err(BusError::InvalidMessage(format!(
            "{subject:?} is not a subject to publish to"
        )));
    }
    let trace = cairn_telemetry::TraceContext::current();
    let inserted = sqlx::query(
        "INSERT INTO message_outbox (msg_id, subject, payload, traceparent, tracestate) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (msg_id) DO NOTHING",
    )
    .bind(msg_id)
    .bind(subject)
    .bind(payload)
    .bind(trace.traceparent)
    .bind(trace.tracestate)
    .execute(conn)
    .await
    .map_err(BusError::db("insert message into outbox"))?
    .rows_affected();
    Ok(inserted == 1)
}

/// Publishes the message outbox to JetStream in the background.
pub struct MessageRelay {
    pub pool: PgPool,
    pub js: jetstream::Context,
    pub ns: Namespace,
    /// Wakes the relay; call `notify_one()` after committing a message.
    pub notify: Arc<Notify>,
    /// Poll interval, batch size, retention, linger.
    pub settings: RelaySettings,
}

impl MessageRelay {
    pub fn new(pool: PgPool, js: jetstream::Context, ns: Namespace, notify: Arc<Notify>) -> Self {
        Self {
            pool,
            js,
            ns,
            notify,
            settings: RelaySettings::default(),
        }
    }

    /// Runs the relay until `cancel` fires (see [`crate::OutboxRelay::spawn`]).
    pub fn spawn(self, cancel: CancellationToken) -> JoinHandle<()> {
        let span = tracing::info_span!("message_relay", namespace = self.ns.prefix().unwrap_or(""));
        tokio::spawn(
            async move { relay::run(&self, &self.settings, &self.notify, &cancel).await }
                .instrument(span),
        )
    }

    /// Publishes one batch (oldest first, skipping rows another relay has locked) and marks
    /// what JetStream acknowledged, in one transaction; returns how many were published. If
    /// a publish fails, the rows acknowledged before it stay marked and the error is
    /// returned.
    pub async fn relay_once(&self) -> Result<usize, BusError> {
        relay::batch(self, self.settings.limit(), self.settings.time_limit)
            .await
            .map(|outcome| outcome.sent)
    }

    /// Deletes sent rows older than the settings' `retention`; returns how many.
    pub async fn prune_sent(&self) -> Result<u64, BusError> {
        relay::prune(self, self.settings.retention, self.settings.time_limit).await
    }
}

impl Outbox for MessageRelay {
    const WHAT: &'static str = "message outbox";
    const MARK_SENT: &'static str = "UPDATE message_outbox SET sent_at = now() WHERE seq = ANY($1)";
    const PRUNE: &'static str = "DELETE FROM message_outbox WHERE sent_at IS NOT NULL \
         AND sent_at < now() - make_interval(secs => $1)";

    fn endpoints(&self) -> (&PgPool, &jetstream::Context, &Namespace) {
        (&self.pool, &self.js, &self.ns)
    }

    /// Each row published to its subject in this namespace, with its trace context.
    async fn send_locked(
        js: &jetstream::Context,
        ns: &Namespace,
        conn: &mut PgConnection,
        limit: i64,
    ) -> Result<Sent, BusError> {
        type Row = (i64, String, String, Vec<u8>, Option<String>, Option<String>);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT seq, msg_id, subject, payload, traceparent, tracestate FROM message_outbox \
             WHERE sent_at IS NULL \
             ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED",
        )
        .bind(limit)
        .fetch_all(&mut *conn)
        .await
        .map_err(BusError::db("select unsent outbox messages"))?;
        let fetched = rows.len();
        let mut failure = None;
        let mut in_flight: Vec<(i64, String, PublishAckFuture)> = Vec::with_capacity(fetched);
        for (seq, msg_id, subject, payload, traceparent, tracestate) in rows {
            let subject = ns.qualify(&subject);
            let trace = TraceContext {
                traceparent,
                tracestate,
            };
            match send_traced(js, &subject, &msg_id, Bytes::from(payload), &trace).await {
                Ok(ack) => in_flight.push((seq, subject, ack)),
                Err(err) => {
                    failure = Some(err);
                    break;
                }
            }
        }
        Ok(Sent {
            fetched,
            in_flight,
            failure,
        })
    }
}
