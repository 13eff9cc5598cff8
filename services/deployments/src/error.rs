//! The service's error type and its one, exhaustive mapping to `tonic::Status`: what every
//! service shares is [`BaseError`]; deployments adds a peer service's answer.
use cairn_service::{BaseError, PeerError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Base(BaseError),
    /// Tenancy or templates could not be asked (unreachable, or refused the service token).
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
