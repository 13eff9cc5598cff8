//! Tenancy's own edges: its schema (the audit log append-only for the runtime role), the
//! signing keys, NATS (the outbox relay, the message relay of target validation requests,
//! the audit consumer and the webhook consumer), the
//! webhook sender, and its six gRPC services with the credential RPCs limited per peer
//! address. The scaffold (libs/service) serves
//! them with health, reflection, auth, request ids and timeouts.
use std::path::PathBuf;
use std::sync::Arc;

use cairn_auth::KeySet;
use cairn_proto::tenancy::{
    audit_server::AuditServer, targets_server::TargetsServer, tenants_server::TenantsServer,
    tokens_server::TokensServer, users_server::UsersServer, webhooks_server::WebhooksServer,
};
use cairn_service::startup::{self, RelayWakers, StartupError};
use cairn_service::{DbArgs, Tasks};
use sqlx::PgPool;
use tokio::sync::Notify;

use crate::app::{App, Settings};
use crate::background::webhook_sender::Sender;
use crate::background::{audit_consumer, webhook_consumer};
use crate::cli::{Cli, Tool};
use crate::config::{Config, DEFAULT_SCHEMA};
use crate::domain::password::{HashError, PasswordHashing};
use crate::grpc::{
    AuditService, TargetsService, TenantsService, TokensService, UsersService, WebhooksService,
};
use crate::keys::{KeyFileError, Signer};
use crate::rate_limit::{KeyedLimiter, PeerRateLimit, Quota};
use crate::webhook_config::WebhookArgs;

const MIGRATOR: cairn_db::Migrator = sqlx::migrate!("../../migrations/tenancy");

/// Tables the runtime role may only INSERT into and SELECT from.
pub const APPEND_ONLY_TABLES: &[&str] = &["audit_log"];

/// gRPC paths that need no access token (besides health and reflection, which every
/// Cairn server answers).
pub const PUBLIC_PATHS: &[&str] = &[
    "/cairn.tenancy.v1.Tokens/Login",
    "/cairn.tenancy.v1.Tokens/ExchangeApiToken",
    "/cairn.tenancy.v1.Tokens/GetSigningKeys",
];

/// Paths limited per peer address.
const CREDENTIAL_PATHS: &[&str] = &[
    "/cairn.tenancy.v1.Tokens/Login",
    "/cairn.tenancy.v1.Tokens/ExchangeApiToken",
];

/// Why tenancy refused to start (the scaffold prints the whole chain).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Startup(#[from] StartupError),
    #[error("signing keys {}", path.display())]
    Keys {
        path: PathBuf,
        #[source]
        source: KeyFileError,
    },
    #[error("signing keys: their public key set")]
    PublicKeys(#[source] cairn_auth::AuthError),
    #[error("configuration")]
    Hashing(#[source] HashError),
    #[error("NATS: the audit consumer")]
    AuditConsumer(#[source] cairn_bus::BusError),
    #[error("NATS: the webhook consumer")]
    WebhookConsumer(#[source] cairn_bus::BusError),
    #[error("webhook settings: {0}")]
    WebhookConfig(String),
    #[error("webhook HTTP client")]
    WebhookClient(#[source] reqwest::Error),
}

/// Runs the migrations as the migrator and grants the runtime role (append-only audit
/// log); returns a pool of the runtime role.
pub async fn migrate_and_connect(db: &DbArgs) -> Result<PgPool, StartError> {
    db.migrate_and_connect(DEFAULT_SCHEMA, &MIGRATOR, APPEND_ONLY_TABLES)
        .await
        .map_err(|e| StartupError::Database(e).into())
}

/// A running tenancy service.
pub struct Server {
    addrs: cairn_service::Addresses,
    app: App,
    tasks: Tasks,
}

impl Server {
    /// Starts with `webhooks` in place of `config.webhooks` (tenancy's tests restart one
    /// configuration with other webhook settings).
    pub async fn start_with(
        mut config: Config,
        webhooks: WebhookArgs,
    ) -> Result<Server, StartError> {
        config.webhooks = webhooks;
        Server::start(config).await
    }

    /// Starts with `config`, its webhook settings included.
    pub async fn start(config: Config) -> Result<Server, StartError> {
        config.validate().map_err(StartupError::Config)?;
        config
            .webhooks
            .validate()
            .map_err(StartError::WebhookConfig)?;
        // The profile: production refuses webhooks to loopback and plain http.
        // So does it NATS without credentials, before the schema is touched.
        config
            .shared
            .profile()
            .check(
                config
                    .webhooks
                    .webhook_allow_loopback
                    .then_some(cairn_service::Fact::WebhookAllowLoopback)
                    .into_iter()
                    .chain(config.nats.profile_fact()),
            )
            .map_err(StartupError::Refused)?;
        let signer =
            Signer::load(&config.jwt_private_keys_file).map_err(|source| StartError::Keys {
                path: config.jwt_private_keys_file.clone(),
                source,
            })?;
        let verify_keys =
            KeySet::from_signing_keys(signer.keys()).map_err(StartError::PublicKeys)?;
        let hashing = PasswordHashing::new(config.hash_cost()).map_err(StartError::Hashing)?;

        // 1. schema, as the migrator; the runtime role gets INSERT/SELECT on the audit log.
        let pool = migrate_and_connect(&config.db).await?;

        // 2. NATS streams, the outbox relay and the audit consumer.
        let bus = config
            .nats
            .connect(cairn_bus::ServiceRole::Tenancy, config.shared.profile())
            .await
            .map_err(StartupError::Nats)?;
        let consumer = audit_consumer::consumer(&bus.js, &bus.ns, config.event_ack_wait)
            .await
            .map_err(StartError::AuditConsumer)?;
        let hooks_consumer = webhook_consumer::consumer(&bus.js, &bus.ns, config.event_ack_wait)
            .await
            .map_err(StartError::WebhookConsumer)?;
        let wakers = RelayWakers::default();
        let webhook_notify = Arc::new(Notify::new());
        let webhooks = Arc::new(config.webhooks.clone());
        let sender = Sender::new(
            pool.clone(),
            &webhooks,
            webhook_notify.clone(),
            wakers.events.clone(),
        )
        .map_err(StartError::WebhookClient)?;
        let app = App {
            pool: pool.clone(),
            signer: Arc::new(signer),
            hashing: Arc::new(hashing),
            login_limiter: Arc::new(KeyedLimiter::new(Quota {
                per_minute: config.login_attempts_per_minute,
                burst: config.login_attempts_per_minute,
            })),
            outbox_notify: wakers.events.clone(),
            message_notify: wakers.messages.clone(),
            settings: Arc::new(Settings {
                access_token_ttl: config.access_token_ttl,
            }),
            webhooks: webhooks.clone(),
            webhook_notify: webhook_notify.clone(),
        };
        let mut tasks = Tasks::new();
        // Events, and validation requests for the runners on the targets' run queues.
        wakers.spawn_relays(&pool, &bus, &mut tasks);
        tasks.spawn(audit_consumer::run(
            consumer,
            pool.clone(),
            tasks.child_token(),
        ));
        tasks.spawn(webhook_consumer::run(
            hooks_consumer,
            pool.clone(),
            webhook_notify,
            tasks.child_token(),
        ));
        if webhooks.webhook_concurrency > 0 {
            let sender = sender.spawn(tasks.child_token());
            tasks.spawn(async move {
                let _ = sender.await;
            });
        }
        tasks.spawn(audit_consumer::prune_processed(pool, tasks.child_token()));

        // 3. the gRPC services (port 0 works; the bound address is reported).
        let per_address = Quota {
            per_minute: config.credential_attempts_per_address_per_minute,
            burst: config.credential_attempts_per_address_per_minute,
        };
        let tokens = TokensServer::new(TokensService { app: app.clone() });
        let addrs = startup::grpc_listener(
            config.grpc_addr,
            Arc::new(verify_keys),
            &config.shared,
            &[crate::metrics::METRICS],
        )
        .await?
        .public_paths(PUBLIC_PATHS.iter().copied())
        .add_service(TenantsServer::new(TenantsService { app: app.clone() }))
        .add_service(UsersServer::new(UsersService { app: app.clone() }))
        .add_service(PeerRateLimit::new(tokens, per_address, CREDENTIAL_PATHS))
        .add_service(TargetsServer::new(TargetsService { app: app.clone() }))
        .add_service(AuditServer::new(AuditService { app: app.clone() }))
        .add_service(WebhooksServer::new(WebhooksService { app: app.clone() }))
        .spawn(&mut tasks)
        .await
        .map_err(StartupError::Grpc)?;
        Ok(Server { addrs, app, tasks })
    }
}

cairn_service::grpc_service!(Server {
    binary: "cairn-tenancy",
    name: "tenancy",
    config: Config,
    app: App,
    start_error: StartError,
    cli: Cli,
    tool: Tool,
});
