//! What the drift tests run against. The deployments service is not started: the rig
//! applies root configs itself (plan, then apply of the saved plan, through the runner's
//! queue) and publishes the events deployments would.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cairn_auth::Role;
use cairn_bus::{Aggregate, Namespace};
use cairn_proto::drift as dpb;
use cairn_proto::events::{self as epb, Event, event::Payload};
use cairn_proto::runner as rpb;
use cairn_proto::state as pb;
use cairn_runner::config::{ExecutorKind, ServeConfig};
use cairn_runner::serve::Runner;
use cairn_service::Service as _;
use cairn_service::{DbArgs, JwksArgs, NatsArgs};
use cairn_state_coordinator::testing::{Fixtures, RunSpec};
use cairn_testkit::{TestAws, TestKeys, TestNats};
use prost::Message;
use tonic::transport::Channel;
use uuid::Uuid;

pub const TARGET: &str = "local";
pub type DriftClient = dpb::drift_client::DriftClient<cairn_testkit::Authed>;

pub fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Drift settings of a test.
#[derive(Debug, Clone)]
pub struct Opts {
    pub interval: Duration,
    pub max_per_target: u32,
    pub tick: Duration,
    /// Drift reaches the coordinator through a fault proxy (`Rig::coordinator_proxy`).
    pub coordinator_proxy: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            // Scheduled scans off: the tests trigger them.
            interval: Duration::ZERO,
            max_per_target: 2,
            tick: Duration::from_millis(200),
            coordinator_proxy: false,
        }
    }
}

pub struct Rig {
    pub nats: TestNats,
    pub ns: Namespace,
    pub keys: TestKeys,
    pub fx: Fixtures,
    pub coord: cairn_state_coordinator::Server,
    pub base: tempfile::TempDir,
    pub files: tempfile::TempDir,
    pub work: tempfile::TempDir,
    pub spool: tempfile::TempDir,
    pub runner: Option<Runner>,
    pub drift: Vec<cairn_drift::Server>,
    pub drift_config: cairn_drift::Config,
    pub db: cairn_db::TestDatabase,
    pub instance: Uuid,
    /// Between drift and the coordinator when `Opts::coordinator_proxy` is set.
    pub coordinator_proxy: Option<cairn_testkit::FaultProxy>,
    _coord_db: cairn_db::TestDatabase,
    _aws: TestAws,
    /// Every runner instance this rig started: their containers and work volumes are
    /// removed when the rig is dropped.
    runner_instances: Vec<String>,
}

pub async fn rig(opts: Opts) -> Rig {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let nats = cairn_testkit::connect_nats().await;
    let ns = Namespace::with_prefix(&nats.prefix).unwrap();
    let coord_db = cairn_testkit::fresh_database().await;
    let aws = TestAws::create().await;
    let config = cairn_state_coordinator::Config {
        run_lease: Duration::from_secs(30),
        ..cairn_state_coordinator::testing::test_config(&coord_db, &nats, &aws, &keys)
    };
    let edges = cairn_state_coordinator::testing::aws_edges(&aws, &aws.endpoint, &aws.endpoint);
    let (coord, grpc) = cairn_state_coordinator::testing::start(config, edges).await;
    let fx = Fixtures::new(grpc, keys.service_token());
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("key"), "local-key\n").unwrap();
    std::fs::write(
        files.path().join("credentials.json"),
        serde_json::json!({"entries": [
            {"tenant_id": fx.tenant.to_string(), "target_id": TARGET, "reference": "deploy",
             "vars": {"LOCAL_API_KEY": {"file": files.path().join("key")}}}
        ]})
        .to_string(),
    )
    .unwrap();
    std::fs::write(files.path().join("runner.token"), keys.service_token()).unwrap();
    std::fs::write(
        files.path().join("drift.token"),
        keys.service_token_as("drift"),
    )
    .unwrap();
    let db = cairn_testkit::fresh_database().await;
    let coordinator_proxy = if opts.coordinator_proxy {
        Some(
            cairn_testkit::FaultProxy::start_for_url(&format!("http://{}", coord.grpc_addr()))
                .await
                .unwrap(),
        )
    } else {
        None
    };
    let drift_config = cairn_drift::Config {
        shared: Default::default(),
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        db: DbArgs {
            database_url: db.runtime_url.clone(),
            database_migrate_url: Some(db.migrate_url.clone()),
            database_schema: Some("drift".to_owned()),
        },
        nats: NatsArgs {
            nats_url: nats.url.clone(),
            nats_prefix: Some(nats.prefix.clone()),
            nats_creds: None,
        },
        jwks: JwksArgs {
            jwt_public_keys_file: keys.jwks_path().to_owned(),
        },
        peers: cairn_service::PeerArgs {
            tenancy_url: "http://127.0.0.1:9".to_owned(),
            coordinator_url: match &coordinator_proxy {
                Some(proxy) => proxy.url_for(&format!("http://{}", coord.grpc_addr())),
                None => format!("http://{}", coord.grpc_addr()),
            },
            service_token_file: files.path().join("drift.token"),
        },
        drift_check_interval: opts.interval,
        drift_max_per_target: opts.max_per_target,
        drift_tick: opts.tick,
        drift_batch: 200,
        drift_scan_timeout: Duration::from_secs(600),
        drift_replica: None,
        drift_ack_wait: Duration::from_secs(5),
    };
    let mut rig = Rig {
        instance: Uuid::new_v4(),
        nats,
        ns,
        keys,
        fx,
        coord,
        base: tempfile::tempdir().unwrap(),
        files,
        work: tempfile::tempdir_in("/dev/shm").unwrap(),
        spool: tempfile::tempdir().unwrap(),
        runner: None,
        drift: Vec::new(),
        drift_config,
        db,
        coordinator_proxy,
        _coord_db: coord_db,
        _aws: aws,
        runner_instances: Vec::new(),
    };
    rig.start_runner().await;
    rig.start_drift("drift-a").await;
    rig
}

impl Rig {
    /// A runner serving `local`: Docker executor, the tofu-sim image, host network.
    pub async fn start_runner(&mut self) {
        let image =
            std::env::var("CAIRN_TOFU_IMAGE").unwrap_or_else(|_| "cairn/tofu-sim:dev".into());
        let instance = format!("drift-test-{}", &Uuid::new_v4().simple().to_string()[..8]);
        self.runner_instances.push(instance.clone());
        let config = ServeConfig {
            shared: Default::default(),
            instance: Some(instance),
            nats: NatsArgs {
                nats_url: self.nats.url.clone(),
                nats_prefix: Some(self.nats.prefix.clone()),
                nats_creds: None,
            },
            coordinator_url: format!("http://{}", self.coord.grpc_addr()),
            tenancy_url: None,
            service_token_file: self.files.path().join("runner.token"),
            credentials_file: self.files.path().join("credentials.json"),
            secrets_endpoint: None,
            sts_endpoint: None,
            grpc_addr: "127.0.0.1:0".parse().unwrap(),
            jwks: JwksArgs {
                jwt_public_keys_file: self.keys.jwks_path().to_owned(),
            },
            executor: ExecutorKind::Docker,
            tofu_image: Some(image),
            tofu_backend_ca: None,
            tofu_bin: PathBuf::from("tofu"),
            tofu_timeout: Duration::from_secs(120),
            tofu_grace: Duration::from_secs(5),
            extra_env: String::new(),
            modules_dir: repo("modules"),
            work_root: self.work.path().to_path_buf(),
            spool_dir: self.spool.path().to_path_buf(),
            plugin_cache: Some("cairn-test-plugin-cache".to_owned()),
            tofu_memory_mib: 256,
            tofu_cpus: 1.0,
            tofu_pids: 256,
            docker_network: Some("host".to_owned()),
            concurrency: 2,
            ack_wait: Duration::from_secs(5),
            log_tail: 20,
        };
        self.runner = Some(Runner::start(config).await.expect("start runner"));
    }

    /// Ends a test: stops the runner the graceful way first, so that a tofu container it was
    /// creating is created, stopped and removed by its own run. Without it, a create already
    /// sent to Docker when the test returned completed after `Drop`'s clean-up had looked
    /// (the test's runtime drops the run's task unpolled; CI left such `Created` containers).
    /// What a test that panicked leaves goes in `Drop`.
    pub async fn finish(mut self) {
        self.stop_runner().await;
    }

    pub async fn stop_runner(&mut self) {
        if let Some(runner) = self.runner.take() {
            runner.shutdown().await;
        }
    }

    /// Another drift replica on the same database.
    pub async fn start_drift(&mut self, replica: &str) {
        let config = cairn_drift::Config {
            drift_replica: Some(replica.to_owned()),
            ..self.drift_config.clone()
        };
        self.drift.push(
            cairn_drift::Server::start(config)
                .await
                .expect("start drift"),
        );
    }

    pub async fn client(&self, role: Role) -> DriftClient {
        self.client_of(self.fx.tenant, role).await
    }

    pub async fn client_of(&self, tenant: Uuid, role: Role) -> DriftClient {
        let channel: Channel = cairn_testkit::connect_grpc(self.drift[0].grpc_addr()).await;
        let token = self.keys.user_token(tenant, role);
        DriftClient::new(tonic::service::interceptor::InterceptedService::new(
            channel,
            cairn_testkit::Bearer(token.into()),
        ))
    }

    /// The root config of one network module named `name`, files under the base dir.
    pub fn root_config(&self, name: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "terraform": {"backend": {"http": {}}},
            "module": {name: {
                "source": "./modules/local/network",
                "name": name,
                "base_dir": self.base.path().display().to_string(),
            }},
        }))
        .unwrap()
    }

    async fn run(
        &self,
        state_id: &str,
        kind: pb::RunKind,
        root: &[u8],
        plan: Option<&str>,
    ) -> (String, rpb::RunResult) {
        let spec = RunSpec {
            root_config: root.to_vec(),
            target_id: TARGET.to_owned(),
            base_dir: self.base.path().display().to_string(),
            credential_ref: "deploy".to_owned(),
            plan_run_id: plan.map(str::to_owned),
        };
        let run_id = self.fx.register_of(state_id, kind, "staging", &spec).await;
        let request = rpb::RunRequest {
            run_id: run_id.clone(),
            target_id: TARGET.to_owned(),
        };
        self.nats
            .jetstream
            .publish(
                self.ns.runq(TARGET).unwrap(),
                request.encode_to_vec().into(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        let result = self.result(&run_id).await;
        (run_id, result)
    }

    /// Registers a plan of `name` on `state_id` at the coordinator, as a deployment's first
    /// step does, without requesting it; returns the run.
    pub async fn register_write(&self, name: &str, state_id: &str) -> String {
        let spec = RunSpec {
            root_config: self.root_config(name),
            target_id: TARGET.to_owned(),
            base_dir: self.base.path().display().to_string(),
            credential_ref: "deploy".to_owned(),
            plan_run_id: None,
        };
        self.fx
            .register_of(state_id, pb::RunKind::Plan, "staging", &spec)
            .await
    }

    /// Waits until `sql` (a count) returns `n`.
    pub async fn until_count(&self, what: &str, sql: &str, n: i64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let got = self.scalar(sql).await;
            if got == n {
                return;
            }
            if Instant::now() > deadline {
                let scans = self
                    .rows("SELECT status, coalesce(message, '') FROM scans")
                    .await;
                panic!("{what}: {sql} is {got}, not {n}; scans {scans:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Plans and applies `name` on its own state, as a deployment's steps do; returns the
    /// state and the apply run.
    pub async fn apply(&self, name: &str, state_id: Option<&str>) -> (String, String) {
        let state_id = match state_id {
            Some(s) => s.to_owned(),
            None => self.fx.create_state(name).await,
        };
        let root = self.root_config(name);
        let (plan_id, planned) = self.run(&state_id, pb::RunKind::Plan, &root, None).await;
        assert_eq!(
            planned.outcome,
            pb::RunOutcome::Succeeded as i32,
            "{planned:#?}"
        );
        let (apply_id, applied) = self
            .run(&state_id, pb::RunKind::Apply, &root, Some(&plan_id))
            .await;
        assert_eq!(
            applied.outcome,
            pb::RunOutcome::Succeeded as i32,
            "{applied:#?}"
        );
        (state_id, apply_id)
    }

    /// Publishes an event of this test's tenant, as the deployments service's relay does.
    pub async fn publish(&self, aggregate: Aggregate, event_type: &str, payload: Payload) {
        let event = cairn_bus::new_event(
            cairn_bus::ServiceRole::Deployments,
            self.fx.tenant,
            aggregate,
            self.instance,
            event_type,
            "svc:deployments",
            payload,
        )
        .unwrap();
        cairn_bus::publish_event(&self.nats.jetstream, &self.ns, &event)
            .await
            .unwrap();
    }

    /// `resource.applied` of `resource` (its state and applied run).
    pub async fn applied(&self, resource: &str, state_id: &str, run_id: &str) {
        let payload = Payload::Resource(epb::ResourceChange {
            instance_id: self.instance.to_string(),
            resource: resource.to_owned(),
            state_id: state_id.to_owned(),
            run_id: run_id.to_owned(),
            target_id: TARGET.to_owned(),
            environment: "staging".to_owned(),
            deployment_id: Uuid::now_v7().to_string(),
        });
        self.publish(Aggregate::Resource, "applied", payload).await;
    }

    /// A deployment event (`requested`, or a terminal status).
    pub async fn deployment(&self, deployment_id: Uuid, event_type: &str, status: &str) {
        let payload = Payload::Deployment(epb::DeploymentChange {
            deployment_id: deployment_id.to_string(),
            instance_id: self.instance.to_string(),
            instance_name: "shop".to_owned(),
            kind: "deploy".to_owned(),
            status: status.to_owned(),
            target_id: TARGET.to_owned(),
            environment: "staging".to_owned(),
            ..Default::default()
        });
        self.publish(Aggregate::Deployment, event_type, payload)
            .await;
    }

    /// The first result of `run_id`.
    pub async fn result(&self, run_id: &str) -> rpb::RunResult {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(r) = cairn_testkit::stored::<rpb::RunResult>(
                &self.nats.jetstream,
                &self.ns.runres_stream(),
                self.ns.runres(run_id).unwrap(),
            )
            .await
            .into_iter()
            .next()
            {
                return r;
            }
            assert!(Instant::now() < deadline, "no result for run {run_id}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The tenant's `instance.<event_type>` events.
    pub async fn events(&self, event_type: &str) -> Vec<Event> {
        let filter = self
            .ns
            .events_filter(
                Some(&self.fx.tenant.to_string()),
                Some("instance"),
                Some(event_type),
            )
            .unwrap();
        cairn_testkit::stored(&self.nats.jetstream, &self.ns.events_stream(), filter).await
    }

    /// Waits until exactly `n` such events were published (and stay `n` a moment later is
    /// not waited for: callers check again after the next condition they wait for).
    pub async fn until_events(&self, event_type: &str, n: usize) -> Vec<Event> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let events = self.events(event_type).await;
            if events.len() >= n {
                assert_eq!(events.len(), n, "{events:#?}");
                return events;
            }
            assert!(
                Instant::now() < deadline,
                "{n} {event_type} events expected, saw {}",
                events.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn status(&self) -> dpb::GetDriftStatusResponse {
        self.client(Role::Viewer)
            .await
            .get_drift_status(dpb::GetDriftStatusRequest {
                tenant_id: self.fx.tenant.to_string(),
                instance_id: self.instance.to_string(),
            })
            .await
            .unwrap()
            .into_inner()
    }

    /// Waits until the instance's drift status satisfies `check`.
    pub async fn until(
        &self,
        what: &str,
        check: impl Fn(&dpb::GetDriftStatusResponse) -> bool,
    ) -> dpb::GetDriftStatusResponse {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let got = self
                .client(Role::Viewer)
                .await
                .get_drift_status(dpb::GetDriftStatusRequest {
                    tenant_id: self.fx.tenant.to_string(),
                    instance_id: self.instance.to_string(),
                })
                .await;
            if let Ok(s) = got {
                let s = s.into_inner();
                if check(&s) {
                    return s;
                }
                assert!(Instant::now() < deadline, "{what}: {s:#?}");
            } else {
                assert!(Instant::now() < deadline, "{what}: {got:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn trigger(&self) -> u32 {
        self.client(Role::Operator)
            .await
            .trigger_scan(dpb::TriggerScanRequest {
                tenant_id: self.fx.tenant.to_string(),
                instance_id: self.instance.to_string(),
                resource: String::new(),
            })
            .await
            .unwrap()
            .into_inner()
            .queued
    }

    /// A query of the drift schema, as the superuser.
    pub async fn scalar(&self, sql: &str) -> i64 {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.db.admin_url)
            .await
            .unwrap();
        sqlx::query("SET search_path = drift")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&mut conn)
            .await
            .unwrap()
    }

    pub async fn rows(&self, sql: &str) -> Vec<(String, String)> {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.db.admin_url)
            .await
            .unwrap();
        sqlx::query("SET search_path = drift")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_all(&mut conn)
            .await
            .unwrap()
    }
}

pub fn resource<'a>(
    s: &'a dpb::GetDriftStatusResponse,
    name: &str,
) -> Option<&'a dpb::ResourceDrift> {
    s.resources.iter().find(|r| r.resource == name)
}

pub fn status_of(r: &dpb::ResourceDrift) -> dpb::DriftStatus {
    dpb::DriftStatus::try_from(r.status).unwrap()
}

/// A timestamp as nanoseconds since the epoch (0 when unset), for comparisons.
pub fn at(t: &Option<prost_types::Timestamp>) -> i128 {
    t.map_or(0, |t| {
        i128::from(t.seconds) * 1_000_000_000 + i128::from(t.nanos)
    })
}

/// A test that ends while a scan or a target validation runs leaves that run's container and
/// work volume behind (its runner's tasks end with the test's runtime), and the runner's
/// start-up reaper never sees them: no later coordinator knows the test's runs. They are
/// removed here by the label the runner puts on both, as its own `reap_orphans` finds them
/// (best effort; blocking, since `Drop` cannot await, once at the end of a test).
impl Drop for Rig {
    fn drop(&mut self) {
        use cairn_runner::executor::LABEL_RUNNER_INSTANCE;
        for instance in &self.runner_instances {
            let filter = format!("label={LABEL_RUNNER_INSTANCE}={instance}");
            remove_listed(&["ps", "-aq", "--filter", &filter], &["rm", "-f", "-v"]);
            remove_listed(
                &["volume", "ls", "-q", "--filter", &filter],
                &["volume", "rm", "-f"],
            );
        }
    }
}

/// Runs the `docker` listing `list` and, when it printed any ids, `remove` with them.
#[allow(clippy::disallowed_methods)]
fn remove_listed(list: &[&str], remove: &[&str]) {
    let Ok(out) = std::process::Command::new("docker").args(list).output() else {
        return;
    };
    let listed = String::from_utf8_lossy(&out.stdout);
    let ids: Vec<&str> = listed.split_whitespace().collect();
    if !ids.is_empty() {
        let _ = std::process::Command::new("docker")
            .args(remove)
            .args(ids)
            .output();
    }
}
