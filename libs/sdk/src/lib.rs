//! Client-side helpers for Cairn's gRPC APIs. [`TokenSource`] turns a service API token
//! (`CAIRN_SERVICE_TOKEN_FILE`) into short-lived access tokens from tenancy and keeps them
//! fresh; [`TokenInterceptor`] puts the current one on every outgoing request.

mod token;

/// The run contract shared with the coordinator and the runners: ids, run kinds, the
/// production rule, refusal reasons.
pub use cairn_contract as contract;

pub use token::{Credential, SERVICE_TOKEN_FILE_VAR, SdkError, TokenInterceptor, TokenSource};
