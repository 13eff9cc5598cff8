//! The service's error type and its one mapping to `tonic::Status`.
use crate::domain::Invalid;
use crate::domain::api_token::RandomFailed;
use crate::domain::password::HashError;
use crate::domain::roles::GrantRefused;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidArgument(String),
    /// Missing, or owned by another tenant: the two are indistinguishable on purpose.
    #[error("{0} not found")]
    NotFound(String),
    /// Bad credentials; the message is the same whatever was wrong.
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0} already exists")]
    AlreadyExists(String),
    #[error("{0}")]
    FailedPrecondition(String),
    /// Too many attempts; try again later.
    #[error("{0}")]
    RateLimited(String),
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

/// The one answer to a login or exchange that fails for any reason about the credentials.
pub const BAD_CREDENTIALS: &str = "invalid credentials";

impl Error {
    pub fn bad_credentials() -> Self {
        Error::Unauthenticated(BAD_CREDENTIALS.to_owned())
    }
}

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

impl From<Invalid> for Error {
    fn from(err: Invalid) -> Self {
        Error::InvalidArgument(err.0)
    }
}

impl From<GrantRefused> for Error {
    fn from(err: GrantRefused) -> Self {
        Error::PermissionDenied(err.to_string())
    }
}

impl From<HashError> for Error {
    fn from(err: HashError) -> Self {
        Error::Internal(err.to_string())
    }
}

impl From<RandomFailed> for Error {
    fn from(err: RandomFailed) -> Self {
        Error::Internal(err.to_string())
    }
}

impl From<cairn_bus::BusError> for Error {
    fn from(err: cairn_bus::BusError) -> Self {
        Error::Internal(format!("event: {}", cairn_bus::Chain(&err)))
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let msg = err.to_string();
        match err {
            Error::InvalidArgument(_) => tonic::Status::invalid_argument(msg),
            Error::NotFound(_) => tonic::Status::not_found(msg),
            Error::Unauthenticated(_) => tonic::Status::unauthenticated(msg),
            Error::PermissionDenied(_) => tonic::Status::permission_denied(msg),
            Error::AlreadyExists(_) => tonic::Status::already_exists(msg),
            Error::FailedPrecondition(_) => tonic::Status::failed_precondition(msg),
            Error::RateLimited(_) => tonic::Status::resource_exhausted(msg),
            Error::Aborted(_) => tonic::Status::aborted(msg),
            Error::Unavailable(_) => tonic::Status::unavailable(msg),
            Error::Internal(_) => {
                tracing::error!(error = %msg, "internal error");
                tonic::Status::internal("internal error")
            }
        }
    }
}
