//! The bus error type and its classification into transient (retry later) and permanent.

use async_nats::jetstream::consumer::StreamError as MessagesSetupError;
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::context::{
    CreateStreamError, CreateStreamErrorKind, GetStreamError, GetStreamErrorKind, PublishError,
};
use async_nats::jetstream::stream::{ConsumerError, ConsumerErrorKind};
use cairn_db::IsRetryable;

use crate::subjects::SubjectError;

/// Everything that can go wrong on the bus.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error("invalid subject")]
    Subject(#[from] SubjectError),
    /// The event cannot be published or stored as it is (e.g. its id is not a UUID).
    #[error("invalid event: {0}")]
    InvalidEvent(String),
    /// A service stating an event of an aggregate (or event type) its role does not own
    /// ([`crate::aggregates::OWNERS`]): its NATS user could not publish it.
    #[error("{role} does not state {aggregate}.{event_type} events (owner: {})", owner.map_or("none", |o| o.name()))]
    NotOwner {
        role: crate::permissions::ServiceRole,
        aggregate: String,
        event_type: String,
        owner: Option<crate::permissions::ServiceRole>,
    },
    /// A message cannot be published as it is (e.g. an empty `Nats-Msg-Id`).
    #[error("invalid message: {0}")]
    InvalidMessage(String),
    #[error("decode protobuf message")]
    Decode(#[from] prost::DecodeError),
    #[error("publish to {subject}")]
    Publish {
        subject: String,
        #[source]
        source: PublishError,
    },
    #[error("publish to {subject} on core NATS")]
    CorePublish {
        subject: String,
        #[source]
        source: async_nats::client::PublishError,
    },
    #[error("set up stream {stream}")]
    Stream {
        stream: String,
        #[source]
        source: CreateStreamError,
    },
    /// A service found a stream missing at start-up: the setup step has not run.
    #[error(
        "JetStream stream {stream} does not exist: create the streams first with `{}` \
         (admin credentials)",
        crate::streams::SETUP_COMMAND
    )]
    StreamMissing { stream: String },
    #[error("look up stream {stream}")]
    StreamCheck {
        stream: String,
        #[source]
        source: GetStreamError,
    },
    #[error("NATS credentials")]
    Credentials(#[from] crate::credentials::CredentialsError),
    #[error("set up consumer {durable} on stream {stream}")]
    Consumer {
        stream: String,
        durable: String,
        #[source]
        source: ConsumerError,
    },
    #[error("invalid consumer settings: {0}")]
    ConsumerSettings(String),
    #[error("pull messages for consumer {durable}")]
    Messages {
        durable: String,
        #[source]
        source: MessagesSetupError,
    },
    #[error("acknowledge message")]
    Ack(#[source] async_nats::Error),
    #[error("connect to NATS at {url}")]
    Connect {
        url: String,
        #[source]
        source: async_nats::ConnectError,
    },
    #[error("{context}")]
    Db {
        context: &'static str,
        #[source]
        source: sqlx::Error,
    },
}

/// Whether retrying the same operation later can succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// NATS or PostgreSQL unavailable, timed out, overloaded, a serialization failure…
    Transient,
    /// The input or the configuration is wrong; retrying gives the same answer.
    Permanent,
}

impl BusError {
    pub(crate) fn db(context: &'static str) -> impl FnOnce(sqlx::Error) -> BusError {
        move |source| BusError::Db { context, source }
    }

    /// Transient or permanent.
    pub fn class(&self) -> ErrorClass {
        let transient = match self {
            BusError::Subject(_)
            | BusError::InvalidEvent(_)
            | BusError::NotOwner { .. }
            | BusError::InvalidMessage(_)
            | BusError::Decode(_)
            | BusError::ConsumerSettings(_) => false,
            BusError::Publish { source, .. } => match source.kind() {
                PublishErrorKind::StreamNotFound
                | PublishErrorKind::TimedOut
                | PublishErrorKind::BrokenPipe
                | PublishErrorKind::MaxAckPending
                | PublishErrorKind::Other => true,
                PublishErrorKind::WrongLastMessageId
                | PublishErrorKind::WrongLastSequence
                | PublishErrorKind::MaxPayloadExceeded => false,
            },
            BusError::Stream { source, .. } => match source.kind() {
                CreateStreamErrorKind::JetStreamUnavailable
                | CreateStreamErrorKind::TimedOut
                | CreateStreamErrorKind::Response => true,
                CreateStreamErrorKind::JetStream(err) => err.code() >= 500,
                CreateStreamErrorKind::EmptyStreamName
                | CreateStreamErrorKind::InvalidStreamName
                | CreateStreamErrorKind::DomainAndExternalSet
                | CreateStreamErrorKind::NotFound
                | CreateStreamErrorKind::ResponseParse => false,
            },
            BusError::StreamMissing { .. } | BusError::Credentials(_) => false,
            BusError::StreamCheck { source, .. } => match source.kind() {
                GetStreamErrorKind::Request => true,
                GetStreamErrorKind::JetStream(err) => err.code() >= 500,
                GetStreamErrorKind::EmptyName | GetStreamErrorKind::InvalidStreamName => false,
            },
            BusError::Consumer { source, .. } => match source.kind() {
                ConsumerErrorKind::TimedOut | ConsumerErrorKind::Request => true,
                ConsumerErrorKind::JetStream(err) => err.code() >= 500,
                ConsumerErrorKind::InvalidConsumerType
                | ConsumerErrorKind::InvalidName
                | ConsumerErrorKind::Other => false,
            },
            BusError::CorePublish { .. }
            | BusError::Messages { .. }
            | BusError::Ack(_)
            | BusError::Connect { .. } => true,
            BusError::Db { source, .. } => is_transient_sqlx(source),
        };
        if transient {
            ErrorClass::Transient
        } else {
            ErrorClass::Permanent
        }
    }

    /// Shorthand for `class() == ErrorClass::Transient`.
    pub fn is_transient(&self) -> bool {
        self.class() == ErrorClass::Transient
    }
}

/// Connection trouble, pool exhaustion, server shutdown, serialization failures and
/// deadlocks are transient; constraint violations, missing tables and bad SQL are not.
pub fn is_transient_sqlx(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // 08 connection exception, 40 transaction rollback, 53 insufficient resources,
            // 57P01..57P03 shutdown / cannot connect now.
            code.starts_with("08")
                || code.starts_with("40")
                || code.starts_with("53")
                || matches!(code.as_ref(), "57P01" | "57P02" | "57P03")
        }),
        _ => false,
    }
}

impl From<sqlx::Error> for BusError {
    fn from(source: sqlx::Error) -> Self {
        BusError::Db {
            context: "database",
            source,
        }
    }
}

impl IsRetryable for BusError {
    fn is_retryable(&self) -> bool {
        match self {
            BusError::Db { source, .. } => cairn_db::is_retryable_sqlx(source),
            _ => false,
        }
    }
}

/// The one error-chain formatter, re-exported for the bus's callers.
pub use cairn_telemetry::Chain;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let permanent = BusError::InvalidEvent("event id is empty".into());
        assert_eq!(permanent.class(), ErrorClass::Permanent);
        let subject: BusError = SubjectError::Empty { what: "target" }.into();
        assert!(!subject.is_transient());
        let timed_out = BusError::Publish {
            subject: "cairn.deployq".into(),
            source: PublishError::new(PublishErrorKind::TimedOut),
        };
        assert!(timed_out.is_transient());
        let too_big = BusError::Publish {
            subject: "cairn.deployq".into(),
            source: PublishError::new(PublishErrorKind::MaxPayloadExceeded),
        };
        assert!(!too_big.is_transient());
        let pool = BusError::from(sqlx::Error::PoolTimedOut);
        assert!(pool.is_transient());
        assert!(!pool.is_retryable());
        let missing = BusError::from(sqlx::Error::RowNotFound);
        assert!(!missing.is_transient());
    }

    #[test]
    fn chain_lists_sources() {
        let err = BusError::Db {
            context: "load outbox",
            source: sqlx::Error::PoolTimedOut,
        };
        let text = Chain(&err).to_string();
        assert!(text.starts_with("load outbox: "), "{text}");
        assert!(text.len() > "load outbox: ".len());
    }
}
