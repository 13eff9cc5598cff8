//! [`BaseError`]: what every service's error shares, and its one exhaustive mapping to
//! `tonic::Status`. A service embeds it (`#[error(transparent)] Base(#[from] BaseError)`)
//! next to its own variants and gets the conversions from [`crate::base_error_conversions!`].
//! [`PeerError`] is a peer service's answer; [`ServiceError`] is the whole error of a service
//! whose only failures are those two.
//!
//! Internal details are logged once, where the status is made, and never sent: the caller
//! reads "internal error".
use cairn_contract::{REASON_METADATA, RefusalReason};
use cairn_db::DbFailure;

/// The failures every service can have.
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    /// The request is malformed; the message says which field and why.
    #[error("{0}")]
    InvalidArgument(String),
    /// Missing, or owned by another tenant: the two are indistinguishable on purpose.
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0} already exists")]
    AlreadyExists(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    /// The system is not in a state that allows this; the message says what to do.
    #[error("{0}")]
    FailedPrecondition(String),
    /// A transaction lost a serialization race or a deadlock: running it again may succeed.
    /// Retried by `cairn_db::transaction!` because of this variant, not its text. The
    /// message names the conflict (libs/db's classification says "transaction conflict").
    #[error("{0}")]
    Conflict(String),
    /// Another kind of lost race (a compare-and-set); the caller may retry.
    #[error("{0}")]
    Aborted(String),
    /// A dependency (PostgreSQL, NATS, S3, KMS) is unreachable; the message names it.
    #[error("{0}")]
    Unavailable(String),
    /// A bug or a broken invariant; logged, never sent.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<sqlx::Error> for BaseError {
    fn from(err: sqlx::Error) -> Self {
        match cairn_db::classify(&err) {
            DbFailure::Unavailable(m) => BaseError::Unavailable(m),
            DbFailure::Conflict(m) => BaseError::Conflict(m),
            DbFailure::Other(m) => BaseError::Internal(m),
        }
    }
}

impl From<cairn_bus::BusError> for BaseError {
    /// An outbox write or a publish that failed, by its type: the database's own
    /// classification when the database refused (a conflict is retried by
    /// `cairn_db::transaction!`), UNAVAILABLE when NATS or the database may answer later, and
    /// otherwise a bug (a subject, an event or an aggregate this service may not write):
    /// INTERNAL.
    fn from(err: cairn_bus::BusError) -> Self {
        match err {
            cairn_bus::BusError::Db { source, .. } => source.into(),
            other if other.is_transient() => {
                BaseError::Unavailable(cairn_bus::Chain(&other).to_string())
            }
            other => BaseError::Internal(cairn_bus::Chain(&other).to_string()),
        }
    }
}

impl From<cairn_auth::AuthError> for BaseError {
    fn from(err: cairn_auth::AuthError) -> Self {
        let message = err.to_string();
        match err.denial() {
            cairn_auth::Denial::Unauthenticated => BaseError::Unauthenticated(message),
            cairn_auth::Denial::PermissionDenied => BaseError::PermissionDenied(message),
            cairn_auth::Denial::NotFound => BaseError::NotFound("resource".to_owned()),
            cairn_auth::Denial::Internal => {
                BaseError::Internal(format!("authentication: {message}"))
            }
        }
    }
}

impl From<cairn_contract::InvalidId> for BaseError {
    fn from(err: cairn_contract::InvalidId) -> Self {
        BaseError::InvalidArgument(err.to_string())
    }
}

impl From<cairn_contract::InvalidEnvironment> for BaseError {
    fn from(err: cairn_contract::InvalidEnvironment) -> Self {
        BaseError::InvalidArgument(err.to_string())
    }
}

impl cairn_db::IsRetryable for BaseError {
    fn is_retryable(&self) -> bool {
        matches!(self, BaseError::Conflict(_))
    }
}

impl From<BaseError> for tonic::Status {
    fn from(err: BaseError) -> Self {
        let msg = err.to_string();
        match err {
            BaseError::InvalidArgument(_) => tonic::Status::invalid_argument(msg),
            BaseError::NotFound(_) => tonic::Status::not_found(msg),
            BaseError::AlreadyExists(_) => tonic::Status::already_exists(msg),
            BaseError::Unauthenticated(_) => tonic::Status::unauthenticated(msg),
            BaseError::PermissionDenied(_) => tonic::Status::permission_denied(msg),
            BaseError::FailedPrecondition(_) => tonic::Status::failed_precondition(msg),
            BaseError::Conflict(_) | BaseError::Aborted(_) => tonic::Status::aborted(msg),
            BaseError::Unavailable(_) => tonic::Status::unavailable(msg),
            BaseError::Internal(_) => {
                tracing::error!(error = %msg, "internal error");
                tonic::Status::internal("internal error")
            }
        }
    }
}

/// Attaches a typed refusal reason to a status as [`REASON_METADATA`].
pub fn status_with_reason(mut status: tonic::Status, reason: RefusalReason) -> tonic::Status {
    status.metadata_mut().insert(
        REASON_METADATA,
        tonic::metadata::AsciiMetadataValue::from_static(reason.code()),
    );
    status
}

/// The typed refusal reason a status carries, if any (the client side of
/// [`status_with_reason`]); an unknown code is `None`, never guessed from the message.
pub fn reason_of(status: &tonic::Status) -> Option<RefusalReason> {
    let code = status.metadata().get(REASON_METADATA)?.to_str().ok()?;
    RefusalReason::from_code(code)
}

/// For a service error enum with a `Base(BaseError)` variant: `From<sqlx::Error>`,
/// `From<BusError>`, `From<AuthError>`, `From<InvalidId>`, `From<InvalidEnvironment>`,
/// `IsRetryable` (a conflict, by type) and constructors named after the shared variants
/// (`Error::not_found("run …")`).
#[macro_export]
macro_rules! base_error_conversions {
    ($error:ty) => {
        impl From<$crate::BaseError> for $error {
            fn from(err: $crate::BaseError) -> Self {
                Self::Base(err)
            }
        }
        impl From<$crate::__private::sqlx::Error> for $error {
            fn from(err: $crate::__private::sqlx::Error) -> Self {
                Self::Base(err.into())
            }
        }
        impl From<$crate::__private::cairn_bus::BusError> for $error {
            fn from(err: $crate::__private::cairn_bus::BusError) -> Self {
                Self::Base(err.into())
            }
        }
        impl From<$crate::__private::cairn_auth::AuthError> for $error {
            fn from(err: $crate::__private::cairn_auth::AuthError) -> Self {
                Self::Base(err.into())
            }
        }
        impl From<$crate::__private::cairn_contract::InvalidId> for $error {
            fn from(err: $crate::__private::cairn_contract::InvalidId) -> Self {
                Self::Base(err.into())
            }
        }
        impl From<$crate::__private::cairn_contract::InvalidEnvironment> for $error {
            fn from(err: $crate::__private::cairn_contract::InvalidEnvironment) -> Self {
                Self::Base(err.into())
            }
        }
        impl $crate::__private::cairn_db::IsRetryable for $error {
            fn is_retryable(&self) -> bool {
                matches!(self, Self::Base(b) if $crate::__private::cairn_db::IsRetryable::is_retryable(b))
            }
        }
        #[allow(dead_code)]
        impl $error {
            pub fn invalid_argument(m: impl Into<String>) -> Self {
                Self::Base($crate::BaseError::InvalidArgument(m.into()))
            }
            pub fn not_found(what: impl Into<String>) -> Self {
                Self::Base($crate::BaseError::NotFound(what.into()))
            }
            pub fn already_exists(what: impl Into<String>) -> Self {
                Self::Base($crate::BaseError::AlreadyExists(what.into()))
            }
            pub fn unauthenticated(m: impl Into<String>) -> Self {
                Self::Base($crate::BaseError::Unauthenticated(m.into()))
            }
            pub fn permission_denied(m: impl Into<String>) -> Self {
                Self::Base($crate::BaseError::PermissionDenied(m.into()))
            }
            pub fn failed_precondition(m: impl Into<String>) -> Self {
                Self::Base($crate::BaseError::FailedPrecondition(m.into()))
            }
            pub fn aborted(m: impl Into<String>) -> Self {
                Self::Base($crate::BaseError::Aborted(m.into()))
            }
            pub fn unavailable(m: impl Into<String>) -> Self {
                Self::Base($crate::BaseError::Unavailable(m.into()))
            }
            pub fn internal(m: impl Into<String>) -> Self {
                Self::Base($crate::BaseError::Internal(m.into()))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use cairn_db::IsRetryable;

    #[derive(Debug, thiserror::Error)]
    enum ServiceError {
        #[error(transparent)]
        Base(BaseError),
        #[error("special")]
        Special,
    }
    crate::base_error_conversions!(ServiceError);

    #[test]
    fn a_conflict_is_retried_because_of_its_type_not_its_text() {
        // The message says nothing about conflicts; the variant does.
        assert!(ServiceError::Base(BaseError::Conflict("x".into())).is_retryable());
        // A message that merely starts like a conflict is not one.
        assert!(!ServiceError::aborted("transaction conflict: no").is_retryable());
        assert!(!ServiceError::Special.is_retryable());
        assert!(!ServiceError::internal("transaction conflict").is_retryable());
    }

    #[test]
    fn statuses_keep_code_and_hide_internals() {
        let s = tonic::Status::from(BaseError::NotFound("run 1".into()));
        assert_eq!(
            (s.code(), s.message()),
            (tonic::Code::NotFound, "run 1 not found")
        );
        let s = tonic::Status::from(BaseError::Internal("secret detail".into()));
        assert_eq!(
            (s.code(), s.message()),
            (tonic::Code::Internal, "internal error")
        );
        let s = tonic::Status::from(BaseError::Conflict("40001".into()));
        assert_eq!(s.code(), tonic::Code::Aborted);
    }

    #[test]
    fn a_peer_error_names_the_peer_its_code_and_message_only() {
        let mut status = tonic::Status::unavailable("connection refused");
        status
            .metadata_mut()
            .insert("x-secret-header", "do-not-show".parse().unwrap());
        let e = PeerError::new("coordinator", "RegisterRun", status);
        assert_eq!(
            e.to_string(),
            "coordinator RegisterRun: unavailable: connection refused"
        );
        let e = PeerError::new(
            "coordinator",
            "GetOutputs",
            tonic::Status::deadline_exceeded("late"),
        );
        assert_eq!(
            e.to_string(),
            "coordinator GetOutputs: deadline exceeded: late"
        );
        assert!(!format!("{e}").contains("metadata"));
        assert!(e.is_transient());
        let refused = PeerError::new(
            "coordinator",
            "GetRegisteredRunConfig",
            tonic::Status::permission_denied("no"),
        );
        assert!(!refused.is_transient());
    }

    #[test]
    fn a_call_whose_connection_broke_is_transient_and_an_unknown_answer_is_not() {
        // What tonic makes of a connection that broke under a call: UNKNOWN "transport
        // error", with the error kept as its source.
        let broken = tonic::Status::from_error(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset by peer",
        )));
        assert_eq!(broken.code(), tonic::Code::Unknown);
        assert!(PeerError::new("coordinator", "GetRegisteredRunConfig", broken).is_transient());
        // The same code answered by the peer is its own verdict.
        let answered = tonic::Status::unknown("transport error");
        assert!(!PeerError::new("coordinator", "GetRegisteredRunConfig", answered).is_transient());
    }

    #[test]
    fn reasons_round_trip_through_a_status() {
        for reason in RefusalReason::ALL {
            let s = status_with_reason(tonic::Status::failed_precondition("no"), reason);
            assert_eq!(reason_of(&s), Some(reason));
        }
        assert_eq!(reason_of(&tonic::Status::aborted("fenced")), None);
    }
}

/// Another Cairn service could not be asked, or refused in a way retrying may change: the
/// caller answers UNAVAILABLE naming the peer and the call (the peer's own message kept,
/// its code logged). Services map the refusals they can decide on (not found, a failed
/// precondition) themselves and wrap the rest in this.
///
/// Its text is the peer's code and message only (`coordinator GetOutputs: unavailable: …`),
/// never the whole `tonic::Status` (metadata, details), since it ends up in records users read
/// (a drift scan's CHECK_FAILED message).
#[derive(Debug, thiserror::Error)]
#[error("{service} {call}: {}: {}", code_name(.status.code()), .status.message())]
pub struct PeerError {
    pub service: &'static str,
    pub call: &'static str,
    pub status: Box<tonic::Status>,
}

impl PeerError {
    pub fn new(service: &'static str, call: &'static str, status: tonic::Status) -> Self {
        PeerError {
            service,
            call,
            status: Box::new(status),
        }
    }

    /// The peer could not be reached or was briefly unable to answer: asking again later may
    /// succeed. Either the call got no answer ([`cairn_sdk::connection_failed`]: a connection
    /// that breaks under a call is UNKNOWN "transport error" or CANCELLED) or the peer's
    /// code says so.
    pub fn is_transient(&self) -> bool {
        cairn_sdk::connection_failed(&self.status)
            || matches!(
                self.status.code(),
                tonic::Code::Cancelled
                    | tonic::Code::DeadlineExceeded
                    | tonic::Code::ResourceExhausted
                    | tonic::Code::Aborted
            )
    }
}

/// A gRPC code as the lower-case words of its name (`deadline exceeded`).
fn code_name(code: tonic::Code) -> String {
    let name = format!("{code:?}");
    let mut words = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            words.push(' ');
        }
        words.push(c.to_ascii_lowercase());
    }
    words
}

impl From<PeerError> for tonic::Status {
    fn from(e: PeerError) -> Self {
        tracing::warn!(service = e.service, call = e.call, code = ?e.status.code(), "peer call failed");
        tonic::Status::unavailable(format!("{} {}: {}", e.service, e.call, e.status.message()))
    }
}

/// The error of a service whose failures are the shared ones and its peers' answers
/// (deployments, drift), with its one mapping to `tonic::Status`; a service with failures
/// of its own (tenancy's rate limits, the coordinator's fence) has an enum of its own.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Base(BaseError),
    /// A peer service could not be asked, or refused.
    #[error(transparent)]
    Peer(#[from] PeerError),
}

crate::base_error_conversions!(ServiceError);

impl From<ServiceError> for tonic::Status {
    fn from(err: ServiceError) -> Self {
        match err {
            ServiceError::Base(b) => b.into(),
            ServiceError::Peer(p) => p.into(),
        }
    }
}

#[cfg(test)]
mod bus_tests {
    use super::*;

    #[test]
    fn a_bus_failure_is_mapped_by_its_type() {
        // The database failing under an outbox write keeps the database's classification
        // (an exhausted pool: try again later; a serialization failure: a conflict).
        let refused = cairn_bus::BusError::from(sqlx::Error::PoolTimedOut);
        assert!(matches!(
            BaseError::from(refused),
            BaseError::Unavailable(_)
        ));
        // A message that can never be written (a bug) is internal, not "try again".
        let bad = cairn_bus::BusError::InvalidMessage("no subject".into());
        assert!(matches!(BaseError::from(bad), BaseError::Internal(_)));
        let mine = ServiceError::from(cairn_bus::BusError::InvalidMessage("x".into()));
        assert_eq!(tonic::Status::from(mine).code(), tonic::Code::Internal);
    }
}
