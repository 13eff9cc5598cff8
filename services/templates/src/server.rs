//! The templates service's own edges: its schema (versions and snapshots append-only for
//! the runtime role), the module library, and its two gRPC services. The scaffold
//! (libs/service) serves them with health, reflection, auth, request ids and timeouts.
use std::path::PathBuf;
use std::sync::Arc;

use cairn_proto::templates::{resolver_server::ResolverServer, templates_server::TemplatesServer};
use cairn_service::startup::{self, StartupError};
use cairn_service::{DbArgs, Tasks};
use cairn_templating::Library;

use crate::app::App;
use crate::config::{Config, DEFAULT_SCHEMA};
use crate::grpc::{ResolverService, TemplatesService};

const MIGRATOR: cairn_db::Migrator = sqlx::migrate!("../../migrations/templates");

/// Tables the runtime role may only INSERT into and SELECT from.
pub const APPEND_ONLY_TABLES: &[&str] = &["template_versions", "snapshots"];

/// Why the service refused to start (the scaffold prints the whole chain).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Startup(#[from] StartupError),
    #[error("module library {}", dir.display())]
    Modules {
        dir: PathBuf,
        #[source]
        source: cairn_templating::LibraryError,
    },
}

/// A running templates service.
pub struct Server {
    addrs: cairn_service::Addresses,
    app: App,
    tasks: Tasks,
}

impl Server {
    pub async fn start(config: Config) -> Result<Server, StartError> {
        // 1. schema, as the migrator; versions and snapshots are insert-only for the runtime.
        let pool = migrate_and_connect(&config.db).await?;

        // 2. the module library and the keys: refuse to start, saying why.
        let library =
            Library::load_dir(&config.modules_dir).map_err(|source| StartError::Modules {
                dir: config.modules_dir.clone(),
                source,
            })?;
        tracing::info!(
            modules = library.sources().count(),
            fingerprint = library.fingerprint(),
            "module library loaded"
        );
        let keys = startup::key_set(&config.jwks)?;

        // 3. the gRPC services (port 0 works; the bound address is reported).
        let app = App {
            pool,
            library: Arc::new(library),
            limits: config.limits(),
        };
        let max_message = config.max_message_bytes();
        let mut tasks = Tasks::new();
        let addrs = startup::grpc_listener(config.grpc_addr, keys, &config.shared, &[])
            .await?
            .add_service(
                TemplatesServer::new(TemplatesService { app: app.clone() })
                    .max_decoding_message_size(max_message),
            )
            .add_service(
                ResolverServer::new(ResolverService { app: app.clone() })
                    .max_decoding_message_size(max_message)
                    .max_encoding_message_size(usize::MAX),
            )
            .spawn(&mut tasks)
            .await
            .map_err(StartupError::Grpc)?;
        Ok(Server { addrs, app, tasks })
    }
}

/// Runs the migrations as the migrator (versions and snapshots append-only for the runtime
/// role); returns a pool of the runtime role.
async fn migrate_and_connect(db: &DbArgs) -> Result<sqlx::PgPool, StartupError> {
    db.migrate_and_connect(DEFAULT_SCHEMA, &MIGRATOR, APPEND_ONLY_TABLES)
        .await
        .map_err(StartupError::Database)
}

cairn_service::grpc_service!(Server {
    binary: "cairn-templates",
    name: "templates",
    config: Config,
    app: App,
    start_error: StartError,
});
