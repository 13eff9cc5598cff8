//! `spawn_app()`: tenancy (tenant A bootstrapped, a local target `local`), templates (the
//! real module library, `web-stack` published as version 1) and deployments, each on port 0
//! with a database of its own, one NATS prefix and one signing key; typed clients as a user
//! of tenant A with a role, or of another tenant.
use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream;
use cairn_auth::Role;
use cairn_proto::deployments as pb;
use cairn_proto::templates as tpb;
use cairn_proto::tenancy as tnpb;
use cairn_testkit::{Authed, Bearer, TempDir, TestKeys, TestNats};
use futures::StreamExt;
use prost::Message;
use tonic::transport::Channel;
use uuid::Uuid;

pub type Instances = pb::instances_client::InstancesClient<Authed>;
pub type Deployments = pb::deployments_client::DeploymentsClient<Authed>;

/// The parameters web-stack needs (its one required parameter is a sensitive reference).
pub const PARAMS: &str =
    r#"{"db_admin_password": "arn:aws:secretsmanager:us-east-1:000000000000:secret:shop-db"}"#;

pub struct TestApp {
    _server: cairn_deployments::Server,
    pub channel: Channel,
    pub keys: TestKeys,
    pub nats: TestNats,
    pub tenant: Uuid,
    pub target_id: String,
    pub template_id: String,
    _base_dir: TempDir,
    pub db: cairn_db::TestDatabase,
    _tenancy: cairn_tenancy::Server,
    _templates: cairn_templates::Server,
    _dbs: Vec<cairn_db::TestDatabase>,
    _dir: TempDir,
}

pub fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

pub fn db_args(db: &cairn_db::TestDatabase, schema: &str) -> cairn_service::DbArgs {
    cairn_service::DbArgs {
        database_url: db.runtime_url.clone(),
        database_migrate_url: Some(db.migrate_url.clone()),
        database_schema: Some(schema.to_owned()),
    }
}

pub fn nats_args(nats: &TestNats) -> cairn_service::NatsArgs {
    cairn_service::NatsArgs {
        nats_url: nats.url.clone(),
        nats_prefix: Some(nats.prefix.clone()),
        nats_creds: None,
    }
}

pub fn authed(channel: &Channel, token: String) -> Authed {
    tonic::service::interceptor::InterceptedService::new(channel.clone(), Bearer(token.into()))
}

pub async fn start_tenancy(
    keys: &TestKeys,
    nats: &TestNats,
    dir: &TempDir,
) -> (cairn_tenancy::Server, cairn_db::TestDatabase, Uuid) {
    let db = cairn_testkit::fresh_database().await;
    let keys_file = dir.path().join("jwt-private-keys.json");
    cairn_tenancy::keys::Signer::from_keys(vec![keys.signing_key().clone()])
        .unwrap()
        .save(&keys_file)
        .unwrap();
    let config = cairn_tenancy::Config {
        shared: Default::default(),
        db: db_args(&db, "tenancy"),
        nats: nats_args(nats),
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        jwt_private_keys_file: keys_file,
        access_token_ttl: Duration::from_secs(300),
        login_attempts_per_minute: 1000,
        credential_attempts_per_address_per_minute: 10_000,
        password_hash_memory_kib: 256,
        password_hash_iterations: 1,
        event_ack_wait: Duration::from_secs(5),
        webhooks: Default::default(),
    };
    let server = cairn_tenancy::Server::start(config)
        .await
        .expect("start tenancy");
    let boot = cairn_tenancy::app::bootstrap::bootstrap(
        &server.app().pool,
        &cairn_tenancy::domain::names::Slug::parse("tenant-a").unwrap(),
        "Tenant A",
        &cairn_tenancy::domain::names::Email::parse("owner-a@example.com").unwrap(),
        "Owner A",
    )
    .await
    .expect("bootstrap tenancy");
    (server, db, boot.tenant_id.uuid())
}

pub async fn start_templates(keys: &TestKeys) -> (cairn_templates::Server, cairn_db::TestDatabase) {
    let db = cairn_testkit::fresh_database().await;
    let config = cairn_templates::Config {
        shared: Default::default(),
        db: db_args(&db, "templates"),
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        jwks: cairn_service::JwksArgs {
            jwt_public_keys_file: keys.jwks_path().to_owned(),
        },
        modules_dir: repo("modules"),
        template_max_bytes: 256 * 1024,
        template_max_resources: 100,
    };
    let server = cairn_templates::Server::start(config)
        .await
        .expect("start templates");
    (server, db)
}

pub async fn spawn_app() -> TestApp {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let nats = cairn_testkit::connect_nats().await;
    let dir = cairn_testkit::temp_dir();
    let base_dir = cairn_testkit::temp_dir();
    let (tenancy, tenancy_db, tenant) = start_tenancy(&keys, &nats, &dir).await;
    let (templates, templates_db) = start_templates(&keys).await;
    let tenancy_ch = cairn_testkit::connect_grpc(tenancy.grpc_addr()).await;
    let templates_ch = cairn_testkit::connect_grpc(templates.grpc_addr()).await;

    // The tenant's local target and its web-stack template, made by its admin.
    let admin = keys.user_token(tenant, Role::Admin);
    let target_id = create_local_target(&tenancy_ch, &admin, tenant, base_dir.path(), 2).await;
    let template_id = publish_web_stack(&templates_ch, &admin, tenant).await;

    // Deployments, as a service with a token of its own.
    let db = cairn_testkit::fresh_database().await;
    let token_file = dir.path().join("deployments.token");
    std::fs::write(&token_file, keys.service_token_as("deployments")).unwrap();
    let config = cairn_deployments::Config {
        shared: Default::default(),
        db: db_args(&db, "deployments"),
        nats: nats_args(&nats),
        jwks: cairn_service::JwksArgs {
            jwt_public_keys_file: keys.jwks_path().to_owned(),
        },
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        peers: cairn_service::PeerArgs {
            tenancy_url: format!("http://{}", tenancy.grpc_addr()),
            coordinator_url: "http://127.0.0.1:9".into(),
            service_token_file: token_file,
        },
        templates_url: format!("http://{}", templates.grpc_addr()),
        deploy_parallelism: 4,
        deploy_retries: 3,
        approval_ttl: Duration::from_secs(3600),
        step_admit_timeout: Duration::from_secs(60),
        step_log_lines: 1000,
        // The request phase only: no worker takes the jobs these tests read.
        deploy_workers: 0,
        deploy_ack_wait: Duration::from_secs(5),
        deploy_retry_backoff: Duration::from_millis(200),
        run_result_fallback: Duration::from_secs(2),
        slot_wait: Duration::from_millis(500),
    };
    let server = cairn_deployments::Server::start(config)
        .await
        .expect("start deployments");
    let channel = cairn_testkit::connect_grpc(server.grpc_addr()).await;
    TestApp {
        _server: server,
        channel,
        keys,
        nats,
        tenant,
        target_id,
        template_id,
        _base_dir: base_dir,
        db,
        _tenancy: tenancy,
        _templates: templates,
        _dbs: vec![tenancy_db, templates_db],
        _dir: dir,
    }
}

impl TestApp {
    /// Clients acting as a user of `tenant` with `role`.
    pub fn clients_for(&self, tenant: Uuid, role: Role) -> (Instances, Deployments) {
        let token = self.keys.user_token(tenant, role);
        (
            Instances::new(authed(&self.channel, token.clone())),
            Deployments::new(authed(&self.channel, token)),
        )
    }

    /// Clients acting as an operator of tenant A.
    pub fn clients(&self) -> (Instances, Deployments) {
        self.clients_for(self.tenant, Role::Operator)
    }

    /// A create request for web-stack on the local target, by names.
    pub fn create_request(&self, name: &str, environment: &str) -> pb::CreateInstanceRequest {
        pb::CreateInstanceRequest {
            tenant_id: self.tenant.to_string(),
            name: name.into(),
            template_ref: "web-stack".into(),
            template_version: 0,
            target_ref: "local".into(),
            environment: environment.into(),
            parameters_json: PARAMS.into(),
        }
    }

    pub async fn create_instance(&self, name: &str, environment: &str) -> pb::Instance {
        let (mut i, _) = self.clients();
        i.create_instance(self.create_request(name, environment))
            .await
            .expect("create instance")
            .into_inner()
            .instance
            .unwrap()
    }

    pub fn deploy_request(&self, instance: &str, key: &str) -> pb::CreateDeploymentRequest {
        pb::CreateDeploymentRequest {
            tenant_id: self.tenant.to_string(),
            instance_ref: instance.into(),
            kind: pb::DeploymentKind::Deploy as i32,
            idempotency_key: key.into(),
            ..Default::default()
        }
    }

    /// A connection to this test's database as the superuser.
    pub async fn admin_conn(&self) -> sqlx::PgConnection {
        use sqlx::Connection;
        sqlx::PgConnection::connect(&self.db.admin_url)
            .await
            .unwrap()
    }

    /// The one count `query` returns (as the superuser).
    pub async fn count_of(&self, query: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(query.to_owned()))
            .fetch_one(&mut self.admin_conn().await)
            .await
            .unwrap()
    }

    /// Rows of a table in the deployments schema (as the superuser).
    pub async fn count(&self, table: &str) -> i64 {
        self.count_of(&format!("SELECT count(*) FROM deployments.{table}"))
            .await
    }

    /// The deployment jobs on this test's `cairn.deployq` (read with a consumer of its own
    /// until `expect` arrived or a few seconds passed).
    pub async fn deploy_jobs(&self, expect: usize) -> Vec<String> {
        let ns = cairn_bus::Namespace::with_prefix(&self.nats.prefix).unwrap();
        let stream = self
            .nats
            .jetstream
            .get_stream(ns.deployq_stream())
            .await
            .expect("deployq stream");
        let consumer = stream
            .get_or_create_consumer(
                "test-reader",
                jetstream::consumer::pull::Config {
                    durable_name: Some("test-reader".into()),
                    filter_subject: ns.deployq(),
                    ..Default::default()
                },
            )
            .await
            .expect("deployq consumer");
        let mut jobs = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while jobs.len() < expect && tokio::time::Instant::now() < deadline {
            let mut batch = consumer
                .fetch()
                .max_messages(10)
                .expires(Duration::from_millis(500))
                .messages()
                .await
                .unwrap();
            while let Some(msg) = batch.next().await {
                let msg = msg.unwrap();
                let job = pb::DeploymentJob::decode(msg.payload.as_ref()).unwrap();
                jobs.push(job.deployment_id);
                msg.ack().await.unwrap();
            }
        }
        jobs
    }
}

/// Kinds and resources of a deployment's steps, for comparison.
pub fn step_list(d: &pb::Deployment) -> Vec<(pb::StepKind, String)> {
    d.steps
        .iter()
        .map(|s| (pb::StepKind::try_from(s.kind).unwrap(), s.resource.clone()))
        .collect()
}

/// The tenant's local target `local` on `base_dir` (`slots` deployments at once, credential
/// `local-default`), made as `admin`; returns its id.
pub async fn create_local_target(
    tenancy: &Channel,
    admin: &str,
    tenant: Uuid,
    base_dir: &std::path::Path,
    slots: u32,
) -> String {
    tnpb::targets_client::TargetsClient::new(authed(tenancy, admin.to_owned()))
        .create_target(tnpb::CreateTargetRequest {
            tenant_id: tenant.to_string(),
            name: "local".into(),
            spec: Some(tnpb::TargetSpec {
                provider: Some(tnpb::target_spec::Provider::Local(tnpb::LocalProvider {
                    base_dir: base_dir.display().to_string(),
                })),
                credential_ref: "local-default".into(),
                max_concurrent_deployments: slots,
                enabled: true,
            }),
        })
        .await
        .expect("create target")
        .into_inner()
        .target
        .unwrap()
        .target_id
}

/// The tenant's `web-stack` template (modules/examples/web-stack), made as `admin`; returns
/// its id.
pub async fn publish_web_stack(templates: &Channel, admin: &str, tenant: Uuid) -> String {
    let document = std::fs::read_to_string(repo("modules/examples/web-stack/template.yaml"))
        .expect("read modules/examples/web-stack/template.yaml");
    publish_template(templates, admin, tenant, "web-stack", &document).await
}

/// A template `name` of the tenant with `document` as its first version, made as `admin`;
/// returns its id.
pub async fn publish_template(
    templates: &Channel,
    admin: &str,
    tenant: Uuid,
    name: &str,
    document: &str,
) -> String {
    let mut t = tpb::templates_client::TemplatesClient::new(authed(templates, admin.to_owned()));
    let template_id = t
        .create_template(tpb::CreateTemplateRequest {
            tenant_id: tenant.to_string(),
            name: name.to_owned(),
            description: format!("{name}, made by a test"),
        })
        .await
        .unwrap_or_else(|e| panic!("create template {name}: {e}"))
        .into_inner()
        .template
        .unwrap()
        .template_id;
    t.publish_version(tpb::PublishVersionRequest {
        template_id: template_id.clone(),
        document: document.to_owned(),
    })
    .await
    .unwrap_or_else(|e| panic!("publish {name}: {e}"));
    template_id
}
