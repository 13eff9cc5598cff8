//! Assembles and runs the coordinator: migrations, self-checks, the gRPC server (auth,
//! health, reflection), the HTTP backend, the outbox relay and the sweeper; graceful
//! shutdown through one cancellation token.
use std::net::SocketAddr;
use std::sync::Arc;

use cairn_auth::{AuthLayer, KeySet};
use cairn_bus::{Namespace, OutboxRelay, StreamSettings};
use cairn_proto::state::{
    recovery_server::RecoveryServer, runs_server::RunsServer, states_server::StatesServer,
};
use cairn_storage::{DataKeyCache, KeyManager, ObjectStore};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::sync::CancellationToken;

use crate::app::{App, Settings};
use crate::background::sweeper::{self, SweepSettings};
use crate::config::Config;
use crate::failpoints::Failpoints;
use crate::grpc::{RecoveryService, RunsService, StatesService};

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/state-coordinator");

/// Why the coordinator refused to start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("database: {0}")]
    Database(#[from] cairn_db::DbError),
    #[error("object store self-check failed: {0}")]
    ObjectStore(String),
    #[error("key manager self-check failed: {0}")]
    KeyManager(String),
    #[error("JWT public keys: {0}")]
    Keys(String),
    #[error("NATS: {0}")]
    Nats(String),
    #[error("bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

/// Optional replacements for the edges, for tests and embedding.
#[derive(Default)]
pub struct Edges {
    pub objects: Option<Arc<dyn ObjectStore>>,
    pub keys: Option<Arc<dyn KeyManager>>,
}

/// A running coordinator.
pub struct Server {
    grpc_addr: SocketAddr,
    http_addr: SocketAddr,
    app: App,
    cancel: CancellationToken,
    tasks: JoinSet<()>,
}

fn user_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let (userinfo, _) = rest.split_once('@')?;
    Some(userinfo.split(':').next()?.to_owned())
}

impl Server {
    pub async fn start(config: Config) -> Result<Server, StartError> {
        Self::start_with(config, Edges::default()).await
    }

    pub async fn start_with(config: Config, edges: Edges) -> Result<Server, StartError> {
        // 1. schema, as the migrator; grants for the runtime role when it differs.
        let runtime_role = user_of(&config.database_url)
            .filter(|u| Some(u.as_str()) != user_of(config.migrate_url()).as_deref());
        cairn_db::run_migrations(&cairn_db::MigrationPlan {
            migrate_url: config.migrate_url(),
            schema: &config.database_schema,
            migrator: &MIGRATOR,
            runtime_role: runtime_role.as_deref(),
            append_only_tables: &[],
        })
        .await?;
        let pool = cairn_db::connect(&cairn_db::PoolSettings::new(
            config.database_url.clone(),
            config.database_schema.clone(),
        ))?;

        // 2. edges and their self-checks: refuse to start, saying why.
        let objects = match edges.objects {
            Some(o) => o,
            None => cairn_storage::parse_object_store_url(
                &config.object_store,
                config.s3_endpoint.clone(),
            )
            .await
            .map_err(|e| StartError::ObjectStore(e.to_string()))?,
        };
        objects
            .self_check()
            .await
            .map_err(|e| StartError::ObjectStore(format!("{}: {e}", objects.describe())))?;
        let keys = match edges.keys {
            Some(k) => k,
            None => cairn_storage::parse_key_manager(&config.kms_key, config.kms_endpoint.clone())
                .await
                .map_err(|e| StartError::KeyManager(e.to_string()))?,
        };
        keys.self_check()
            .await
            .map_err(|e| StartError::KeyManager(format!("{}: {e}", keys.describe())))?;
        let jwks = KeySet::load(&config.jwt_public_keys_file).map_err(|e| {
            StartError::Keys(format!("{}: {e}", config.jwt_public_keys_file.display()))
        })?;

        // 3. NATS streams and the outbox relay.
        let nats = async_nats::connect(&config.nats_url)
            .await
            .map_err(|e| StartError::Nats(format!("connect {}: {e}", config.nats_url)))?;
        let js = async_nats::jetstream::new(nats);
        let ns = match &config.nats_prefix {
            Some(p) => Namespace::with_prefix(p).map_err(|e| StartError::Nats(e.to_string()))?,
            None => Namespace::root(),
        };
        cairn_bus::ensure_streams(&js, &ns, &StreamSettings::default())
            .await
            .map_err(|e| StartError::Nats(e.to_string()))?;

        if config.after_restore {
            let mut conn = pool
                .acquire()
                .await
                .map_err(|e| StartError::Other(format!("database: {e}")))?;
            crate::store::flags::set_after_restore(
                &mut conn,
                true,
                "started with CAIRN_AFTER_RESTORE",
            )
            .await
            .map_err(|e| StartError::Other(format!("database: {e}")))?;
        }

        // 4. listeners (port 0 works; local_addr is reported).
        let grpc_listener = TcpListener::bind(config.grpc_addr)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.grpc_addr,
                source,
            })?;
        let http_listener = TcpListener::bind(config.http_addr)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.http_addr,
                source,
            })?;
        let grpc_addr = grpc_listener
            .local_addr()
            .map_err(|source| StartError::Bind {
                addr: config.grpc_addr,
                source,
            })?;
        let http_addr = http_listener
            .local_addr()
            .map_err(|source| StartError::Bind {
                addr: config.http_addr,
                source,
            })?;

        let notify = Arc::new(Notify::new());
        let app = App {
            pool: pool.clone(),
            objects,
            keys,
            key_cache: Arc::new(DataKeyCache::new(
                config.key_cache_size,
                config.key_cache_ttl,
            )),
            outbox_notify: notify.clone(),
            settings: Arc::new(Settings {
                lease: config.run_lease,
                max_state_bytes: config.max_state_bytes,
                max_plan_bytes: config.max_plan_bytes,
                plan_ttl: config.plan_ttl,
                public_http_url: config
                    .public_http_url
                    .clone()
                    .unwrap_or_else(|| format!("http://{http_addr}")),
            }),
            failpoints: Failpoints::default(),
        };

        let cancel = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let relay = OutboxRelay::new(pool, js, ns, notify);
        let relay_handle = relay.spawn(cancel.child_token());
        tasks.spawn(async move {
            let _ = relay_handle.await;
        });
        tasks.spawn(sweeper::run(
            app.clone(),
            SweepSettings {
                interval: config.sweep_interval,
                pending_ttl: config.pending_ttl,
                intermediate_retention: config.intermediate_retention,
            },
            cancel.child_token(),
        ));

        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_serving::<StatesServer<StatesService>>().await;
        health.set_serving::<RunsServer<RunsService>>().await;
        health
            .set_serving::<RecoveryServer<RecoveryService>>()
            .await;
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(cairn_proto::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(|e| StartError::Other(format!("reflection: {e}")))?;
        let auth = AuthLayer::new(Arc::new(jwks))
            .allow_unauthenticated(["/grpc.health.v1.Health/", "/grpc.reflection."]);
        let grpc = tonic::transport::Server::builder()
            .layer(auth)
            .add_service(health_service)
            .add_service(reflection)
            .add_service(StatesServer::new(StatesService { app: app.clone() }))
            .add_service(RunsServer::new(RunsService { app: app.clone() }))
            .add_service(RecoveryServer::new(RecoveryService { app: app.clone() }));
        let grpc_cancel = cancel.clone();
        tasks.spawn(async move {
            let incoming = TcpListenerStream::new(grpc_listener);
            if let Err(e) = grpc
                .serve_with_incoming_shutdown(incoming, grpc_cancel.cancelled_owned())
                .await
            {
                tracing::error!(error = %e, "gRPC server stopped");
            }
        });
        let http_cancel = cancel.clone();
        let router = crate::http_backend::router(app.clone());
        tasks.spawn(async move {
            if let Err(e) = axum::serve(http_listener, router)
                .with_graceful_shutdown(http_cancel.cancelled_owned())
                .await
            {
                tracing::error!(error = %e, "HTTP backend stopped");
            }
        });
        tracing::info!(%grpc_addr, %http_addr, "state coordinator serving");
        Ok(Server {
            grpc_addr,
            http_addr,
            app,
            cancel,
            tasks,
        })
    }

    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// The use cases (tests arm failpoints and run the sweeper through it).
    pub fn app(&self) -> &App {
        &self.app
    }

    /// A handle that stops the server when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Stops taking requests, lets in-flight ones finish and waits for every task.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        while self.tasks.join_next().await.is_some() {}
    }

    /// Waits until the server is told to stop (its token is cancelled).
    pub async fn wait(mut self) {
        self.cancel.cancelled().await;
        while self.tasks.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn outbox_migration_matches_the_bus_library() {
        let file = include_str!("../../../migrations/state-coordinator/0006_outbox.sql");
        assert_eq!(file, cairn_bus::OUTBOX_MIGRATION_SQL);
    }
}
