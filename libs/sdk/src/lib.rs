//! Client-side helpers for Cairn's gRPC APIs. [`TokenSource`] turns a service API token
//! (`CAIRN_SERVICE_TOKEN_FILE`) into short-lived access tokens from tenancy and keeps them
//! fresh; [`TokenInterceptor`] puts the current one on every outgoing request.

mod token;

pub use token::{Credential, SERVICE_TOKEN_FILE_VAR, SdkError, TokenInterceptor, TokenSource};
