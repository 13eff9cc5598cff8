//! The service's error type and its one, exhaustive mapping to `tonic::Status`: what every
//! service shares is [`BaseError`]; templates adds only a document's problems.
use cairn_service::BaseError;
use cairn_templating::Problems;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Base(BaseError),
    /// A document or resolve request with problems; every one is listed.
    #[error("{0}")]
    Invalid(Problems),
}

cairn_service::base_error_conversions!(Error);

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        match err {
            Error::Base(b) => b.into(),
            Error::Invalid(p) => tonic::Status::invalid_argument(p.to_string()),
        }
    }
}
