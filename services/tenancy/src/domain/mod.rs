//! Pure types and rules of tenancy: ids, names, targets, API token format, passwords and
//! audit records, webhooks. No SQL, gRPC or NATS here.

pub mod api_token;
pub mod audit;
pub mod ids;
pub mod names;
pub mod password;
pub mod roles;
pub mod target;
pub mod validation;
pub mod webhook;

/// A value from a request that breaks a rule; the message says which and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl Invalid {
    pub fn new(msg: impl Into<String>) -> Self {
        Invalid(msg.into())
    }
}
