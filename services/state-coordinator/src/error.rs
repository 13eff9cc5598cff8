//! The coordinator's error type and its one mapping to `tonic::Status` (the HTTP backend
//! has its own mapping to status codes in `http_backend::status`).

use crate::domain::write_rules::WriteConflict;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidArgument(String),
    /// Missing, or owned by another tenant: the two are indistinguishable on purpose.
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    /// The state is fenced (`recovery_required`).
    #[error(
        "state {state_id} requires recovery ({reason}); an admin must inspect and recover it (Recovery.InspectState / Recovery.Recover)"
    )]
    Fenced {
        state_id: uuid::Uuid,
        reason: String,
    },
    /// The attempt's base generation is no longer current.
    #[error("stale run: the state is at generation {current}, this attempt started from {base}")]
    Stale { current: u64, base: u64 },
    #[error(transparent)]
    WriteConflict(#[from] WriteConflict),
    /// The lock is held by another lock id; carries the holder's LockInfo.
    #[error("state is locked by lock {lock_id}")]
    Locked {
        lock_id: String,
        holder: serde_json::Value,
    },
    #[error("{0}")]
    FailedPrecondition(String),
    /// A race was lost; retrying may succeed.
    #[error("{0}")]
    Aborted(String),
    #[error("state document is {size} bytes, the limit is {limit}")]
    TooLarge { size: usize, limit: usize },
    /// Transient trouble with KMS, S3 or PostgreSQL; the message names the cause.
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Self {
        match cairn_db::classify(&err) {
            cairn_db::DbFailure::Unavailable(m) => Error::Unavailable(m),
            cairn_db::DbFailure::Conflict(m) => Error::Aborted(m),
            cairn_db::DbFailure::Other(m) => Error::Internal(m),
        }
    }
}

impl cairn_db::IsRetryable for Error {
    fn is_retryable(&self) -> bool {
        matches!(self, Error::Aborted(m) if m.starts_with("transaction conflict"))
    }
}

impl From<cairn_auth::AuthError> for Error {
    fn from(err: cairn_auth::AuthError) -> Self {
        let message = err.to_string();
        match err.denial() {
            cairn_auth::Denial::Unauthenticated => Error::Unauthenticated(message),
            cairn_auth::Denial::PermissionDenied => Error::PermissionDenied(message),
            cairn_auth::Denial::NotFound => Error::NotFound("resource".to_owned()),
            cairn_auth::Denial::Internal => Error::Internal(format!("authentication: {message}")),
        }
    }
}

impl From<crate::domain::ids::InvalidId> for Error {
    fn from(err: crate::domain::ids::InvalidId) -> Self {
        Error::InvalidArgument(err.to_string())
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let msg = err.to_string();
        match err {
            Error::InvalidArgument(_) | Error::TooLarge { .. } => {
                tonic::Status::invalid_argument(msg)
            }
            Error::NotFound(_) => tonic::Status::not_found(msg),
            Error::Unauthenticated(_) => tonic::Status::unauthenticated(msg),
            Error::PermissionDenied(_) => tonic::Status::permission_denied(msg),
            Error::Fenced { .. } | Error::Stale { .. } | Error::FailedPrecondition(_) => {
                tonic::Status::failed_precondition(msg)
            }
            Error::WriteConflict(_) | Error::Locked { .. } | Error::Aborted(_) => {
                tonic::Status::aborted(msg)
            }
            Error::Unavailable(_) => tonic::Status::unavailable(msg),
            Error::Internal(_) => {
                tracing::error!(error = %msg, "internal error");
                tonic::Status::internal("internal error")
            }
        }
    }
}
