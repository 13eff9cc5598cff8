//! Connecting a service to NATS: the connection, its JetStream context and the streams it
//! needs (idempotent), in one call that every service makes at start-up.
use async_nats::jetstream;

use crate::error::BusError;
use crate::streams::{StreamSettings, ensure_streams};
use crate::subjects::Namespace;

/// A service's NATS connection.
#[derive(Clone)]
pub struct Bus {
    /// The core connection (cancel requests, subscriptions).
    pub client: async_nats::Client,
    /// Its JetStream context.
    pub js: jetstream::Context,
    /// The subject and stream names.
    pub ns: Namespace,
}

/// Connects to `url` and makes sure the streams of `ns` exist with `settings`.
pub async fn connect(url: &str, ns: Namespace, settings: &StreamSettings) -> Result<Bus, BusError> {
    let client = async_nats::connect(url)
        .await
        .map_err(|source| BusError::Connect {
            url: url.to_owned(),
            source,
        })?;
    let js = jetstream::new(client.clone());
    ensure_streams(&js, &ns, settings).await?;
    Ok(Bus { client, js, ns })
}
