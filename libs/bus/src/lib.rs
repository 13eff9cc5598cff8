//! NATS JetStream for Cairn (ARCHITECTURE §9): subjects and stream names under an optional
//! test prefix, idempotent stream creation, acknowledged publishing with `Nats-Msg-Id`
//! deduplication, the transactional outbox and its relay, and idempotent durable consumers;
//! and who may do what on the server (ARCHITECTURE §3):
//!
//! - [`subjects`]: [`Namespace`], the subject and stream names: run requests on
//!   `cairn.runq.<target>`, target validation requests on `cairn.runq.<target>.validate`
//!   (same stream, a subject of their own), events on
//!   `cairn.events.<tenant>.<aggregate>.<event>`.
//! - [`streams`]: [`setup_streams`] (the admin's setup step, `cairn-tenancy nats setup`) and
//!   [`check_streams`] (a service at start-up: the streams exist, nothing is created).
//! - `connect`: [`connect`] (a service: as its [`ServiceRole`], with its credentials, then
//!   the stream check) and [`connect_as`] (the connection alone).
//! - [`permissions`](mod@permissions): the permission matrix, [`ServiceRole`] → publish/subscribe allow
//!   lists, and [`server_config`], the nats-server accounts and users that enforce it.
//! - [`aggregates`]: [`Aggregate`] and [`OWNERS`], the one role that states each
//!   aggregate's events (or each event type, where two services write about an aggregate):
//!   what [`new_event`] holds a service to and what [`permissions()`] grants.
//! - [`credentials`]: [`NatsCredentials`] (`CAIRN_NATS_CREDS`: an nkey seed file or a NATS
//!   `.creds` file) and [`new_user`], the nkey users `cairn-tenancy nats credentials` makes.
//! - [`publish`], [`outbox`], [`messages`], `relay`, [`consume`]: publishing, the outboxes,
//!   their relays (and what the two relays share: [`RelaySettings`], their loop), idempotent
//!   consumers.
//!
//! Written for NATS ≥ 2.9: one filter subject per consumer, no key-value buckets, no
//! account-info queries.
//!
//! A service publishing domain events: copy [`OUTBOX_MIGRATION_SQL`] into a migration of its
//! own, connect with [`connect`] at start-up (the streams were made by [`setup_streams`]),
//! build each event with [`new_event`] (its own [`ServiceRole`] and an [`Aggregate`] it owns),
//! [`outbox_insert`] it in the transaction of each change (then `notify.notify_one()` after
//! commit), and spawn an [`OutboxRelay`]. A service
//! consuming events: [`Consumer::new`] with one filter subject, then [`Consumer::run`] with
//! a handler that runs in the same transaction as the idempotency key (or
//! [`Consumer::run_batched`], with a `linger` in its [`ConsumerOptions`], to take a burst of
//! events in one transaction). A service that
//! enqueues work (a job, a run request): copy [`MESSAGE_OUTBOX_MIGRATION_SQL`] too, call
//! [`message_outbox_insert`] in the transaction that makes the work due, and spawn a
//! [`MessageRelay`].

pub mod aggregates;
mod connect;
pub mod consume;
pub mod credentials;
mod error;
pub mod messages;
pub mod outbox;
pub mod permissions;
pub mod publish;
mod relay;
pub mod streams;
pub mod subjects;

pub use aggregates::{Aggregate, EventTypes, OWNERS, Owner, UnknownAggregate, owner_of};
pub use connect::{Bus, connect, connect_as, connect_options};
pub use consume::{Consumer, ConsumerOptions, decode, message_span, processed_events_prune};
pub use credentials::{CredentialsError, NatsCredentials, new_user, seed_file};
pub use error::{BusError, Chain, ErrorClass, is_transient_sqlx};
pub use messages::{
    MESSAGE_OUTBOX_MIGRATION_SQL, MESSAGE_OUTBOX_TRACE_MIGRATION_SQL, MessageRelay,
    message_outbox_insert,
};
pub use outbox::{OUTBOX_MIGRATION_SQL, OutboxRelay, new_event, outbox_insert, outbox_row};
pub use permissions::{
    ACCOUNT, NatsUser, Permissions, ServiceRole, UnknownRole, permissions, server_config,
};
pub use publish::{NO_TENANT, event_subject, event_uuid, publish_core, publish_event, publish_msg};
pub use relay::RelaySettings;
pub use streams::{SETUP_COMMAND, StreamSettings, check_streams, setup_streams, stream_config};
pub use subjects::{Namespace, StreamKind, SubjectError, validate_token};
