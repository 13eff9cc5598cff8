//! Assembles and runs the service: migrations, the module library, the gRPC server (auth,
//! health, reflection) and graceful shutdown through one cancellation token.
use std::net::SocketAddr;
use std::sync::Arc;

use cairn_auth::{AuthLayer, KeySet};
use cairn_proto::templates::{resolver_server::ResolverServer, templates_server::TemplatesServer};
use cairn_templating::Library;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::config::Config;
use crate::grpc::{ResolverService, TemplatesService};

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/templates");

/// Why the service refused to start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("database: {0}")]
    Database(#[from] cairn_db::DbError),
    #[error("module library {dir}: {source}")]
    Modules {
        dir: String,
        source: cairn_templating::LibraryError,
    },
    #[error("JWT public keys: {0}")]
    Keys(String),
    #[error("bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

/// A running templates service.
pub struct Server {
    grpc_addr: SocketAddr,
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
        // 1. schema, as the migrator; versions and snapshots are insert-only for the runtime.
        let runtime_role = user_of(&config.database_url)
            .filter(|u| Some(u.as_str()) != user_of(config.migrate_url()).as_deref());
        cairn_db::run_migrations(&cairn_db::MigrationPlan {
            migrate_url: config.migrate_url(),
            schema: &config.database_schema,
            migrator: &MIGRATOR,
            runtime_role: runtime_role.as_deref(),
            append_only_tables: &["template_versions", "snapshots"],
        })
        .await?;
        let pool = cairn_db::connect(&cairn_db::PoolSettings::new(
            config.database_url.clone(),
            config.database_schema.clone(),
        ))?;

        // 2. the module library and the keys: refuse to start, saying why.
        let library =
            Library::load_dir(&config.modules_dir).map_err(|source| StartError::Modules {
                dir: config.modules_dir.display().to_string(),
                source,
            })?;
        tracing::info!(
            modules = library.sources().count(),
            fingerprint = library.fingerprint(),
            "module library loaded"
        );
        let jwks = KeySet::load(&config.jwt_public_keys_file).map_err(|e| {
            StartError::Keys(format!("{}: {e}", config.jwt_public_keys_file.display()))
        })?;

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

        let app = App {
            pool,
            library: Arc::new(library),
            limits: config.limits(),
        };
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_serving::<TemplatesServer<TemplatesService>>()
            .await;
        health
            .set_serving::<ResolverServer<ResolverService>>()
            .await;
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(cairn_proto::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(|e| StartError::Other(format!("reflection: {e}")))?;
        let auth = AuthLayer::new(Arc::new(jwks))
            .allow_unauthenticated(["/grpc.health.v1.Health/", "/grpc.reflection."]);
        let max_message = config
            .template_max_bytes
            .saturating_mul(2)
            .max(4 * 1024 * 1024);
        let grpc = tonic::transport::Server::builder()
            .layer(auth)
            .add_service(health_service)
            .add_service(reflection)
            .add_service(
                TemplatesServer::new(TemplatesService { app: app.clone() })
                    .max_decoding_message_size(max_message),
            )
            .add_service(
                ResolverServer::new(ResolverService { app: app.clone() })
                    .max_decoding_message_size(max_message)
                    .max_encoding_message_size(usize::MAX),
            );
        let cancel = CancellationToken::new();
        let mut tasks = JoinSet::new();
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
        tracing::info!(%grpc_addr, "templates service serving");
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

    /// The use cases (tests inspect the store through it).
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
