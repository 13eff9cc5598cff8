//! [`peer_client`]: how a service calls the other services — the SDK's typed clients
//! ([`Cairn`]) on the peer channels the service built from its settings, with its service
//! token, a deadline per try, retry with backoff on UNAVAILABLE for idempotent calls only
//! (the SDK's one list of which calls those are), and no limit on the size of an answer
//! (a resolved root config or a saved plan can be large; peers are trusted). The channels
//! carry the service's client TLS settings ([`crate::SharedArgs::client_tls`]); nothing here
//! reads them from the environment.
use cairn_sdk::{Cairn, CallOptions, ClientTls, Endpoint, TokenSource};
use tonic::transport::Channel;

/// The call policy between services.
pub fn peer_call_options() -> CallOptions {
    CallOptions {
        max_decoding_message_size: usize::MAX,
        ..CallOptions::default()
    }
}

/// The platform client of a service: `peers` are the (endpoint, URL, channel) it is
/// configured with; calls authenticate with `tokens` (keep it fresh with
/// [`TokenSource::spawn_refresh`]) and follow `options` (usually [`peer_call_options`]; a
/// caller that retries on its own, like drift's scheduler, sets `max_attempts` to 1).
pub fn peer_client<'a>(
    tokens: &TokenSource,
    options: CallOptions,
    peers: impl IntoIterator<Item = (Endpoint, &'a str, Channel)>,
) -> Result<Cairn, cairn_sdk::Error> {
    peers
        .into_iter()
        .fold(Cairn::builder(), |b, (endpoint, url, channel)| {
            b.channel(endpoint, url, channel)
        })
        .token_source(tokens.clone())
        .options(options)
        // Every endpoint the service calls has its channel above; the SDK's own channels
        // for the rest are never dialled, so they get no TLS settings (and the SDK does not
        // fall back to reading CAIRN_TLS_* from the environment).
        .tls(ClientTls::default())
        .build()
}
