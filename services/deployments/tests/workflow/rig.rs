//! The whole workflow under test, in-process: a real state coordinator (its own database,
//! bucket and KMS key in moto), tenancy (a tenant, a local target with a slot limit),
//! templates (the real module library, web-stack published), a real runner (process
//! executor running tofu-sim, serving the target) and the deployments service with its
//! worker; one NATS prefix and one signing key for all.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cairn_auth::Role;
use cairn_proto::deployments as pb;
use cairn_proto::events::Event;
use cairn_service::Service as _;
use cairn_testkit::{TempDir, TestAws, TestKeys, TestNats};
use clap::Parser;
use tonic::transport::Channel;
use uuid::Uuid;

use crate::helpers::{
    PARAMS, authed, create_local_target, db_args, nats_args, publish_template, publish_web_stack,
    repo, start_templates, start_tenancy,
};

pub type Instances = pb::instances_client::InstancesClient<cairn_testkit::Authed>;
pub type Deployments = pb::deployments_client::DeploymentsClient<cairn_testkit::Authed>;

/// What a rig is set up with.
#[derive(Debug, Clone)]
pub struct Opts {
    /// The target's max_concurrent_deployments.
    pub slots: u32,
    /// The runner's CAIRN_EXECUTOR_EXTRA_ENV (tofu-sim fault knobs).
    pub extra_env: String,
    pub approval_ttl: Duration,
    /// Runs of one resource apply slowly by this much (TOFU_SIM_RESOURCE_DELAY).
    pub resource_delay: Option<&'static str>,
    /// Start a runner serving the target.
    pub runner: bool,
    pub admit_timeout: Duration,
    /// The runner's tofu binary (default: the tofu-sim build).
    pub tofu_bin: Option<PathBuf>,
    /// Start the deployments service in this process (else only its settings are made, for
    /// the real binary started by the test: `config.grpc_addr` is a free port to serve on).
    pub deployments_in_process: bool,
    /// The runner's `--concurrency`.
    pub runner_concurrency: usize,
    /// The deployments service's `CAIRN_DEPLOY_PARALLELISM`.
    pub parallelism: usize,
    /// More templates to publish (name, document), next to web-stack.
    pub templates: Vec<(String, String)>,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            slots: 2,
            extra_env: String::new(),
            approval_ttl: Duration::from_secs(3600),
            resource_delay: None,
            runner: true,
            admit_timeout: Duration::from_secs(60),
            tofu_bin: None,
            deployments_in_process: true,
            runner_concurrency: 4,
            parallelism: 4,
            templates: Vec::new(),
        }
    }
}

#[derive(Parser)]
struct RunnerArgs {
    #[command(flatten)]
    serve: cairn_runner::config::ServeConfig,
}

pub struct Rig {
    pub server: Option<cairn_deployments::Server>,
    pub config: cairn_deployments::Config,
    pub channel: Channel,
    pub keys: TestKeys,
    pub nats: TestNats,
    pub tenant: Uuid,
    pub target_id: String,
    pub base_dir: TempDir,
    pub db: cairn_db::TestDatabase,
    pub coord_db: cairn_db::TestDatabase,
    _coord: cairn_state_coordinator::Server,
    _aws: TestAws,
    _runner: Option<cairn_runner::serve::Runner>,
    _tenancy: cairn_tenancy::Server,
    _templates: cairn_templates::Server,
    _dbs: Vec<cairn_db::TestDatabase>,
    _dir: TempDir,
    _work: tempfile::TempDir,
}

fn tofu_bin() -> PathBuf {
    if let Ok(bin) = std::env::var("CAIRN_TOFU_BIN") {
        return PathBuf::from(bin);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo("target"));
    let bin = target.join("x86_64-unknown-linux-gnu/release/tofu");
    assert!(
        bin.is_file(),
        "no tofu-sim binary: set CAIRN_TOFU_BIN or run deploy/images/tofu-sim/build.sh (expected {})",
        bin.display()
    );
    bin
}

pub async fn rig(opts: Opts) -> Rig {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let nats = cairn_testkit::connect_nats().await;
    let dir = cairn_testkit::temp_dir();
    let base_dir = cairn_testkit::temp_dir();

    // The coordinator.
    let coord_db = cairn_testkit::fresh_database().await;
    let aws = TestAws::create().await;
    let coord_config = cairn_state_coordinator::Config {
        // No test here lets a lease run out (runners are never killed; the crash test kills
        // the deployments binary), so the lease only has to outlast a renewal on a loaded
        // machine: a 10 s one left a renewal 3.7 s before tofu was stopped as lease lost,
        // and a CI run lost a probe that way.
        run_lease: Duration::from_secs(30),
        ..cairn_state_coordinator::testing::test_config(&coord_db, &nats, &aws, &keys)
    };
    let edges = cairn_state_coordinator::testing::aws_edges(&aws, &aws.endpoint, &aws.endpoint);
    let (coord, _) = cairn_state_coordinator::testing::start(coord_config, edges).await;

    let (tenancy, tenancy_db, tenant) = start_tenancy(&keys, &nats, &dir).await;
    let (templates, templates_db) = start_templates(&keys).await;
    let tenancy_ch = cairn_testkit::connect_grpc(tenancy.grpc_addr()).await;
    let templates_ch = cairn_testkit::connect_grpc(templates.grpc_addr()).await;
    let admin = keys.user_token(tenant, Role::Admin);
    let target_id =
        create_local_target(&tenancy_ch, &admin, tenant, base_dir.path(), opts.slots).await;
    publish_web_stack(&templates_ch, &admin, tenant).await;
    for (name, document) in &opts.templates {
        publish_template(&templates_ch, &admin, tenant, name, document).await;
    }

    // The runner serving the target: its credentials and the database password reference.
    let secrets = dir.path().join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("key"), "local-key\n").unwrap();
    std::fs::write(secrets.join("db"), "db-password-1\n").unwrap();
    let arn: serde_json::Value = serde_json::from_str(PARAMS).unwrap();
    let arn = arn["db_admin_password"].as_str().unwrap().to_owned();
    let credentials = dir.path().join("credentials.json");
    std::fs::write(
        &credentials,
        serde_json::json!({"entries": [
            {"tenant_id": tenant.to_string(), "target_id": target_id, "reference": "local-default",
             "vars": {"LOCAL_API_KEY": {"file": secrets.join("key")}}},
            {"tenant_id": tenant.to_string(), "target_id": target_id, "reference": arn,
             "vars": {"DB_ADMIN_PASSWORD": {"file": secrets.join("db")}}}
        ]})
        .to_string(),
    )
    .unwrap();
    std::fs::write(dir.path().join("runner.token"), keys.service_token()).unwrap();
    let work = tempfile::tempdir_in("/dev/shm").unwrap();
    let spool = dir.path().join("spool");
    let mut extra_env = opts.extra_env.clone();
    // Transient-failure counters shared by every run of the test (tofu-sim keeps them there).
    let sim_state = dir.path().join("sim-state");
    std::fs::create_dir_all(&sim_state).unwrap();
    for kv in [
        Some(format!("TOFU_SIM_STATE_DIR={}", sim_state.display())),
        opts.resource_delay
            .map(|d| format!("TOFU_SIM_RESOURCE_DELAY={d}")),
    ]
    .into_iter()
    .flatten()
    {
        if !extra_env.is_empty() {
            extra_env.push('\n');
        }
        extra_env.push_str(&kv);
    }
    let p = |p: &std::path::Path| p.display().to_string();
    let args = RunnerArgs::try_parse_from([
        "runner".to_owned(),
        format!(
            "--instance=test-runner-{}",
            &Uuid::new_v4().simple().to_string()[..8]
        ),
        format!("--nats-url={}", nats.url),
        format!("--nats-prefix={}", nats.prefix),
        format!("--coordinator-url=http://{}", coord.grpc_addr()),
        format!(
            "--service-token-file={}",
            p(&dir.path().join("runner.token"))
        ),
        format!("--credentials-file={}", p(&credentials)),
        "--grpc-addr=127.0.0.1:0".to_owned(),
        format!("--jwt-public-keys-file={}", p(keys.jwks_path())),
        "--executor=process".to_owned(),
        format!(
            "--tofu-bin={}",
            p(&opts.tofu_bin.clone().unwrap_or_else(tofu_bin))
        ),
        "--tofu-timeout=2m".to_owned(),
        "--tofu-grace=2s".to_owned(),
        format!("--extra-env={extra_env}"),
        format!("--modules-dir={}", p(&repo("modules"))),
        format!("--work-root={}", p(work.path())),
        format!("--spool-dir={}", p(&spool)),
        format!("--concurrency={}", opts.runner_concurrency),
        "--ack-wait=3s".to_owned(),
        "--log-tail=20".to_owned(),
    ])
    .expect("runner settings");
    let runner = if opts.runner {
        Some(
            cairn_runner::serve::Runner::start(args.serve)
                .await
                .expect("start runner"),
        )
    } else {
        None
    };

    // Deployments, with its worker.
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
            coordinator_url: format!("http://{}", coord.grpc_addr()),
            service_token_file: token_file,
        },
        templates_url: format!("http://{}", templates.grpc_addr()),
        deploy_parallelism: opts.parallelism,
        deploy_retries: 3,
        approval_ttl: opts.approval_ttl,
        step_admit_timeout: opts.admit_timeout,
        step_log_lines: 1000,
        deploy_workers: 4,
        deploy_ack_wait: Duration::from_secs(2),
        deploy_retry_backoff: Duration::from_millis(200),
        run_result_fallback: Duration::from_secs(3),
        slot_wait: Duration::from_millis(300),
    };
    let (server, channel, config) = if opts.deployments_in_process {
        let server = cairn_deployments::Server::start(config.clone())
            .await
            .expect("start deployments");
        let channel = cairn_testkit::connect_grpc(server.grpc_addr()).await;
        (Some(server), channel, config)
    } else {
        // The binary serves on a port of its own, the same after every restart; the
        // channel connects (and reconnects) when it is used.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect_timeout(Duration::from_secs(2))
            .connect_lazy();
        let config = cairn_deployments::Config {
            grpc_addr: addr,
            ..config
        };
        (None, channel, config)
    };
    Rig {
        server,
        config,
        channel,
        keys,
        nats,
        tenant,
        target_id,
        base_dir,
        db,
        coord_db,
        _coord: coord,
        _aws: aws,
        _runner: runner,
        _tenancy: tenancy,
        _templates: templates,
        _dbs: vec![tenancy_db, templates_db],
        _dir: dir,
        _work: work,
    }
}

pub fn status(d: &pb::Deployment) -> pb::DeploymentStatus {
    pb::DeploymentStatus::try_from(d.status).unwrap()
}

pub fn step_status(s: &pb::Step) -> pb::StepStatus {
    pb::StepStatus::try_from(s.status).unwrap()
}

impl Rig {
    /// Clients acting as `subject` of the tenant with `role`.
    pub fn clients_as(&self, subject: &str, role: Role) -> (Instances, Deployments) {
        let token = self.keys.user_token_as(subject, self.tenant, role);
        (
            Instances::new(authed(&self.channel, token.clone())),
            Deployments::new(authed(&self.channel, token)),
        )
    }

    /// Clients acting as the operator `test-user`.
    pub fn clients(&self) -> (Instances, Deployments) {
        self.clients_as("test-user", Role::Operator)
    }

    /// Kills the deployments service (its tasks stop at their next await, as a crash
    /// would leave them) and starts a new one against the same database.
    pub async fn restart(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown_token().cancel();
            drop(server);
        }
        let server = cairn_deployments::Server::start(self.config.clone())
            .await
            .expect("restart deployments");
        self.channel = cairn_testkit::connect_grpc(server.grpc_addr()).await;
        self.server = Some(server);
    }

    pub async fn create_instance(
        &self,
        name: &str,
        environment: &str,
        params: &str,
    ) -> pb::Instance {
        let (mut i, _) = self.clients();
        i.create_instance(pb::CreateInstanceRequest {
            tenant_id: self.tenant.to_string(),
            name: name.into(),
            template_ref: "web-stack".into(),
            template_version: 0,
            target_ref: "local".into(),
            environment: environment.into(),
            parameters_json: params.into(),
        })
        .await
        .expect("create instance")
        .into_inner()
        .instance
        .unwrap()
    }

    pub async fn instance(&self, name: &str) -> pb::Instance {
        let (mut i, _) = self.clients();
        i.get_instance(pb::GetInstanceRequest {
            tenant_id: self.tenant.to_string(),
            instance_ref: name.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .instance
        .unwrap()
    }

    /// Requests a deployment of `kind` with a parameter patch; returns its id.
    pub async fn request(&self, instance: &str, kind: pb::DeploymentKind, patch: &str) -> String {
        let (_, mut d) = self.clients();
        d.create_deployment(pb::CreateDeploymentRequest {
            tenant_id: self.tenant.to_string(),
            instance_ref: instance.into(),
            kind: kind as i32,
            parameters_patch_json: patch.into(),
            ..Default::default()
        })
        .await
        .expect("create deployment")
        .into_inner()
        .deployment
        .unwrap()
        .deployment_id
    }

    pub async fn get(&self, id: &str) -> pb::Deployment {
        let (_, mut d) = self.clients();
        d.get_deployment(pb::GetDeploymentRequest {
            tenant_id: self.tenant.to_string(),
            deployment_id: id.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .deployment
        .unwrap()
    }

    /// Waits until the deployment is terminal or awaits approval.
    pub async fn settled(&self, id: &str) -> pb::Deployment {
        use pb::DeploymentStatus as S;
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let d = self.get(id).await;
            if !matches!(status(&d), S::Queued | S::Running) {
                return d;
            }
            assert!(
                Instant::now() < deadline,
                "deployment {id} did not settle: {d:#?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until `check` holds for the deployment.
    pub async fn until(
        &self,
        id: &str,
        what: &str,
        check: impl Fn(&pb::Deployment) -> bool,
    ) -> pb::Deployment {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let d = self.get(id).await;
            if check(&d) {
                return d;
            }
            assert!(Instant::now() < deadline, "deployment {id}: {what}: {d:#?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The domain events of this test's tenant of `aggregate.event_type`.
    pub async fn events(&self, aggregate: &str, event_type: &str) -> Vec<Event> {
        let ns = self.nats.namespace();
        let filter = ns
            .events_filter(
                Some(&self.tenant.to_string()),
                Some(aggregate),
                Some(event_type),
            )
            .unwrap();
        cairn_testkit::stored(&self.nats.jetstream, &ns.events_stream(), filter).await
    }

    /// A query of the deployments schema, as the superuser.
    pub async fn scalar(&self, sql: &str) -> i64 {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.db.admin_url)
            .await
            .unwrap();
        sqlx::query("SET search_path = deployments")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&mut conn)
            .await
            .unwrap()
    }

    /// A query of the coordinator's schema, as the superuser.
    pub async fn coord_scalar(&self, sql: &str) -> i64 {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.coord_db.admin_url)
            .await
            .unwrap();
        sqlx::query("SET search_path = state")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&mut conn)
            .await
            .unwrap()
    }

    /// Files under the target's base dir, relative, sorted.
    pub fn files(&self) -> Vec<String> {
        let mut out = Vec::new();
        let root = self.base_dir.path();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let path = e.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    out.push(path.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
        out.sort();
        out
    }
}

/// The step of `kind` for `resource`.
pub fn step<'a>(d: &'a pb::Deployment, kind: pb::StepKind, resource: &str) -> &'a pb::Step {
    d.steps
        .iter()
        .find(|s| s.kind == kind as i32 && s.resource == resource)
        .unwrap_or_else(|| panic!("no {kind:?} step of {resource:?}: {:#?}", d.steps))
}
