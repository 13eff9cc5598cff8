//! A runner service under test: a real coordinator (in-process), NATS under a test prefix,
//! the Docker executor with the tofu-sim image, and the files `cairn-runner serve` reads
//! (credential registry, service token, JWKS).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use cairn_bus::Namespace;
use cairn_proto::runner as rpb;
use cairn_proto::state as pb;
use cairn_runner::config::{ExecutorKind, ServeConfig};
use cairn_runner::serve::Runner;
use cairn_service::Service as _;
use cairn_service::{JwksArgs, NatsArgs};
use prost::Message;

use crate::common::{self, Coordinator};
use crate::helpers;

/// A credential value that must never leave the runner except into the tofu container.
pub const CANARY_CREDENTIAL: &str = "canary-credential-serve-7391";
/// The target every test run goes to.
pub const TARGET: &str = "local";

pub struct Rig {
    pub coord: Coordinator,
    pub nats: async_nats::Client,
    pub js: jetstream::Context,
    pub ns: Namespace,
    pub files: tempfile::TempDir,
    pub base: tempfile::TempDir,
    pub work: tempfile::TempDir,
    /// The runners' spool directory (on disk, outside the work root).
    pub spool: tempfile::TempDir,
    pub state_id: String,
}

pub async fn rig(lease: Duration) -> Rig {
    let coord = common::spawn_coordinator_with_lease(lease).await;
    let nats = async_nats::connect(&coord.nats.url).await.unwrap();
    let js = jetstream::new(nats.clone());
    let ns = Namespace::with_prefix(&coord.nats.prefix).unwrap();
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("key"), format!("{CANARY_CREDENTIAL}\n")).unwrap();
    std::fs::write(
        files.path().join("credentials.json"),
        serde_json::json!({"entries": [
            {"tenant_id": coord.tenant.to_string(), "target_id": TARGET, "reference": "deploy",
             "vars": {"LOCAL_API_KEY": {"file": files.path().join("key")}}}
        ]})
        .to_string(),
    )
    .unwrap();
    std::fs::write(files.path().join("token"), coord.keys.service_token()).unwrap();
    let state_id = coord.create_state("net").await;
    Rig {
        coord,
        nats,
        js,
        ns,
        files,
        base: tempfile::tempdir().unwrap(),
        work: helpers::scratch(),
        spool: tempfile::tempdir().unwrap(),
        state_id,
    }
}

impl Rig {
    pub fn base_dir(&self) -> String {
        self.base.path().to_string_lossy().into_owned()
    }

    /// `cairn-runner serve` settings: Docker executor, tofu-sim image, host network.
    pub fn config(&self, instance: &str, extra_env: &str) -> ServeConfig {
        ServeConfig {
            shared: Default::default(),
            instance: Some(instance.to_owned()),
            nats: NatsArgs {
                nats_url: self.coord.nats.url.clone(),
                nats_prefix: Some(self.coord.nats.prefix.clone()),
                nats_creds: None,
            },
            coordinator_url: format!("http://{}", self.coord.server.grpc_addr()),
            tenancy_url: None,
            service_token_file: self.files.path().join("token"),
            credentials_file: self.files.path().join("credentials.json"),
            secrets_endpoint: None,
            sts_endpoint: None,
            grpc_addr: "127.0.0.1:0".parse().unwrap(),
            jwks: JwksArgs {
                jwt_public_keys_file: self.coord.keys.jwks_path().to_owned(),
            },
            executor: ExecutorKind::Docker,
            tofu_image: Some(helpers::image()),
            tofu_backend_ca: None,
            tofu_bin: PathBuf::from("tofu"),
            tofu_timeout: Duration::from_secs(120),
            tofu_grace: Duration::from_secs(5),
            extra_env: extra_env.to_owned(),
            modules_dir: helpers::module_library(),
            work_root: self.work.path().to_path_buf(),
            spool_dir: self.spool.path().to_path_buf(),
            plugin_cache: Some("cairn-test-plugin-cache".to_owned()),
            tofu_memory_mib: 256,
            tofu_cpus: 1.0,
            tofu_pids: 256,
            docker_network: Some("host".to_owned()),
            concurrency: 2,
            ack_wait: Duration::from_secs(3),
            log_tail: 50,
        }
    }

    /// The same settings as environment variables, for the `cairn-runner` process.
    pub fn env(&self, instance: &str, extra_env: &str) -> Vec<(String, String)> {
        let c = self.config(instance, extra_env);
        let p = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            ("CAIRN_RUNNER_INSTANCE".into(), instance.to_owned()),
            ("CAIRN_NATS_URL".into(), c.nats.nats_url),
            (
                "CAIRN_NATS_PREFIX".into(),
                c.nats.nats_prefix.unwrap_or_default(),
            ),
            ("CAIRN_COORDINATOR_URL".into(), c.coordinator_url),
            ("CAIRN_SERVICE_TOKEN_FILE".into(), p(&c.service_token_file)),
            ("CAIRN_CREDENTIALS_FILE".into(), p(&c.credentials_file)),
            ("CAIRN_GRPC_ADDR".into(), "127.0.0.1:0".into()),
            (
                "CAIRN_JWT_PUBLIC_KEYS_FILE".into(),
                p(&c.jwks.jwt_public_keys_file),
            ),
            ("CAIRN_EXECUTOR".into(), "docker".into()),
            ("CAIRN_TOFU_IMAGE".into(), c.tofu_image.unwrap_or_default()),
            ("CAIRN_TOFU_TIMEOUT".into(), "2m".into()),
            ("CAIRN_TOFU_GRACE".into(), "5s".into()),
            ("CAIRN_EXECUTOR_EXTRA_ENV".into(), c.extra_env),
            ("CAIRN_MODULES_DIR".into(), p(&c.modules_dir)),
            ("CAIRN_WORK_ROOT".into(), p(&c.work_root)),
            ("CAIRN_RUNNER_SPOOL_DIR".into(), p(&c.spool_dir)),
            (
                "CAIRN_PLUGIN_CACHE".into(),
                "cairn-test-plugin-cache".into(),
            ),
            ("CAIRN_DOCKER_NETWORK".into(), "host".into()),
            ("CAIRN_RUNNER_ACK_WAIT".into(), "3s".into()),
        ]
    }

    /// A root config writing one network file under the base dir, state in the coordinator;
    /// `resources` > 1 adds more networks (each takes TOFU_SIM_RESOURCE_DELAY to apply).
    pub fn root_config(&self, resources: usize) -> Vec<u8> {
        let base_dir = self.base_dir();
        let mut modules = serde_json::Map::new();
        for i in 1..=resources {
            modules.insert(
                format!("net{i}"),
                serde_json::json!({
                    "source": "./modules/local/network",
                    "name": format!("net{i}"),
                    "base_dir": base_dir,
                }),
            );
        }
        serde_json::to_vec(&serde_json::json!({
            "terraform": {"backend": {"http": {}}},
            "module": modules,
            "output": {"config_path": {"value": "${module.net1.config_path}"}}
        }))
        .unwrap()
    }

    /// Registers a run on the rig's state.
    pub async fn register(
        &self,
        kind: pb::RunKind,
        environment: &str,
        resources: usize,
        plan_run_id: Option<&str>,
    ) -> String {
        self.register_root(kind, environment, self.root_config(resources), plan_run_id)
            .await
    }

    /// Registers a run of `root_config` on the rig's state.
    pub async fn register_root(
        &self,
        kind: pb::RunKind,
        environment: &str,
        root_config: Vec<u8>,
        plan_run_id: Option<&str>,
    ) -> String {
        self.coord
            .register(
                &self.state_id,
                kind,
                environment,
                root_config,
                &self.base_dir(),
                plan_run_id,
            )
            .await
    }

    /// Registers a run of `root_config`, requests it and waits for its first result.
    pub async fn run_root(
        &self,
        kind: pb::RunKind,
        environment: &str,
        root_config: Vec<u8>,
        plan_run_id: Option<&str>,
    ) -> (String, rpb::RunResult) {
        let run_id = self
            .register_root(kind, environment, root_config, plan_run_id)
            .await;
        self.request(&run_id).await;
        let result = self.result(&run_id, Duration::from_secs(120)).await;
        (run_id, result)
    }

    /// A runner (in-process) under a fresh instance id `<prefix>-…`.
    pub async fn start_runner(&self, prefix: &str, extra_env: &str) -> Runner {
        let instance = helpers::instance(prefix).to_string();
        Runner::start(self.config(&instance, extra_env))
            .await
            .unwrap()
    }

    /// Registers a run, requests it and waits for its first result.
    pub async fn run(
        &self,
        kind: pb::RunKind,
        environment: &str,
        resources: usize,
        plan_run_id: Option<&str>,
    ) -> (String, rpb::RunResult) {
        let run_id = self
            .register(kind, environment, resources, plan_run_id)
            .await;
        self.request(&run_id).await;
        let result = self.result(&run_id, Duration::from_secs(120)).await;
        (run_id, result)
    }

    /// Publishes a run request on `cairn.runq.local`.
    pub async fn request(&self, run_id: &str) {
        let msg = rpb::RunRequest {
            run_id: run_id.to_owned(),
            target_id: TARGET.to_owned(),
        };
        self.js
            .publish(self.ns.runq(TARGET).unwrap(), msg.encode_to_vec().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }

    /// The results stored for `run_id`.
    pub async fn results(&self, run_id: &str) -> Vec<rpb::RunResult> {
        cairn_testkit::stored(
            &self.js,
            &self.ns.runres_stream(),
            self.ns.runres(run_id).unwrap(),
        )
        .await
    }

    /// The log lines stored for `run_id`.
    pub async fn log_lines(&self, run_id: &str) -> Vec<rpb::RunLogLine> {
        cairn_testkit::stored(
            &self.js,
            &self.ns.runlog_stream(),
            self.ns.runlog(run_id).unwrap(),
        )
        .await
    }

    /// Waits for the first result of `run_id`.
    pub async fn result(&self, run_id: &str, within: Duration) -> rpb::RunResult {
        let deadline = Instant::now() + within;
        loop {
            if let Some(r) = self.results(run_id).await.into_iter().next() {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "no result for run {run_id} within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until a log line of `run_id` contains `needle`.
    pub async fn wait_for_log(&self, run_id: &str, needle: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if self
                .log_lines(run_id)
                .await
                .iter()
                .any(|l| l.text.contains(needle))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no log line of run {run_id} contains {needle:?} within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Generations of the rig's state: (number, final) in order.
    pub async fn generations(&self) -> Vec<(u64, bool)> {
        let admin = self
            .coord
            .keys
            .sign(&platform_admin_claims(self.coord.tenant));
        let mut recovery = pb::recovery_client::RecoveryClient::with_interceptor(
            self.coord.grpc.clone(),
            common::Bearer(admin.into()),
        );
        let r = recovery
            .inspect_state(pb::InspectStateRequest {
                state_id: self.state_id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        r.generations
            .iter()
            .map(|g| (g.generation, g.r#final))
            .collect()
    }
}

impl Rig {
    /// Generations of the rig's state with who wrote them, in order.
    pub async fn generation_infos(&self) -> Vec<pb::GenerationInfo> {
        let admin = self
            .coord
            .keys
            .sign(&platform_admin_claims(self.coord.tenant));
        let mut recovery = pb::recovery_client::RecoveryClient::with_interceptor(
            self.coord.grpc.clone(),
            common::Bearer(admin.into()),
        );
        recovery
            .inspect_state(pb::InspectStateRequest {
                state_id: self.state_id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .generations
    }

    fn state_uuid(&self) -> uuid::Uuid {
        self.state_id.parse().unwrap()
    }

    /// The current state document, read at the coordinator (none before the first write).
    pub async fn current_state(&self) -> Option<serde_json::Value> {
        use cairn_state_coordinator::store::{generations, states};
        let app = self.coord.server.app();
        let mut conn = app.pool.acquire().await.unwrap();
        let state = states::state_get(&mut conn, self.state_uuid())
            .await
            .unwrap()
            .unwrap();
        if state.current_generation == 0 {
            return None;
        }
        let g = generations::generation_get(&mut conn, state.state_id, state.current_generation)
            .await
            .unwrap()
            .unwrap();
        drop(conn);
        let bytes = app.read_generation(&state, &g).await.unwrap();
        Some(serde_json::from_slice(&bytes).unwrap())
    }

    /// The files the current state says it manages (`local_file`): path → content.
    pub async fn files_in_state(&self) -> std::collections::BTreeMap<String, String> {
        let mut out = std::collections::BTreeMap::new();
        let Some(state) = self.current_state().await else {
            return out;
        };
        for r in state["resources"].as_array().unwrap() {
            if r["type"] != "local_file" {
                continue;
            }
            for i in r["instances"].as_array().unwrap() {
                let a = &i["attributes"];
                out.insert(
                    a["filename"].as_str().unwrap().to_owned(),
                    a["content"].as_str().unwrap().to_owned(),
                );
            }
        }
        out
    }

    /// The network files under the base dir: path → content.
    pub fn files_on_disk(&self) -> std::collections::BTreeMap<String, String> {
        helpers::files_under(self.base.path())
            .into_iter()
            .map(|(path, bytes)| {
                (
                    path.to_string_lossy().into_owned(),
                    String::from_utf8(bytes).unwrap(),
                )
            })
            .collect()
    }

    /// Fences the rig's state at its current generation (as a damaged write would).
    pub async fn fence(&self) {
        use cairn_state_coordinator::store::states;
        let generation = self.coord.state(&self.state_id).await.current_generation;
        let mut conn = self.coord.server.app().pool.acquire().await.unwrap();
        let fenced = states::state_fence(
            &mut conn,
            self.state_uuid(),
            i64::try_from(generation).unwrap(),
            "damage planted by the test",
        )
        .await
        .unwrap();
        assert!(fenced);
    }

    /// Whether the rig's state is locked, by the coordinator's lock table.
    pub async fn locked(&self) -> bool {
        use cairn_state_coordinator::store::locks;
        let mut conn = self.coord.server.app().pool.acquire().await.unwrap();
        locks::lock_get(&mut conn, self.state_uuid())
            .await
            .unwrap()
            .is_some()
    }

    /// Quarantine entries of `run_id` at the coordinator: (attempt, plaintext sha256), and
    /// the quarantine objects of the rig's state in the bucket.
    pub async fn quarantined(&self, run_id: &str) -> (Vec<(i32, String)>, usize) {
        let mut conn = self.coord.server.app().pool.acquire().await.unwrap();
        let rows: Vec<(i32, String)> = sqlx::query_as(
            "SELECT attempt, plaintext_sha256 FROM quarantine WHERE run_id = $1 ORDER BY attempt",
        )
        .bind(run_id.parse::<uuid::Uuid>().unwrap())
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        let prefix = format!(
            "{}/quarantine/{}/",
            cairn_state_coordinator::testing::OBJECT_PREFIX,
            self.state_id
        );
        let listed = self
            .coord
            .aws
            .s3
            .list_objects_v2()
            .bucket(&self.coord.aws.bucket)
            .prefix(prefix)
            .send()
            .await
            .unwrap();
        (rows, listed.contents().len())
    }

    /// The files kept in the spool directory. The temporary file a `put` writes before
    /// renaming it into place (`.<name>.tmp`) is not one yet: a test that saw it would
    /// compare against a name that is about to change.
    pub fn spooled(&self) -> Vec<std::path::PathBuf> {
        let mut kept: Vec<_> = std::fs::read_dir(self.spool.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| !n.starts_with('.'))
            })
            .collect();
        kept.sort();
        kept
    }

    /// Waits until `check` holds, polling every 100 ms.
    pub async fn wait_until<F, Fut>(&self, what: &str, within: Duration, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let deadline = Instant::now() + within;
        while !check().await {
            assert!(Instant::now() < deadline, "not within {within:?}: {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The run as the coordinator sees it.
    pub async fn get_run(&self, run_id: &str) -> pb::GetRunResponse {
        self.coord
            .runs()
            .get_run(pb::GetRunRequest {
                run_id: run_id.to_owned(),
            })
            .await
            .unwrap()
            .into_inner()
    }

    /// How many run requests wait in the run queue (unacknowledged ones included).
    pub async fn queued(&self) -> u64 {
        let mut stream = self.js.get_stream(self.ns.runq_stream()).await.unwrap();
        stream.info().await.unwrap().state.messages
    }
}

/// The `cairn.attempt` labels of the containers (running or not) of `run_id`.
pub async fn container_attempts(run_id: &str) -> Vec<String> {
    let docker = bollard::Docker::connect_with_defaults().unwrap();
    list_containers_of(&docker, run_id)
        .await
        .into_iter()
        .map(|c| {
            c.labels
                .unwrap_or_default()
                .get("cairn.attempt")
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

/// Claims of a platform admin (admin role, `platform:admin` scope).
pub fn platform_admin_claims(tenant: uuid::Uuid) -> cairn_auth::Claims {
    let mut claims = cairn_auth::Claims::new_user(
        "ops@example.com",
        tenant,
        cairn_auth::Role::Admin,
        Duration::from_secs(600),
    );
    claims.scopes = vec![cairn_auth::PLATFORM_ADMIN_SCOPE.to_owned()];
    claims
}

/// Containers (running or not) labelled with `run_id`.
async fn list_containers_of(
    docker: &bollard::Docker,
    run_id: &str,
) -> Vec<bollard::models::ContainerSummary> {
    let filters =
        std::collections::HashMap::from([("label", vec![format!("cairn.run_id={run_id}")])]);
    docker
        .list_containers(Some(
            bollard::query_parameters::ListContainersOptionsBuilder::new()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .unwrap()
}

/// How many containers (running or not) are labelled with `run_id`.
pub async fn containers_of(run_id: &str) -> usize {
    let docker = bollard::Docker::connect_with_defaults().unwrap();
    list_containers_of(&docker, run_id).await.len()
}

/// Removes the containers labelled with `run_id`.
pub async fn remove_containers_of(run_id: &str) {
    let docker = bollard::Docker::connect_with_defaults().unwrap();
    for c in list_containers_of(&docker, run_id).await {
        let force = bollard::query_parameters::RemoveContainerOptionsBuilder::new()
            .force(true)
            .build();
        docker
            .remove_container(&c.id.unwrap(), Some(force))
            .await
            .unwrap();
    }
}
