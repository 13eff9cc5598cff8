//! The Rust SDK of Cairn: typed clients for every service ([`Cairn`] hands them out), each
//! call with the caller's access token ([`TokenSource`]: an API token is exchanged with
//! tenancy and refreshed before expiry, an access token used as is), a deadline, and retry
//! with backoff on UNAVAILABLE for idempotent RPCs only ([`Rpc::idempotency`]). Errors carry
//! the server's status and its typed refusal reason ([`Error::reason`]).
//! [`rpc::Deployments::watch_deployment`] follows a deployment and reconnects from its last
//! position. [`endpoint`] is the one rule for reaching a service: `https://` verified
//! against `CAIRN_TLS_CA` (or the system roots), with mTLS from `CAIRN_TLS_CLIENT_*`
//! ([`ClientTls`]). [`run_result`] is the one spelling of how a run ended (its outcome and
//! error class) for the services that store a runner's result.
//!
//! ```no_run
//! # async fn demo() -> Result<(), cairn_sdk::Error> {
//! use cairn_sdk::{Cairn, Credential, proto::deployments as pb};
//! let cairn = Cairn::local(Credential::ApiToken("cairn_…".into()))?;
//! let me = cairn.identity().await?;
//! let instance = cairn
//!     .instances()
//!     .get_instance(pb::GetInstanceRequest {
//!         tenant_id: me.tid.unwrap_or_default(),
//!         instance_ref: "demo".into(),
//!     })
//!     .await?;
//! # Ok(()) }
//! ```

mod claims;
mod client;
mod endpoints;
mod error;
pub mod rpc;
pub mod run_result;
mod tls;
mod token;
mod watch;

/// The run contract shared with the coordinator and the runners: ids, run kinds, the
/// production rule, refusal reasons.
pub use cairn_contract as contract;
pub use cairn_contract::{REASON_METADATA, RefusalReason};
/// The generated messages and tonic clients.
pub use cairn_proto as proto;

pub use claims::{AccessClaims, NotAccessToken};
pub use client::{Cairn, CairnBuilder, CallOptions, DEFAULT_MAX_DECODING_MESSAGE_SIZE};
pub use endpoints::{Endpoint, Endpoints};
pub use error::{Error, code_name, connection_failed, reason_code, reason_of};
pub use rpc::{Idempotency, Rpc};
pub use tls::{
    ClientTls, KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT, TlsSettingError, endpoint, peer_channel,
};
pub use token::{Credential, SERVICE_TOKEN_FILE_VAR, SdkError, TokenInterceptor, TokenSource};
pub use watch::{POLL_INTERVAL, WATCH_MAX_RECONNECTS};
