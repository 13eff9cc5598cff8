//! The start-up steps that services with a schema, NATS outboxes and peers take the same
//! way, and why one failed ([`StartupError`]). A service's own `StartError` wraps it
//! (`#[error(transparent)] Startup(#[from] StartupError)`) beside the steps that are its own,
//! so the steps' errors read the same in every service:
//!
//! - [`foundation`]: the first steps of a service with a schema and both outboxes at once
//!   (its schema, NATS as its role, the relays), in that order;
//! - [`database`]: the profile's NATS rule first (production refuses NATS without
//!   credentials before the schema is touched), then the schema as the migrator and a pool
//!   of the runtime role;
//! - [`spawn_relays`]: the relays of the event outbox and the message outbox;
//! - [`service_tokens`]: who the service is to its peers (its service token, refreshed in the
//!   background);
//! - [`peer_channels`]: tenancy's and the coordinator's channels and the service token, from
//!   [`PeerArgs`];
//! - [`lazy_channel`]: a channel to a peer that connects on first use ([`peer_channel`]:
//!   with the services' per-call timeout, [`PEER_CALL_TIMEOUT`]);
//! - [`key_set`]: the public keys that verify access tokens;
//! - [`grpc_listener`]: the service's gRPC listener bound, with its metrics listener.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cairn_auth::{AuthError, KeySet};
use cairn_bus::{Bus, MessageRelay, OutboxRelay, ServiceRole};
use cairn_sdk::{ClientTls, Credential, SdkError, TlsSettingError, TokenSource};
use sqlx::PgPool;
use tokio::sync::Notify;
use tonic::transport::Channel;

use crate::args::{DbArgs, JwksArgs, NatsArgs, NatsSetupError, PeerArgs, SharedArgs};
use crate::grpc::{GrpcServer, ServeError};
use crate::metrics::Metric;
use crate::profile::{Profile, Refusal};
use crate::tasks::Tasks;

/// Why a shared start-up step failed (the scaffold prints the whole chain).
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("database")]
    Database(#[source] cairn_db::DbError),
    #[error("NATS")]
    Nats(#[source] NatsSetupError),
    #[error("service token {}", path.display())]
    ServiceToken {
        path: PathBuf,
        #[source]
        source: SdkError,
    },
    #[error("endpoint {url:?}")]
    Endpoint {
        url: String,
        #[source]
        source: TlsSettingError,
    },
    #[error("peer clients")]
    Peers(#[source] cairn_sdk::Error),
    #[error("JWT public keys {}", path.display())]
    Keys {
        path: PathBuf,
        #[source]
        source: AuthError,
    },
    #[error("gRPC server")]
    Grpc(#[source] ServeError),
}

impl From<ServeError> for StartupError {
    fn from(e: ServeError) -> Self {
        Self::Grpc(e)
    }
}

/// The schema `schema` (by default) migrated with `migrator` as the migrator, and a pool of
/// the runtime role; before it, the production `profile`'s refusal of NATS without
/// credentials, so a refused configuration changes nothing.
pub async fn database(
    profile: Profile,
    nats: &NatsArgs,
    db: &DbArgs,
    schema: &str,
    migrator: &cairn_db::Migrator,
) -> Result<PgPool, StartupError> {
    profile
        .check(nats.profile_fact())
        .map_err(|refusal| StartupError::Nats(refusal.into()))?;
    db.migrate_and_connect(schema, migrator, &[])
        .await
        .map_err(StartupError::Database)
}

/// What a service with a schema and both outboxes holds once its first steps are done.
pub struct Foundation {
    /// A pool of the runtime role on the migrated schema.
    pub pool: PgPool,
    /// NATS as the service's role, its streams there.
    pub bus: Bus,
    /// The relays so far; the service adds its own tasks.
    pub tasks: Tasks,
    /// What wakes the relays after a commit.
    pub wakers: RelayWakers,
}

/// The first steps of a service with a schema and both outboxes: [`database`] (the
/// `profile`'s NATS rule, then the schema migrated), NATS connected as `role`, and the
/// outboxes' relays started ([`spawn_relays`]).
pub async fn foundation(
    profile: Profile,
    nats: &NatsArgs,
    db: &DbArgs,
    schema: &str,
    migrator: &cairn_db::Migrator,
    role: ServiceRole,
) -> Result<Foundation, StartupError> {
    let pool = database(profile, nats, db, schema, migrator).await?;
    let bus = nats
        .connect(role, profile)
        .await
        .map_err(StartupError::Nats)?;
    let mut tasks = Tasks::new();
    let wakers = spawn_relays(&pool, &bus, &mut tasks);
    Ok(Foundation {
        pool,
        bus,
        tasks,
        wakers,
    })
}

/// What wakes the outboxes' relays: notify after committing a row.
#[derive(Debug, Clone, Default)]
pub struct RelayWakers {
    /// The event outbox's relay (`cairn.events.>`).
    pub events: Arc<Notify>,
    /// The message outbox's relay (jobs, run requests, validation requests).
    pub messages: Arc<Notify>,
}

impl RelayWakers {
    /// Starts the relays of both outboxes of `pool` on `bus`, woken by these wakers and
    /// stopped with `tasks` (for a service whose parts need the wakers before it has a bus).
    pub fn spawn_relays(&self, pool: &PgPool, bus: &Bus, tasks: &mut Tasks) {
        let events = OutboxRelay::new(
            pool.clone(),
            bus.js.clone(),
            bus.ns.clone(),
            self.events.clone(),
        )
        .spawn(tasks.child_token());
        tasks.spawn(async move {
            let _ = events.await;
        });
        let messages = MessageRelay::new(
            pool.clone(),
            bus.js.clone(),
            bus.ns.clone(),
            self.messages.clone(),
        )
        .spawn(tasks.child_token());
        tasks.spawn(async move {
            let _ = messages.await;
        });
    }
}

/// Starts the relays of both outboxes of `pool` on `bus`, stopped with `tasks`; returns what
/// wakes them.
pub fn spawn_relays(pool: &PgPool, bus: &Bus, tasks: &mut Tasks) -> RelayWakers {
    let wakers = RelayWakers::default();
    wakers.spawn_relays(pool, bus, tasks);
    wakers
}

/// The service's token source: the service token in `file` (an API token is exchanged with
/// tenancy over `tenancy`; an access token is used as is), refreshed in the background until
/// `tasks` stop.
pub fn service_tokens(
    file: &std::path::Path,
    tenancy: Option<Channel>,
    tasks: &mut Tasks,
) -> Result<TokenSource, StartupError> {
    let credential = Credential::from_file(file).map_err(|source| StartupError::ServiceToken {
        path: file.to_path_buf(),
        source,
    })?;
    let tokens = TokenSource::new(credential, tenancy);
    let refresh = tokens.spawn_refresh(tasks.child_token());
    tasks.spawn(async move {
        let _ = refresh.await;
    });
    Ok(tokens)
}

/// A channel to the peer at `url` that connects on first use (the peer may start after this
/// service), verified with `tls`, each call bounded by `request_timeout` when given.
pub fn lazy_channel(
    url: &str,
    tls: &ClientTls,
    request_timeout: Option<Duration>,
) -> Result<Channel, StartupError> {
    cairn_sdk::peer_channel(url, tls, request_timeout).map_err(|source| StartupError::Endpoint {
        url: url.to_owned(),
        source,
    })
}

/// How long a call to a peer service may take ([`peer_channel`]).
pub const PEER_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A channel to the peer service at `url` that connects on first use (the peers may start
/// after this service), each call bounded by [`PEER_CALL_TIMEOUT`].
pub fn peer_channel(url: &str, tls: &ClientTls) -> Result<Channel, StartupError> {
    lazy_channel(url, tls, Some(PEER_CALL_TIMEOUT))
}

/// What [`peer_channels`] opens: a channel to tenancy and one to the state coordinator, and
/// the token the service calls them (and any other peer) with.
pub struct PeerChannels {
    pub tenancy: Channel,
    pub coordinator: Channel,
    pub tokens: TokenSource,
}

/// The channels of `peers` (each connecting on first use, with the client `tls`) and the
/// service's token source (its API token exchanged with tenancy over that channel, refreshed
/// in the background until `tasks` stop).
pub fn peer_channels(
    peers: &PeerArgs,
    tls: &ClientTls,
    tasks: &mut Tasks,
) -> Result<PeerChannels, StartupError> {
    let tenancy = peer_channel(&peers.tenancy_url, tls)?;
    let coordinator = peer_channel(&peers.coordinator_url, tls)?;
    let tokens = service_tokens(&peers.service_token_file, Some(tenancy.clone()), tasks)?;
    Ok(PeerChannels {
        tenancy,
        coordinator,
        tokens,
    })
}

/// The service's gRPC listener at `addr` (port 0 picks a free port; TLS, profile and the
/// health-only listener from `shared`), calls verified against `keys`, with its metrics
/// listener (`shared.metrics`) describing the service's `catalogues`.
pub async fn grpc_listener(
    addr: SocketAddr,
    keys: Arc<KeySet>,
    shared: &SharedArgs,
    catalogues: &[&[Metric]],
) -> Result<GrpcServer, StartupError> {
    Ok(GrpcServer::bind(addr, keys, shared)
        .await?
        .metrics(&shared.metrics, catalogues)
        .await?)
}

/// The public keys of `jwks`.
pub fn key_set(jwks: &JwksArgs) -> Result<Arc<KeySet>, StartupError> {
    jwks.load().map_err(|source| StartupError::Keys {
        path: jwks.jwt_public_keys_file.clone(),
        source,
    })
}
