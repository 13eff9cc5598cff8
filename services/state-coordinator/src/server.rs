//! The coordinator's own edges and tasks: its schema, the object store and key manager
//! (both self-checked before anything is served), the gRPC services, the HTTP backend (its
//! own axum listener), the outbox relay and the sweeper, all stopped by one [`Tasks`]. The
//! rest (health, reflection, auth, request ids, timeouts, the main loop) is libs/service.
use std::net::SocketAddr;
use std::sync::Arc;

use cairn_bus::OutboxRelay;
use cairn_proto::state::{
    recovery_server::RecoveryServer, runs_server::RunsServer, states_server::StatesServer,
};
use cairn_service::http::HttpListener;
use cairn_service::startup::{self, StartupError};
use cairn_service::{Fact, Tasks};
use cairn_storage::{DataKeyCache, KeyError, KeyManager, ObjectError, ObjectStore};
use tokio::sync::Notify;

use crate::app::sealed_cache::SealedCache;
use crate::app::{App, Settings};
use crate::background::sweeper::{self, SweepSettings};
use crate::config::{Config, DEFAULT_SCHEMA};
use crate::failpoints::Failpoints;
use crate::grpc::{RecoveryService, RunsService, StatesService};

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/state-coordinator");

/// Why the coordinator refused to start. Each variant says what failed; its source says why
/// (`cairn_service::run` prints the whole chain once).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Startup(#[from] StartupError),
    #[error("object store CAIRN_OBJECT_STORE")]
    ObjectStoreSetting(#[source] ObjectError),
    #[error("object store self-check failed: {store}")]
    ObjectStore {
        store: String,
        #[source]
        source: ObjectError,
    },
    #[error("key manager CAIRN_KMS_KEY")]
    KeyManagerSetting(#[source] KeyError),
    #[error("key manager self-check failed: {manager}")]
    KeyManager {
        manager: String,
        #[source]
        source: KeyError,
    },
    #[error("enter after-restore mode (CAIRN_AFTER_RESTORE)")]
    AfterRestore(#[source] sqlx::Error),
    #[error("the HTTP backend")]
    Http(#[source] cairn_service::ServeError),
}

/// Optional replacements for the edges, for tests and embedding.
#[derive(Default)]
pub struct Edges {
    pub objects: Option<Arc<dyn ObjectStore>>,
    pub keys: Option<Arc<dyn KeyManager>>,
}

/// A running coordinator.
pub struct Server {
    addrs: cairn_service::Addresses,
    http_addr: SocketAddr,
    app: App,
    tasks: Tasks,
}

impl Server {
    pub async fn start(config: Config) -> Result<Server, StartError> {
        Self::start_with(config, Edges::default()).await
    }

    pub async fn start_with(config: Config, edges: Edges) -> Result<Server, StartError> {
        // 0. the profile: production refuses local edges, before anything connects.
        let local_keys = edges.keys.is_none() && config.kms_key.starts_with("local:");
        let local_objects = edges.objects.is_none() && !config.object_store.starts_with("s3://");
        config
            .shared
            .profile()
            .check(
                [
                    local_keys.then_some(Fact::LocalKeyFile),
                    local_objects.then_some(Fact::LocalObjectStore),
                    config.nats.profile_fact(),
                ]
                .into_iter()
                .flatten(),
            )
            .map_err(StartupError::Refused)?;

        // 1. schema, as the migrator; a pool of the runtime role.
        let pool = config
            .db
            .migrate_and_connect(DEFAULT_SCHEMA, &MIGRATOR, &[])
            .await
            .map_err(StartupError::Database)?;

        // 2. edges and their self-checks: refuse to start, saying why.
        let objects = match edges.objects {
            Some(o) => o,
            None => cairn_storage::parse_object_store_url(
                &config.object_store,
                config.s3_endpoint.clone(),
            )
            .await
            .map_err(StartError::ObjectStoreSetting)?,
        };
        objects
            .self_check()
            .await
            .map_err(|source| StartError::ObjectStore {
                store: objects.describe(),
                source,
            })?;
        let keys = match edges.keys {
            Some(k) => k,
            None => cairn_storage::parse_key_manager(&config.kms_key, config.kms_endpoint.clone())
                .await
                .map_err(StartError::KeyManagerSetting)?,
        };
        keys.self_check()
            .await
            .map_err(|source| StartError::KeyManager {
                manager: keys.describe(),
                source,
            })?;
        let jwks = startup::key_set(&config.jwks)?;

        // 3. NATS streams (the outbox relay publishes there).
        let bus = config
            .nats
            .connect(
                cairn_bus::ServiceRole::StateCoordinator,
                config.shared.profile(),
            )
            .await
            .map_err(StartupError::Nats)?;

        if config.after_restore {
            let mut conn = pool.acquire().await.map_err(StartError::AfterRestore)?;
            crate::store::flags::set_after_restore(
                &mut conn,
                true,
                "started with CAIRN_AFTER_RESTORE",
            )
            .await
            .map_err(StartError::AfterRestore)?;
        }

        // 4. listeners, both with the same TLS (port 0 works; the bound addresses are
        // reported).
        let grpc = startup::grpc_listener(
            config.grpc_addr,
            jwks,
            &config.shared,
            &[crate::metrics::METRICS, cairn_storage::metrics::METRICS],
        )
        .await?;
        let http_listener = HttpListener::bind(config.http_addr, grpc.listen().clone())
            .await
            .map_err(StartError::Http)?;
        let http_addr = http_listener.local_addr();
        let http_scheme = http_listener.scheme();

        let notify = Arc::new(Notify::new());
        let app = App {
            pool: pool.clone(),
            objects,
            keys,
            key_cache: Arc::new(DataKeyCache::new(
                config.key_cache_size,
                config.key_cache_ttl,
            )),
            spare_keys: Arc::default(),
            beside: Arc::default(),
            config_keys: Arc::default(),
            read_ahead: Arc::default(),
            outputs_cache: Arc::default(),
            sealed_cache: Arc::new(SealedCache::new(config.state_cache_bytes)),
            outbox_notify: notify.clone(),
            settings: Arc::new(Settings {
                lease: config.run_lease,
                max_state_bytes: config.max_state_bytes,
                max_plan_bytes: config.max_plan_bytes,
                plan_ttl: config.plan_ttl,
                public_http_url: config
                    .public_http_url
                    .clone()
                    .unwrap_or_else(|| format!("{http_scheme}://{http_addr}")),
            }),
            failpoints: Failpoints::from_env(),
        };

        // 5. background tasks and servers, all stopped by one token.
        let mut tasks = Tasks::new();
        let mut relay = OutboxRelay::new(pool, bus.js, bus.ns, notify);
        relay.settings.linger = config.event_relay_linger;
        let relay_handle = relay.spawn(tasks.child_token());
        tasks.spawn(async move {
            let _ = relay_handle.await;
        });
        tasks.spawn(sweeper::run(
            app.clone(),
            SweepSettings {
                interval: config.sweep_interval,
                pending_ttl: config.pending_ttl,
                intermediate_retention: config.intermediate_retention,
                time_limit: cairn_db::BACKGROUND_LIMIT,
            },
            tasks.child_token(),
        ));
        let addrs = grpc
            .add_service(StatesServer::new(StatesService { app: app.clone() }))
            .add_service(RunsServer::new(RunsService { app: app.clone() }))
            .add_service(RecoveryServer::new(RecoveryService { app: app.clone() }))
            .spawn(&mut tasks)
            .await
            .map_err(StartupError::Grpc)?;
        let router = crate::http_backend::router(app.clone());
        http_listener
            .spawn(router, &mut tasks)
            .map_err(StartError::Http)?;
        tracing::info!(grpc_addr = %addrs.grpc, %http_addr, "state coordinator serving");
        Ok(Server {
            addrs,
            http_addr,
            app,
            tasks,
        })
    }

    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }
}

cairn_service::grpc_service!(Server {
    binary: "cairn-state-coordinator",
    name: "state-coordinator",
    config: Config,
    app: App,
    start_error: StartError,
});
