//! The transactional outbox: events are written in the same transaction as the change they
//! describe, and a relay publishes them to JetStream (with the event id as `Nats-Msg-Id`, so
//! a crash between publishing and marking a row sent produces no duplicate) and marks them
//! sent. The relay catches up on start, so nothing is lost between a commit and its event.

use std::sync::Arc;

use async_nats::jetstream;
use async_nats::jetstream::context::PublishAckFuture;
use bytes::Bytes;
use cairn_proto::events::Event;
use prost::Message;
use sqlx::{PgConnection, PgPool};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use crate::aggregates::{Aggregate, owner_of};
use crate::error::{BusError, Chain};
use crate::permissions::ServiceRole;
use crate::publish::{event_subject, event_uuid, send};
use crate::relay::{self, Outbox, RelaySettings, Sent};
use crate::subjects::Namespace;

/// A new domain event envelope (a fresh time-ordered id, occurred now), ready for
/// [`outbox_insert`] in the transaction of the change it describes. `role` is the service
/// stating it: an `aggregate` and `event_type` it does not own
/// ([`crate::aggregates::OWNERS`]) is [`BusError::NotOwner`], since its NATS user could not
/// publish the event (a test that plays another service names that service's role). Events
/// of tenancy's changes carry no payload (`None`).
pub fn new_event(
    role: ServiceRole,
    tenant_id: impl std::fmt::Display,
    aggregate: Aggregate,
    aggregate_id: impl std::fmt::Display,
    event_type: &str,
    actor: &str,
    payload: impl Into<Option<cairn_proto::events::event::Payload>>,
) -> Result<Event, BusError> {
    let owner = aggregate.owner(event_type);
    if owner != Some(role) {
        return Err(BusError::NotOwner {
            role,
            aggregate: aggregate.name().to_owned(),
            event_type: event_type.to_owned(),
            owner,
        });
    }
    Ok(Event {
        event_id: uuid::Uuid::now_v7().to_string(),
        tenant_id: tenant_id.to_string(),
        aggregate: aggregate.name().to_owned(),
        aggregate_id: aggregate_id.to_string(),
        event_type: event_type.to_owned(),
        actor: actor.to_owned(),
        occurred_at: Some(std::time::SystemTime::now().into()),
        payload: payload.into(),
    })
}

/// The tables every service that publishes or consumes events needs in its own schema.
///
/// This library does not run it: each service copies it, unchanged, into a migration file of
/// its own (e.g. `migrations/<service>/0002_outbox.sql`), so the tables live in the service
/// schema next to the rows whose changes they announce and are migrated with them. This
/// crate's `tests/migrations.rs` checks every copy in `migrations/` against it, to the byte.
///
/// - `outbox`: events written by [`outbox_insert`] in the service's transaction; `sent_at` is
///   set by [`OutboxRelay`] once JetStream acknowledged the event.
/// - `processed_events`: the idempotency keys of [`crate::consume::Consumer::run`], one row
///   per (consumer, event) handled, written in the handler's transaction.
pub const OUTBOX_MIGRATION_SQL: &str = "\
-- Transactional outbox and consumer idempotency keys (from cairn-bus OUTBOX_MIGRATION_SQL).
CREATE TABLE outbox (
    seq        bigserial   PRIMARY KEY,
    event_id   uuid        NOT NULL UNIQUE,
    payload    bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);

-- The relay scans unsent rows in order; sent rows are pruned by age.
CREATE INDEX outbox_unsent_idx ON outbox (seq) WHERE sent_at IS NULL;
CREATE INDEX outbox_sent_at_idx ON outbox (sent_at) WHERE sent_at IS NOT NULL;

CREATE TABLE processed_events (
    consumer     text        NOT NULL,
    event_id     uuid        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

CREATE INDEX processed_events_processed_at_idx ON processed_events (processed_at);
";

/// Writes `event` to the outbox. Call it inside the transaction that makes the change the
/// event describes; after that transaction commits, wake the relay with
/// `notify.notify_one()` (otherwise it publishes at its next poll).
///
/// The event is checked here (UUID event id, valid subject tokens, an aggregate and event
/// type some role states) so that a bad event fails the change instead of getting stuck in
/// the outbox (a relay cannot publish an event no NATS user may publish). Inserting the same event id twice is a
/// no-op.
pub async fn outbox_insert(conn: &mut PgConnection, event: &Event) -> Result<(), BusError> {
    let (event_id, payload) = outbox_row(event)?;
    sqlx::query(
        "INSERT INTO outbox (event_id, payload) VALUES ($1, $2) \
         ON CONFLICT (event_id) DO NOTHING",
    )
    .bind(event_id)
    .bind(payload)
    .execute(conn)
    .await
    .map_err(BusError::db("insert event into outbox"))?;
    Ok(())
}

/// The `outbox` row of `event` (`event_id`, `payload`), checked as [`outbox_insert`] checks
/// it, for a service that writes the row inside a statement of its own (the state
/// coordinator's one-statement commit).
pub fn outbox_row(event: &Event) -> Result<(Uuid, Vec<u8>), BusError> {
    let event_id = event_uuid(event)?;
    event_subject(&Namespace::root(), event)?;
    if owner_of(&event.aggregate, &event.event_type).is_none() {
        return Err(BusError::InvalidEvent(format!(
            "no service states {}.{} events (cairn_bus::aggregates::OWNERS)",
            event.aggregate, event.event_type
        )));
    }
    Ok((event_id, event.encode_to_vec()))
}

/// Publishes the outbox to JetStream in the background.
///
/// Construct it with [`OutboxRelay::new`] and adjust its `settings` if needed.
pub struct OutboxRelay {
    /// The service's pool (its sessions' `search_path` is the service schema).
    pub pool: PgPool,
    pub js: jetstream::Context,
    pub ns: Namespace,
    /// Wakes the relay; services call `notify_one()` after committing an outbox row.
    pub notify: Arc<Notify>,
    /// Poll interval, batch size, retention, linger.
    pub settings: RelaySettings,
}

impl OutboxRelay {
    pub fn new(pool: PgPool, js: jetstream::Context, ns: Namespace, notify: Arc<Notify>) -> Self {
        Self {
            pool,
            js,
            ns,
            notify,
            settings: RelaySettings::default(),
        }
    }

    /// Runs the relay until `cancel` fires: catches up at once, then wakes on `notify` (after
    /// the settings' `linger`) or every `poll_interval`, and prunes sent rows every
    /// `prune_interval`. Errors are logged (ids only, never payloads) and retried at the next
    /// wake-up.
    pub fn spawn(self, cancel: CancellationToken) -> JoinHandle<()> {
        let span = tracing::info_span!("outbox_relay", namespace = self.ns.prefix().unwrap_or(""));
        tokio::spawn(
            async move {
                relay::run(&self, &self.settings, &self.notify, &cancel).await;
                tracing::debug!("outbox relay stopped");
            }
            .instrument(span),
        )
    }

    /// Publishes one batch (up to `batch_size` unsent rows, oldest first, skipping rows
    /// another relay has locked) and marks what JetStream acknowledged as sent, in one
    /// transaction. Returns how many events were published. If a publish fails, the rows
    /// acknowledged before it are still marked and the error is returned.
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

impl Outbox for OutboxRelay {
    const WHAT: &'static str = "event outbox";
    const MARK_SENT: &'static str = "UPDATE outbox SET sent_at = now() WHERE seq = ANY($1)";
    const PRUNE: &'static str = "DELETE FROM outbox WHERE sent_at IS NOT NULL \
         AND sent_at < now() - make_interval(secs => $1)";

    fn endpoints(&self) -> (&PgPool, &jetstream::Context, &Namespace) {
        (&self.pool, &self.js, &self.ns)
    }

    /// Each row's event decoded and published under its event id as `Nats-Msg-Id`; a row
    /// that cannot be published (undecodable, another event id inside) is left unsent.
    async fn send_locked(
        js: &jetstream::Context,
        ns: &Namespace,
        conn: &mut PgConnection,
        limit: i64,
    ) -> Result<Sent, BusError> {
        let rows: Vec<(i64, Uuid, Vec<u8>)> = sqlx::query_as(
            "SELECT seq, event_id, payload FROM outbox WHERE sent_at IS NULL \
             ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED",
        )
        .bind(limit)
        .fetch_all(&mut *conn)
        .await
        .map_err(BusError::db("select unsent outbox rows"))?;
        let fetched = rows.len();

        let mut failure = None;
        let mut in_flight: Vec<(i64, String, PublishAckFuture)> = Vec::with_capacity(fetched);
        for (seq, event_id, payload) in rows {
            let subject = match Event::decode(payload.as_slice())
                .map_err(BusError::from)
                .and_then(|event| event_subject(ns, &event).map(|s| (s, event)))
            {
                Ok((subject, event)) if event_uuid(&event).ok() == Some(event_id) => subject,
                Ok(_) => {
                    tracing::error!(seq, %event_id, "outbox row's payload carries another event id; left unsent");
                    continue;
                }
                Err(err) => {
                    tracing::error!(seq, %event_id, error = %Chain(&err), "outbox row cannot be published; left unsent");
                    continue;
                }
            };
            let msg_id = event_id.to_string();
            match send(js, &subject, &msg_id, Bytes::from(payload)).await {
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

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_proto::events::{DriftChange, event::Payload};

    fn drift() -> Payload {
        Payload::Drift(DriftChange::default())
    }

    #[test]
    fn a_role_states_only_the_events_it_owns() {
        let event = new_event(
            ServiceRole::Drift,
            "t1",
            Aggregate::Instance,
            "i1",
            "drift_detected",
            "svc:drift",
            drift(),
        )
        .expect("drift's own event");
        assert_eq!(
            (event.aggregate.as_str(), event.event_type.as_str()),
            ("instance", "drift_detected")
        );
        assert!(outbox_row(&event).is_ok());
        // Another service's event type of the same aggregate, another's aggregate.
        for (aggregate, event_type, owner) in [
            (
                Aggregate::Instance,
                "updated",
                Some(ServiceRole::Deployments),
            ),
            (
                Aggregate::State,
                "recovered",
                Some(ServiceRole::StateCoordinator),
            ),
            (Aggregate::Instance, "renamed", None),
        ] {
            let err = new_event(
                ServiceRole::Drift,
                "t1",
                aggregate,
                "i1",
                event_type,
                "svc:drift",
                drift(),
            )
            .expect_err("not drift's");
            assert!(
                matches!(&err, BusError::NotOwner { role: ServiceRole::Drift, owner: o, .. } if *o == owner),
                "{err:?}"
            );
        }
        let none = new_event(
            ServiceRole::Tenancy,
            "",
            Aggregate::Tenant,
            "t1",
            "created",
            "u1",
            None,
        )
        .expect("tenancy's");
        assert!(none.payload.is_none());
    }
}
