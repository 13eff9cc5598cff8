//! The service's error type and its one, exhaustive mapping to `tonic::Status`: what every
//! service shares is [`BaseError`]; drift adds a peer's (the coordinator's) answer.
use cairn_service::BaseError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Base(BaseError),
    /// The coordinator could not be asked or refused.
    #[error("{service}: {call}: {status}")]
    Peer {
        service: &'static str,
        call: &'static str,
        status: Box<tonic::Status>,
    },
}

cairn_service::base_error_conversions!(Error);

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        match err {
            Error::Base(b) => b.into(),
            Error::Peer {
                service,
                call,
                status,
            } => {
                tracing::warn!(service, call, code = ?status.code(), "peer call failed");
                tonic::Status::unavailable(format!("{service} {call}: {}", status.message()))
            }
        }
    }
}
