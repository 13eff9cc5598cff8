//! Test harness: `spawn_app()` starts a real tenancy server on port 0 against a fresh
//! database (migrator and runtime roles of its own), its own NATS prefix and a signing key
//! file of its own; it bootstraps tenant A (owner with the platform scope) and creates
//! tenant B, and returns typed clients.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use cairn_auth::{Claims, Role, SigningKey};
use cairn_proto::tenancy as pb;
use cairn_tenancy::keys::Signer;
use cairn_tenancy::{Config, DbArgs, Server};
pub use cairn_testkit::{Authed, Bearer};
use cairn_testkit::{TempDir, TestNats};
use sqlx::Connection;
use tonic::transport::Channel;
use uuid::Uuid;

pub use pb::audit_client::AuditClient;
pub use pb::targets_client::TargetsClient;
pub use pb::tenants_client::TenantsClient;
pub use pb::tokens_client::TokensClient;
pub use pb::users_client::UsersClient;
pub use pb::webhooks_client::WebhooksClient;

/// Knobs for `spawn_app_with`.
#[derive(Clone)]
pub struct Options {
    pub login_attempts_per_minute: u32,
    pub attempts_per_address_per_minute: u32,
    pub access_token_ttl: Duration,
    pub webhooks: cairn_tenancy::WebhookArgs,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            login_attempts_per_minute: 1000,
            attempts_per_address_per_minute: 10_000,
            access_token_ttl: Duration::from_secs(300),
            webhooks: cairn_tenancy::WebhookArgs::default(),
        }
    }
}

/// A tenant created by the harness.
#[derive(Clone, Debug)]
pub struct Tenant {
    pub id: Uuid,
    pub slug: String,
    pub owner: Uuid,
    pub owner_email: String,
    /// An access token of the owner.
    pub owner_token: String,
}

pub const PASSWORD: &str = "correct horse battery staple";

pub struct TestApp {
    pub server: Option<Server>,
    pub config: Config,
    pub webhooks: cairn_tenancy::WebhookArgs,
    pub grpc: Channel,
    pub db: cairn_db::TestDatabase,
    pub nats: TestNats,
    pub dir: TempDir,
    pub keys_file: PathBuf,
    /// The bootstrap owner's API token (platform admin, tenant A).
    pub bootstrap_api_token: String,
    pub a: Tenant,
    pub b: Tenant,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(Options::default()).await
}

pub fn config_for(
    db: &cairn_db::TestDatabase,
    nats: &TestNats,
    keys_file: PathBuf,
    opts: &Options,
) -> Config {
    Config {
        shared: Default::default(),
        db: DbArgs {
            database_url: db.runtime_url.clone(),
            database_migrate_url: Some(db.migrate_url.clone()),
            database_schema: Some("tenancy".to_owned()),
        },
        nats: cairn_service::NatsArgs {
            nats_url: nats.url.clone(),
            nats_prefix: Some(nats.prefix.clone()),
            nats_creds: None,
        },
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        jwt_private_keys_file: keys_file,
        access_token_ttl: opts.access_token_ttl,
        login_attempts_per_minute: opts.login_attempts_per_minute,
        credential_attempts_per_address_per_minute: opts.attempts_per_address_per_minute,
        // Cheap argon2id parameters keep tests fast; production uses the defaults.
        password_hash_memory_kib: 256,
        password_hash_iterations: 1,
        event_ack_wait: Duration::from_secs(5),
        webhooks: opts.webhooks.clone(),
    }
}

pub async fn connect(addr: std::net::SocketAddr) -> Channel {
    cairn_testkit::connect_grpc(addr).await
}

pub async fn spawn_app_with(opts: Options) -> TestApp {
    cairn_testkit::init_tracing();
    let db = cairn_testkit::fresh_database().await;
    let nats = cairn_testkit::connect_nats().await;
    let dir = cairn_testkit::temp_dir();
    let keys_file = dir.path().join("jwt-private-keys.json");
    Signer::from_keys(vec![SigningKey::generate("k1").unwrap()])
        .unwrap()
        .save(&keys_file)
        .unwrap();
    let config = config_for(&db, &nats, keys_file.clone(), &opts);
    let server = Server::start_with(config.clone(), opts.webhooks.clone())
        .await
        .expect("start tenancy");
    let grpc = connect(server.grpc_addr()).await;

    let slug = Slug::parse("tenant-a").unwrap();
    let email = Email::parse("owner-a@example.com").unwrap();
    let boot = cairn_tenancy::app::bootstrap::bootstrap(
        &server.app().pool,
        &slug,
        "Tenant A",
        &email,
        "Owner A",
    )
    .await
    .expect("bootstrap");
    let bootstrap_api_token = boot.api_token.expose().to_owned();
    let owner_a_token = TokensClient::new(grpc.clone())
        .exchange_api_token(pb::ExchangeApiTokenRequest {
            api_token: bootstrap_api_token.clone(),
        })
        .await
        .expect("exchange bootstrap token")
        .into_inner()
        .access_token;
    let a = Tenant {
        id: boot.tenant_id.uuid(),
        slug: "tenant-a".into(),
        owner: boot.user_id.uuid(),
        owner_email: "owner-a@example.com".into(),
        owner_token: owner_a_token.clone(),
    };
    let created = TenantsClient::with_interceptor(grpc.clone(), Bearer(owner_a_token.into()))
        .create_tenant(pb::CreateTenantRequest {
            slug: "tenant-b".into(),
            display_name: "Tenant B".into(),
            owner_email: "owner-b@example.com".into(),
            owner_display_name: "Owner B".into(),
            owner_password: PASSWORD.into(),
        })
        .await
        .expect("create tenant B")
        .into_inner();
    let b_id: Uuid = created.tenant.unwrap().tenant_id.parse().unwrap();
    let b_owner: Uuid = created.owner.unwrap().user_id.parse().unwrap();
    let owner_b_token = login(&grpc, "tenant-b", "owner-b@example.com", PASSWORD)
        .await
        .expect("login owner B")
        .access_token;
    let b = Tenant {
        id: b_id,
        slug: "tenant-b".into(),
        owner: b_owner,
        owner_email: "owner-b@example.com".into(),
        owner_token: owner_b_token,
    };
    TestApp {
        server: Some(server),
        config,
        webhooks: opts.webhooks.clone(),
        grpc,
        db,
        nats,
        dir,
        keys_file,
        bootstrap_api_token,
        a,
        b,
    }
}

use cairn_tenancy::domain::names::{Email, Slug};

pub async fn login(
    grpc: &Channel,
    tenant_slug: &str,
    email: &str,
    password: &str,
) -> Result<pb::AccessToken, tonic::Status> {
    TokensClient::new(grpc.clone())
        .login(pb::LoginRequest {
            tenant_slug: tenant_slug.into(),
            email: email.into(),
            password: password.into(),
        })
        .await
        .map(tonic::Response::into_inner)
}

impl TestApp {
    pub fn tenants(&self, token: &str) -> TenantsClient<Authed> {
        TenantsClient::with_interceptor(self.grpc.clone(), Bearer(token.into()))
    }
    pub fn users(&self, token: &str) -> UsersClient<Authed> {
        UsersClient::with_interceptor(self.grpc.clone(), Bearer(token.into()))
    }
    pub fn tokens(&self, token: &str) -> TokensClient<Authed> {
        TokensClient::with_interceptor(self.grpc.clone(), Bearer(token.into()))
    }
    pub fn targets(&self, token: &str) -> TargetsClient<Authed> {
        TargetsClient::with_interceptor(self.grpc.clone(), Bearer(token.into()))
    }
    pub fn audit(&self, token: &str) -> AuditClient<Authed> {
        AuditClient::with_interceptor(self.grpc.clone(), Bearer(token.into()))
    }
    pub fn webhooks(&self, token: &str) -> WebhooksClient<Authed> {
        WebhooksClient::with_interceptor(self.grpc.clone(), Bearer(token.into()))
    }

    /// The signer currently in the keys file.
    pub fn signer(&self) -> Signer {
        Signer::load(&self.keys_file).unwrap()
    }

    /// An access token for `user` in `tenant` with `role`, signed with the active key.
    pub fn mint(&self, user: Uuid, tenant: Uuid, role: Role) -> String {
        self.signer()
            .sign(&Claims::new_user(
                user.to_string(),
                tenant,
                role,
                Duration::from_secs(300),
            ))
            .unwrap()
    }

    /// A service access token for `name`.
    pub fn mint_service(&self, name: &str) -> String {
        self.signer()
            .sign(&Claims::new_service(name, Duration::from_secs(300)))
            .unwrap()
    }

    /// Adds a member with `role` to tenant A (by A's owner); returns the user id.
    pub async fn add_member(&self, tenant: &Tenant, email: &str, role: Role) -> Uuid {
        self.users(&tenant.owner_token)
            .add_user(pb::AddUserRequest {
                tenant_id: tenant.id.to_string(),
                email: email.into(),
                display_name: email.into(),
                password: PASSWORD.into(),
                role: role.as_str().into(),
            })
            .await
            .expect("add member")
            .into_inner()
            .member
            .unwrap()
            .user_id
            .parse()
            .unwrap()
    }

    /// Creates a local target in `tenant` as its owner.
    pub async fn create_target(&self, tenant: &Tenant, name: &str) -> Uuid {
        self.targets(&tenant.owner_token)
            .create_target(pb::CreateTargetRequest {
                tenant_id: tenant.id.to_string(),
                name: name.into(),
                spec: Some(local_spec("/srv/cairn", 2)),
            })
            .await
            .expect("create target")
            .into_inner()
            .target
            .unwrap()
            .target_id
            .parse()
            .unwrap()
    }

    /// A digest of every tenancy table (as the superuser), to show nothing changed.
    pub async fn snapshot(&self) -> String {
        let mut conn = sqlx::PgConnection::connect(&self.db.admin_url)
            .await
            .unwrap();
        let mut out = String::new();
        for table in [
            "tenants",
            "users",
            "memberships",
            "api_tokens",
            "service_accounts",
            "targets",
            "audit_log",
            "outbox",
            "message_outbox",
            "target_validations",
            "bootstrap",
        ] {
            // The relays mark rows sent in the background: compare the messages only.
            let row = match table {
                "outbox" => "t.event_id::text",
                "message_outbox" => "t.msg_id",
                _ => "t::text",
            };
            let digest: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT md5(string_agg({row}, ',' ORDER BY {row})) FROM tenancy.{table} t"
            )))
            .fetch_one(&mut conn)
            .await
            .unwrap();
            out.push_str(&format!("{table}={}\n", digest.unwrap_or_default()));
        }
        out
    }

    /// A connection as the service's runtime role (search_path = tenancy).
    pub async fn runtime_conn(&self) -> sqlx::PgConnection {
        let mut conn = sqlx::PgConnection::connect(&self.db.runtime_url)
            .await
            .unwrap();
        sqlx::query("SET search_path = tenancy")
            .execute(&mut conn)
            .await
            .unwrap();
        conn
    }

    /// A connection as the superuser to the test database.
    pub async fn admin_conn(&self) -> sqlx::PgConnection {
        sqlx::PgConnection::connect(&self.db.admin_url)
            .await
            .unwrap()
    }

    /// Stops the server and starts it again with the same database and (current) keys file.
    pub async fn restart(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
        let server = Server::start_with(self.config.clone(), self.webhooks.clone())
            .await
            .expect("restart tenancy");
        self.grpc = connect(server.grpc_addr()).await;
        self.server = Some(server);
    }

    /// Stops the server and deletes this test's NATS streams.
    pub async fn finish(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
        self.nats.delete_streams().await;
    }

    pub fn server(&self) -> &Server {
        self.server.as_ref().expect("server running")
    }
}

pub fn local_spec(base_dir: &str, max: u32) -> pb::TargetSpec {
    pb::TargetSpec {
        provider: Some(pb::target_spec::Provider::Local(pb::LocalProvider {
            base_dir: base_dir.into(),
        })),
        credential_ref: "local-default".into(),
        max_concurrent_deployments: max,
        enabled: true,
    }
}

/// A JWT with arbitrary header and claims JSON, signed with `key` (Ed25519), bypassing the
/// checks `SigningKey::sign` makes.
pub fn raw_ed25519_jwt(
    header: &serde_json::Value,
    claims: &serde_json::Value,
    key: &SigningKey,
) -> String {
    use aws_lc_rs::signature::Ed25519KeyPair;
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let pair = Ed25519KeyPair::from_pkcs8(key.pkcs8_der()).unwrap();
    let sig = pair.sign(signing_input.as_bytes());
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
}

/// Valid claims JSON for a user of `tenant` (to be altered by tests).
pub fn claims_json(user: Uuid, tenant: Uuid, role: Role) -> serde_json::Value {
    serde_json::to_value(Claims::new_user(
        user.to_string(),
        tenant,
        role,
        Duration::from_secs(300),
    ))
    .unwrap()
}

/// Polls `check` until it returns `Some`, for at most `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The secret part of an API token (`cairn_<32 hex digits of its id>_<secret>`): the secret is
/// base64url, so it may itself contain `_`, and only the whole of it is worth searching for.
pub fn api_token_secret(token: &str) -> String {
    let secret = token
        .strip_prefix("cairn_")
        .and_then(|rest| rest.get(33..))
        .expect("an API token of the documented shape");
    assert!(secret.len() >= 40, "the secret of {token:?} is whole");
    secret.to_owned()
}
