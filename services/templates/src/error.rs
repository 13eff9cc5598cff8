//! The service's error type and its one, exhaustive mapping to `tonic::Status`.
use cairn_templating::Problems;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidArgument(String),
    /// A document or resolve request with problems; every one is listed.
    #[error("{0}")]
    Invalid(Problems),
    /// Missing, or owned by another tenant: the two are indistinguishable on purpose.
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    /// A stored version no longer validates against the current module library.
    #[error("{0}")]
    FailedPrecondition(String),
    /// A race was lost; retrying may succeed.
    #[error("{0}")]
    Aborted(String),
    /// PostgreSQL is unreachable; the message names the cause.
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

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let msg = err.to_string();
        match err {
            Error::InvalidArgument(_) | Error::Invalid(_) => tonic::Status::invalid_argument(msg),
            Error::NotFound(_) => tonic::Status::not_found(msg),
            Error::Unauthenticated(_) => tonic::Status::unauthenticated(msg),
            Error::PermissionDenied(_) => tonic::Status::permission_denied(msg),
            Error::FailedPrecondition(_) => tonic::Status::failed_precondition(msg),
            Error::Aborted(_) => tonic::Status::aborted(msg),
            Error::Unavailable(_) => tonic::Status::unavailable(msg),
            Error::Internal(_) => {
                tracing::error!(error = %msg, "internal error");
                tonic::Status::internal("internal error")
            }
        }
    }
}
