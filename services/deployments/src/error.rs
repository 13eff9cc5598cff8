//! The service's error type: [`cairn_service::ServiceError`], what every service shares
//! ([`cairn_service::BaseError`]) and a peer's answer (tenancy, templates or the
//! coordinator could not be asked, or refused), with its one mapping to `tonic::Status`.
pub use cairn_service::ServiceError as Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;
