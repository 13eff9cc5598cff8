//! The JSON body of a delivery. Built from the stored delivery on every attempt, with fields
//! in a fixed order, so every attempt sends the same bytes (only the signature's `t` moves).
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

/// What a delivery says.
#[derive(Debug, Clone, Serialize)]
pub struct Body<'a> {
    pub event_id: String,
    #[serde(rename = "type")]
    pub event_type: &'a str,
    pub tenant: String,
    pub occurred_at: String,
    pub sequence: i64,
    pub webhook_id: String,
    /// The event's ids and non-secret summary.
    pub data: &'a serde_json::Value,
}

/// RFC 3339 with milliseconds, UTC (`2026-05-01T12:00:00.000Z`).
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl Body<'_> {
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serializing strings, integers and a JSON value cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}
