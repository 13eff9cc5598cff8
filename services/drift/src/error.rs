//! The service's error type and its one, exhaustive mapping to `tonic::Status`: what every
//! service shares is [`BaseError`]; drift adds a peer's (the coordinator's) answer.
use cairn_service::{BaseError, PeerError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Base(BaseError),
    /// The coordinator could not be asked or refused.
    #[error(transparent)]
    Peer(#[from] PeerError),
}

cairn_service::base_error_conversions!(Error);

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        match err {
            Error::Base(b) => b.into(),
            Error::Peer(p) => p.into(),
        }
    }
}
