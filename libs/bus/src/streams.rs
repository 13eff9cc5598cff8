//! Cairn's five JetStream streams: [`setup_streams`] creates or brings them up to date (the
//! admin's setup step, `cairn-tenancy nats setup`; safe to run concurrently and repeatedly),
//! [`check_streams`] is what a service does at start-up: it only asks whether the streams
//! it uses exist, which its NATS user may do (see [`crate::permissions`](mod@crate::permissions)).

use std::time::Duration;

use async_nats::jetstream::context::{CreateStreamErrorKind, GetStreamErrorKind};
use async_nats::jetstream::stream::{Config, RetentionPolicy, StorageType};
use async_nats::jetstream::{self, ErrorCode};

use crate::error::BusError;
use crate::subjects::{Namespace, StreamKind};

/// Tunables of the streams. `Default` gives the production values.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSettings {
    /// Server-side `Nats-Msg-Id` deduplication window of every stream (default 2 min).
    /// Outbox relays and publishers that retry within it never produce duplicates.
    pub duplicate_window: Duration,
    /// How long redacted run logs are kept (default 1 h).
    pub runlog_max_age: Duration,
    /// How long domain events are kept (default 30 days; zero = no age limit).
    pub events_max_age: Duration,
    /// How long run results are kept (default 7 days; zero = no age limit).
    pub runres_max_age: Duration,
    /// Replicas per stream (1 on a single server).
    pub replicas: usize,
}

impl Default for StreamSettings {
    fn default() -> Self {
        Self {
            duplicate_window: Duration::from_secs(120),
            runlog_max_age: Duration::from_secs(3600),
            events_max_age: Duration::from_secs(30 * 24 * 3600),
            runres_max_age: Duration::from_secs(7 * 24 * 3600),
            replicas: 1,
        }
    }
}

/// The configuration a stream should have.
pub fn stream_config(ns: &Namespace, settings: &StreamSettings, kind: StreamKind) -> Config {
    let (retention, max_age, description) = match kind {
        StreamKind::Events => (
            RetentionPolicy::Limits,
            settings.events_max_age,
            "Cairn domain events",
        ),
        StreamKind::RunQ => (
            RetentionPolicy::WorkQueue,
            Duration::ZERO,
            "Cairn run requests per target",
        ),
        StreamKind::RunRes => (
            RetentionPolicy::Limits,
            settings.runres_max_age,
            "Cairn run results",
        ),
        StreamKind::RunLog => (
            RetentionPolicy::Limits,
            settings.runlog_max_age,
            "Cairn redacted run logs",
        ),
        StreamKind::DeployQ => (
            RetentionPolicy::WorkQueue,
            Duration::ZERO,
            "Cairn deployment jobs",
        ),
    };
    // The server refuses a duplicate window longer than the maximum age.
    let duplicate_window = if max_age.is_zero() {
        settings.duplicate_window
    } else {
        settings.duplicate_window.min(max_age)
    };
    Config {
        name: ns.stream_name(kind),
        subjects: vec![ns.stream_subject(kind)],
        retention,
        max_age,
        duplicate_window,
        storage: StorageType::File,
        num_replicas: settings.replicas,
        description: Some(description.to_owned()),
        ..Default::default()
    }
}

/// The command that creates the streams, named by a missing stream's error.
pub const SETUP_COMMAND: &str = "cairn-tenancy nats setup";

/// Creates the five streams, or updates a stream whose configuration differs (a changed
/// duplicate window or max age, or subjects: `CAIRN_RUNQ` made as `cairn.runq.*` before
/// validation requests had a subject of their own becomes `cairn.runq.>`). Idempotent; two processes may run it at the same time.
/// Needs the JetStream API rights of the admin role.
pub async fn setup_streams(
    js: &jetstream::Context,
    ns: &Namespace,
    settings: &StreamSettings,
) -> Result<(), BusError> {
    for kind in StreamKind::ALL {
        ensure_stream(js, stream_config(ns, settings, kind)).await?;
    }
    Ok(())
}

/// Checks that the streams `kinds` of `ns` exist (stream info only, nothing is created).
/// A missing stream is [`BusError::StreamMissing`], naming it and [`SETUP_COMMAND`].
pub async fn check_streams(
    js: &jetstream::Context,
    ns: &Namespace,
    kinds: &[StreamKind],
) -> Result<(), BusError> {
    for kind in kinds {
        let stream = ns.stream_name(*kind);
        match js.get_stream(&stream).await {
            Ok(_) => {}
            Err(err) => {
                return Err(match err.kind() {
                    GetStreamErrorKind::JetStream(js_err)
                        if js_err.error_code() == ErrorCode::STREAM_NOT_FOUND =>
                    {
                        BusError::StreamMissing { stream }
                    }
                    _ => BusError::StreamCheck {
                        stream,
                        source: err,
                    },
                });
            }
        }
    }
    Ok(())
}

async fn ensure_stream(js: &jetstream::Context, config: Config) -> Result<(), BusError> {
    let stream = config.name.clone();
    let wrap = |source| BusError::Stream {
        stream: stream.clone(),
        source,
    };
    // Creating a stream that exists with an identical configuration succeeds on the server,
    // so concurrent callers with the same settings both succeed.
    match js.create_stream(config.clone()).await {
        Ok(_) => Ok(()),
        Err(err) => match err.kind() {
            CreateStreamErrorKind::JetStream(js_err)
                if js_err.error_code() == ErrorCode::STREAM_NAME_EXIST =>
            {
                tracing::info!(stream = %stream, "updating stream configuration");
                js.update_stream(&config).await.map(|_| ()).map_err(wrap)
            }
            // A concurrent caller may have just created this very stream: NATS 2.9 then
            // reports an overlap with it rather than "name exists". Converge on our config
            // if the overlapping stream is ours; a foreign overlap stays an error.
            CreateStreamErrorKind::JetStream(js_err)
                if js_err.error_code() == ErrorCode::STREAM_SUBJECT_OVERLAP
                    && js.get_stream(&config.name).await.is_ok() =>
            {
                tracing::info!(stream = %stream, "stream created concurrently; updating its configuration");
                js.update_stream(&config).await.map(|_| ()).map_err(wrap)
            }
            _ => Err(wrap(err)),
        },
    }
}
