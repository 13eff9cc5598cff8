//! The service's error type and its one, exhaustive mapping to `tonic::Status`: what every
//! service shares is [`BaseError`]; tenancy adds only its rate limit.
use cairn_service::BaseError;

use crate::domain::Invalid;
use crate::domain::api_token::RandomFailed;
use crate::domain::password::HashError;
use crate::domain::roles::GrantRefused;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Base(BaseError),
    /// Too many attempts; try again later.
    #[error("{0}")]
    RateLimited(String),
}

cairn_service::base_error_conversions!(Error);

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The one answer to a login or exchange that fails for any reason about the credentials.
pub const BAD_CREDENTIALS: &str = "invalid credentials";

impl Error {
    pub fn bad_credentials() -> Self {
        Error::unauthenticated(BAD_CREDENTIALS)
    }

    /// Bad credentials, a bad or expired token: the caller is not who it claims.
    pub fn is_unauthenticated(&self) -> bool {
        matches!(self, Error::Base(BaseError::Unauthenticated(_)))
    }
}

impl From<Invalid> for Error {
    fn from(err: Invalid) -> Self {
        Error::invalid_argument(err.0)
    }
}

impl From<GrantRefused> for Error {
    fn from(err: GrantRefused) -> Self {
        Error::permission_denied(err.to_string())
    }
}

impl From<HashError> for Error {
    fn from(err: HashError) -> Self {
        Error::internal(err.to_string())
    }
}

impl From<RandomFailed> for Error {
    fn from(err: RandomFailed) -> Self {
        Error::internal(err.to_string())
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        match err {
            Error::Base(b) => b.into(),
            Error::RateLimited(m) => tonic::Status::resource_exhausted(m),
        }
    }
}
