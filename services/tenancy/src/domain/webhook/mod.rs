//! Webhooks, the pure part: which event types a subscription may name, which URLs and
//! addresses a delivery may go to (no SSRF), the secret and the `Cairn-Signature` header,
//! the JSON body, and what to do after an attempt (retry with backoff, give up, disable).

pub mod address;
pub mod body;
pub mod event_types;
pub mod retry;
pub mod signature;

pub use address::{AddressPolicy, WebhookUrl};
pub use event_types::EventType;
pub use signature::WebhookSecret;

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

/// The id of a webhook subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WebhookId(pub Uuid);

impl WebhookId {
    pub fn new() -> Self {
        WebhookId(Uuid::now_v7())
    }

    /// Parses a request field; the error names the field.
    pub fn parse(field: &'static str, s: &str) -> Result<Self, cairn_contract::InvalidId> {
        Uuid::from_str(s.trim())
            .map(WebhookId)
            .map_err(|_| cairn_contract::InvalidId { field })
    }
}

impl Default for WebhookId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for WebhookId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
