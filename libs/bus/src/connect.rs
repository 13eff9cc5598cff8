//! Connecting a service to NATS as its role: its credentials, an inbox of its own, its
//! JetStream context, and the check that the streams it uses exist (created beforehand by
//! the admin's setup step, [`crate::setup_streams`]).
use async_nats::jetstream;

use crate::credentials::NatsCredentials;
use crate::error::BusError;
use crate::permissions::ServiceRole;
use crate::streams::check_streams;
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

/// The connect options of `role`: its name, an inbox of its own
/// ([`ServiceRole::inbox_prefix`]) and its `credentials` when the server has users.
pub fn connect_options(
    role: ServiceRole,
    credentials: Option<&NatsCredentials>,
) -> Result<async_nats::ConnectOptions, BusError> {
    let options = async_nats::ConnectOptions::new()
        .name(format!("cairn-{role}"))
        .custom_inbox_prefix(role.inbox_prefix());
    Ok(match credentials {
        Some(credentials) => credentials.apply(options)?,
        None => options,
    })
}

/// Connects to `url` as `role` ([`connect_options`]), without touching any stream.
pub async fn connect_as(
    url: &str,
    role: ServiceRole,
    credentials: Option<&NatsCredentials>,
) -> Result<async_nats::Client, BusError> {
    connect_options(role, credentials)?
        .connect(url)
        .await
        .map_err(|source| BusError::Connect {
            url: url.to_owned(),
            source,
        })
}

/// Connects to `url` as `role` and checks that the streams of `ns` the role uses exist.
pub async fn connect(
    url: &str,
    ns: Namespace,
    role: ServiceRole,
    credentials: Option<&NatsCredentials>,
) -> Result<Bus, BusError> {
    let client = connect_as(url, role, credentials).await?;
    let js = jetstream::new(client.clone());
    check_streams(&js, &ns, role.streams()).await?;
    Ok(Bus { client, js, ns })
}
