//! Assembles and runs tenancy: migrations (the audit log append-only for the runtime role),
//! the gRPC server (peer rate limit, auth, health, reflection), the outbox relay and the
//! audit consumer; graceful shutdown through one cancellation token.
use std::net::SocketAddr;
use std::sync::Arc;

use cairn_auth::{AuthLayer, KeySet};
use cairn_bus::{Namespace, OutboxRelay, StreamSettings};
use cairn_proto::tenancy::{
    audit_server::AuditServer, targets_server::TargetsServer, tenants_server::TenantsServer,
    tokens_server::TokensServer, users_server::UsersServer,
};
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::sync::CancellationToken;

use crate::app::{App, Settings};
use crate::background::audit_consumer;
use crate::config::{Config, DbArgs};
use crate::domain::password::PasswordHashing;
use crate::grpc::{AuditService, TargetsService, TenantsService, TokensService, UsersService};
use crate::keys::Signer;
use crate::rate_limit::{KeyedLimiter, PeerRateLimitLayer, Quota};

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/tenancy");

/// Tables the runtime role may only INSERT into and SELECT from.
pub const APPEND_ONLY_TABLES: &[&str] = &["audit_log"];

/// gRPC paths that need no access token.
pub const PUBLIC_PATHS: &[&str] = &[
    "/grpc.health.v1.Health/",
    "/grpc.reflection.",
    "/cairn.tenancy.v1.Tokens/Login",
    "/cairn.tenancy.v1.Tokens/ExchangeApiToken",
    "/cairn.tenancy.v1.Tokens/GetSigningKeys",
];

/// Paths limited per peer address.
const CREDENTIAL_PATHS: &[&str] = &[
    "/cairn.tenancy.v1.Tokens/Login",
    "/cairn.tenancy.v1.Tokens/ExchangeApiToken",
];

/// Why tenancy refused to start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("configuration: {0}")]
    Config(String),
    #[error("database: {0}")]
    Database(#[from] cairn_db::DbError),
    #[error("signing keys: {0}")]
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

fn user_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let (userinfo, _) = rest.split_once('@')?;
    Some(userinfo.split(':').next()?.to_owned())
}

/// Runs the migrations as the migrator and grants the runtime role (append-only audit
/// log); returns a pool of the runtime role.
pub async fn migrate_and_connect(db: &DbArgs) -> Result<PgPool, StartError> {
    let runtime_role = user_of(&db.database_url)
        .filter(|u| Some(u.as_str()) != user_of(db.migrate_url()).as_deref());
    if runtime_role.is_none() {
        tracing::warn!(
            "CAIRN_DATABASE_URL and CAIRN_DATABASE_MIGRATE_URL use the same role: the audit log is \
             protected by its triggers only, not by INSERT/SELECT-only grants"
        );
    }
    cairn_db::run_migrations(&cairn_db::MigrationPlan {
        migrate_url: db.migrate_url(),
        schema: &db.database_schema,
        migrator: &MIGRATOR,
        runtime_role: runtime_role.as_deref(),
        append_only_tables: APPEND_ONLY_TABLES,
    })
    .await?;
    Ok(cairn_db::connect(&cairn_db::PoolSettings::new(
        db.database_url.clone(),
        db.database_schema.clone(),
    ))?)
}

/// A running tenancy service.
pub struct Server {
    grpc_addr: SocketAddr,
    app: App,
    cancel: CancellationToken,
    tasks: JoinSet<()>,
}

impl Server {
    pub async fn start(config: Config) -> Result<Server, StartError> {
        config.validate().map_err(StartError::Config)?;
        let signer = Signer::load(&config.jwt_private_keys_file).map_err(|e| {
            StartError::Keys(format!(
                "{}: {}",
                config.jwt_private_keys_file.display(),
                cairn_bus::Chain(&e)
            ))
        })?;
        let verify_keys = KeySet::from_signing_keys(signer.keys())
            .map_err(|e| StartError::Keys(e.to_string()))?;
        let hashing = PasswordHashing::new(config.hash_cost())
            .map_err(|e| StartError::Config(e.to_string()))?;

        // 1. schema, as the migrator; the runtime role gets INSERT/SELECT on the audit log.
        let pool = migrate_and_connect(&config.db).await?;

        // 2. NATS streams, the outbox relay and the audit consumer.
        let nats = async_nats::connect(&config.nats_url)
            .await
            .map_err(|e| StartError::Nats(format!("connect: {e}")))?;
        let js = async_nats::jetstream::new(nats);
        let ns = match &config.nats_prefix {
            Some(p) => Namespace::with_prefix(p).map_err(|e| StartError::Nats(e.to_string()))?,
            None => Namespace::root(),
        };
        cairn_bus::ensure_streams(&js, &ns, &StreamSettings::default())
            .await
            .map_err(|e| StartError::Nats(cairn_bus::Chain(&e).to_string()))?;
        let consumer = audit_consumer::consumer(&js, &ns, config.event_ack_wait)
            .await
            .map_err(|e| StartError::Nats(cairn_bus::Chain(&e).to_string()))?;

        // 3. the listener (port 0 works; local_addr is reported).
        let listener = TcpListener::bind(config.grpc_addr)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.grpc_addr,
                source,
            })?;
        let grpc_addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: config.grpc_addr,
            source,
        })?;

        let notify = Arc::new(Notify::new());
        let app = App {
            pool: pool.clone(),
            signer: Arc::new(signer),
            hashing: Arc::new(hashing),
            login_limiter: Arc::new(KeyedLimiter::new(Quota {
                per_minute: config.login_attempts_per_minute,
                burst: config.login_attempts_per_minute,
            })),
            outbox_notify: notify.clone(),
            settings: Arc::new(Settings {
                access_token_ttl: config.access_token_ttl,
            }),
        };

        let cancel = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let relay = OutboxRelay::new(pool.clone(), js, ns, notify).spawn(cancel.child_token());
        tasks.spawn(async move {
            let _ = relay.await;
        });
        tasks.spawn(audit_consumer::run(
            consumer,
            pool.clone(),
            cancel.child_token(),
        ));
        tasks.spawn(audit_consumer::prune_processed(pool, cancel.child_token()));

        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_serving::<TenantsServer<TenantsService>>().await;
        health.set_serving::<UsersServer<UsersService>>().await;
        health.set_serving::<TokensServer<TokensService>>().await;
        health.set_serving::<TargetsServer<TargetsService>>().await;
        health.set_serving::<AuditServer<AuditService>>().await;
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(cairn_proto::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(|e| StartError::Other(format!("reflection: {e}")))?;
        let auth = AuthLayer::new(Arc::new(verify_keys))
            .allow_unauthenticated(PUBLIC_PATHS.iter().copied());
        let peer_limit = PeerRateLimitLayer::new(
            Quota {
                per_minute: config.credential_attempts_per_address_per_minute,
                burst: config.credential_attempts_per_address_per_minute,
            },
            CREDENTIAL_PATHS,
        );
        let grpc = tonic::transport::Server::builder()
            .layer(peer_limit)
            .layer(auth)
            .add_service(health_service)
            .add_service(reflection)
            .add_service(TenantsServer::new(TenantsService { app: app.clone() }))
            .add_service(UsersServer::new(UsersService { app: app.clone() }))
            .add_service(TokensServer::new(TokensService { app: app.clone() }))
            .add_service(TargetsServer::new(TargetsService { app: app.clone() }))
            .add_service(AuditServer::new(AuditService { app: app.clone() }));
        let grpc_cancel = cancel.clone();
        tasks.spawn(async move {
            let incoming = TcpListenerStream::new(listener);
            if let Err(e) = grpc
                .serve_with_incoming_shutdown(incoming, grpc_cancel.cancelled_owned())
                .await
            {
                tracing::error!(error = %e, "gRPC server stopped");
            }
        });
        tracing::info!(%grpc_addr, "tenancy serving");
        Ok(Server {
            grpc_addr,
            app,
            cancel,
            tasks,
        })
    }

    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// The use cases (tests call them directly).
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
        let file = include_str!("../../../migrations/tenancy/0006_outbox.sql");
        assert_eq!(file, cairn_bus::OUTBOX_MIGRATION_SQL);
    }
}
