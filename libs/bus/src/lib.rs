//! NATS JetStream for Cairn (ARCHITECTURE §9): subjects and stream names under an optional
//! test prefix, idempotent stream creation, acknowledged publishing with `Nats-Msg-Id`
//! deduplication, the transactional outbox and its relay, and idempotent durable consumers.
//!
//! Written for NATS ≥ 2.9: one filter subject per consumer, no key-value buckets, no
//! account-info queries.
//!
//! A service publishing domain events: copy [`OUTBOX_MIGRATION_SQL`] into a migration of its
//! own, call [`ensure_streams`] at start-up, [`outbox_insert`] in the transaction of each
//! change (then `notify.notify_one()` after commit), and spawn an [`OutboxRelay`]. A service
//! consuming events: [`Consumer::new`] with one filter subject, then [`Consumer::run`] with
//! a handler that runs in the same transaction as the idempotency key. A service that
//! enqueues work (a job, a run request): copy [`MESSAGE_OUTBOX_MIGRATION_SQL`] too, call
//! [`message_outbox_insert`] in the transaction that makes the work due, and spawn a
//! [`MessageRelay`].

mod connect;
pub mod consume;
mod error;
pub mod messages;
pub mod outbox;
pub mod publish;
pub mod streams;
pub mod subjects;

pub use connect::{Bus, connect};
pub use consume::{Consumer, ConsumerOptions, decode, processed_events_prune};
pub use error::{BusError, Chain, ErrorClass, is_transient_sqlx};
pub use messages::{MESSAGE_OUTBOX_MIGRATION_SQL, MessageRelay, message_outbox_insert};
pub use outbox::{OUTBOX_MIGRATION_SQL, OutboxRelay, new_event, outbox_insert, outbox_row};
pub use publish::{NO_TENANT, event_subject, event_uuid, publish_core, publish_event, publish_msg};
pub use streams::{StreamSettings, ensure_streams, stream_config};
pub use subjects::{Namespace, StreamKind, SubjectError, validate_token};
