//! `spawn_app()`: the real server on port 0, a fresh database, its own signing key, and
//! typed clients authenticated as a user of a tenant (or as a service).
use std::path::PathBuf;

use cairn_auth::Role;
use cairn_proto::templates as pb;
use cairn_templates::{Config, Server};
use cairn_testkit::TestKeys;
pub use cairn_testkit::{Authed, Bearer};
use tonic::transport::Channel;
use uuid::Uuid;

pub type Templates = pb::templates_client::TemplatesClient<Authed>;
pub type Resolver = pb::resolver_client::ResolverClient<Authed>;

pub struct TestApp {
    pub server: Server,
    pub channel: Channel,
    pub keys: TestKeys,
    pub db: cairn_db::TestDatabase,
    pub tenant: Uuid,
}

/// The fixture module library of libs/templating.
pub fn fixture_modules() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../libs/templating/tests/fixtures/modules")
}

pub fn webapp() -> String {
    std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../libs/templating/tests/fixtures/templates/webapp.yaml"),
    )
    .unwrap()
}

pub async fn spawn_app() -> TestApp {
    cairn_testkit::init_tracing();
    let db = cairn_testkit::fresh_database().await;
    let keys = TestKeys::new();
    let config = config_for(&db, &keys, fixture_modules());
    let server = Server::start(config)
        .await
        .expect("start templates service");
    let channel = cairn_testkit::connect_grpc(server.grpc_addr()).await;
    TestApp {
        server,
        channel,
        keys,
        db,
        tenant: Uuid::new_v4(),
    }
}

/// The configuration of a server on `db` that reads `modules_dir`.
pub fn config_for(db: &cairn_db::TestDatabase, keys: &TestKeys, modules_dir: PathBuf) -> Config {
    Config {
        shared: Default::default(),
        db: cairn_service::DbArgs {
            database_url: db.runtime_url.clone(),
            database_migrate_url: Some(db.migrate_url.clone()),
            database_schema: Some("templates".to_owned()),
        },
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        jwks: cairn_service::JwksArgs {
            jwt_public_keys_file: keys.jwks_path().to_owned(),
        },
        modules_dir,
        template_max_bytes: 256 * 1024,
        template_max_resources: 100,
    }
}

impl TestApp {
    fn authed(&self, token: String) -> Authed {
        tonic::service::interceptor::InterceptedService::new(
            self.channel.clone(),
            Bearer(token.into()),
        )
    }

    /// Clients acting as a user of `tenant` with `role`.
    pub fn clients_for(&self, tenant: Uuid, role: Role) -> (Templates, Resolver) {
        let token = self.keys.user_token(tenant, role);
        (
            Templates::new(self.authed(token.clone())),
            Resolver::new(self.authed(token)),
        )
    }

    /// Clients acting as an operator of the test's tenant.
    pub fn clients(&self) -> (Templates, Resolver) {
        self.clients_for(self.tenant, Role::Operator)
    }

    pub fn service_resolver(&self) -> Resolver {
        Resolver::new(self.authed(self.keys.service_token()))
    }

    /// Creates template `webapp` and publishes the fixture document as version 1.
    pub async fn published_webapp(&self) -> (String, pb::TemplateVersion) {
        let (mut t, _) = self.clients();
        let template = t
            .create_template(pb::CreateTemplateRequest {
                tenant_id: self.tenant.to_string(),
                name: "webapp".into(),
                description: "demo".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .template
            .unwrap();
        let version = t
            .publish_version(pb::PublishVersionRequest {
                template_id: template.template_id.clone(),
                document: webapp(),
            })
            .await
            .unwrap()
            .into_inner()
            .version
            .unwrap();
        (template.template_id, version)
    }
}

pub fn resolve_request(template_id: &str, environment: &str) -> pb::ResolveRequest {
    pb::ResolveRequest {
        template_id: template_id.to_owned(),
        version: "1".into(),
        instance_id: "22222222-2222-2222-2222-222222222222".into(),
        instance_name: "shop".into(),
        environment: environment.into(),
        parameters_json: r#"{"db_password": "arn:aws:secretsmanager:us-east-1:1:secret:db"}"#
            .into(),
        target_settings: [("base_dir".to_owned(), "/srv/cairn".to_owned())].into(),
    }
}
