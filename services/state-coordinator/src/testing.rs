//! For tests of this and other crates (feature `testing`): the coordinator's settings on a
//! test's own database, NATS prefix, bucket, KMS key and signing keys, so that every harness
//! that starts a coordinator in-process starts the same one and tweaks only what it tests;
//! and the fixtures those tests share: create a state, register a run (kind, environment,
//! root config, a local target) and admit it, as the workflow does.
//!
//! Everything here panics on failure (with what failed): it is for tests.

use std::sync::Arc;
use std::time::Duration;

use cairn_db::TestDatabase;
use cairn_proto::state as pb;
use cairn_service::{DbArgs, JwksArgs, NatsArgs};
use cairn_storage::{KmsKeyManager, S3ObjectStore};
use cairn_testkit::{Authed, Bearer, TestAws, TestKeys, TestNats};
use tonic::transport::Channel;
use uuid::Uuid;

use crate::{Config, Edges, Server};

/// Loopback listeners on free ports, the test's S3 bucket and KMS key (AWS endpoints come
/// with the `Edges` the caller builds), a one-minute run lease, hour-long TTLs that never
/// fire during a test, and the production data-key cache.
pub fn test_config(db: &TestDatabase, nats: &TestNats, aws: &TestAws, keys: &TestKeys) -> Config {
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    Config {
        shared: Default::default(),
        db: DbArgs {
            database_url: db.runtime_url.clone(),
            database_migrate_url: Some(db.migrate_url.clone()),
            database_schema: None,
        },
        nats: NatsArgs {
            nats_url: nats.url.clone(),
            nats_prefix: Some(nats.prefix.clone()),
            nats_creds: None,
        },
        grpc_addr: loopback,
        http_addr: loopback,
        public_http_url: None,
        object_store: format!("s3://{}/{OBJECT_PREFIX}", aws.bucket),
        s3_endpoint: None,
        kms_key: aws.kms_key_id.clone(),
        kms_endpoint: None,
        jwks: JwksArgs {
            jwt_public_keys_file: keys.jwks_path().to_owned(),
        },
        run_lease: Duration::from_secs(60),
        max_state_bytes: 8 * 1024 * 1024,
        max_plan_bytes: 64 * 1024 * 1024,
        state_cache_bytes: crate::app::sealed_cache::DEFAULT_BUDGET,
        plan_ttl: Duration::from_secs(3600),
        pending_ttl: Duration::from_secs(3600),
        intermediate_retention: Duration::from_secs(3600),
        sweep_interval: Duration::from_secs(3600),
        event_relay_linger: Duration::from_millis(20),
        key_cache_size: 1024,
        key_cache_ttl: Duration::from_secs(300),
        after_restore: false,
    }
}

/// The prefix of the coordinator's objects in the test bucket.
pub const OBJECT_PREFIX: &str = "cairn-test";

/// The test bucket's object store (under [`OBJECT_PREFIX`]) and the test KMS key, reached
/// at `s3_endpoint` and `kms_endpoint`: moto's own (`aws.endpoint`), or a fault proxy's in
/// front of it.
pub fn aws_edges(aws: &TestAws, s3_endpoint: &str, kms_endpoint: &str) -> Edges {
    let s3 = cairn_testkit::sdk_config_for(s3_endpoint);
    let kms = cairn_testkit::sdk_config_for(kms_endpoint);
    Edges {
        objects: Some(Arc::new(S3ObjectStore::with_config(
            &s3,
            aws.bucket.clone(),
            OBJECT_PREFIX.to_owned(),
        ))),
        keys: Some(Arc::new(KmsKeyManager::with_config(
            &kms,
            aws.kms_key_id.clone(),
        ))),
    }
}

/// Starts a coordinator (panics when it refuses) and connects a gRPC channel to it.
pub async fn start(config: Config, edges: Edges) -> (Server, Channel) {
    let server = match Server::start_with(config, edges).await {
        Ok(s) => s,
        Err(e) => panic!("start the coordinator: {}", cairn_telemetry::Chain(&e)),
    };
    let channel = grpc_channel(&server).await;
    (server, channel)
}

/// A connected gRPC channel to `server`; panics (it is for tests) when it cannot connect.
pub async fn grpc_channel(server: &Server) -> Channel {
    cairn_testkit::connect_grpc(server.grpc_addr()).await
}

/// The root config the coordinator's own tests register: the HTTP backend, nothing else.
pub const HTTP_BACKEND_CONFIG: &[u8] = br#"{"terraform":{"backend":{"http":{}}}}"#;

/// What a test run is made of besides its state, kind and environment. The default is the
/// coordinator tests' run: [`HTTP_BACKEND_CONFIG`] on the target `local-dev` (base dir
/// `/tmp/cairn-demo`) with the credential `local`, without a saved plan.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub root_config: Vec<u8>,
    pub target_id: String,
    pub base_dir: String,
    pub credential_ref: String,
    /// For an apply: the plan run whose saved plan it applies.
    pub plan_run_id: Option<String>,
}

impl Default for RunSpec {
    fn default() -> Self {
        Self {
            root_config: HTTP_BACKEND_CONFIG.to_vec(),
            target_id: "local-dev".to_owned(),
            base_dir: "/tmp/cairn-demo".to_owned(),
            credential_ref: "local".to_owned(),
            plan_run_id: None,
        }
    }
}

/// A test's tenant and instance on a running coordinator, calling as a service (the
/// workflow, a runner) with `service_token`.
#[derive(Clone)]
pub struct Fixtures {
    grpc: Channel,
    bearer: Bearer,
    pub tenant: Uuid,
    pub instance: Uuid,
}

impl Fixtures {
    /// A fresh tenant and instance.
    pub fn new(grpc: Channel, service_token: impl Into<Arc<str>>) -> Self {
        Self {
            grpc,
            bearer: Bearer::new(service_token),
            tenant: Uuid::new_v4(),
            instance: Uuid::new_v4(),
        }
    }

    pub fn runs(&self) -> pb::runs_client::RunsClient<Authed> {
        pb::runs_client::RunsClient::with_interceptor(self.grpc.clone(), self.bearer.clone())
    }

    pub fn states(&self) -> pb::states_client::StatesClient<Authed> {
        pb::states_client::StatesClient::with_interceptor(self.grpc.clone(), self.bearer.clone())
    }

    /// Creates a state of this tenant and instance; returns its id.
    pub async fn create_state(&self, physical_name: &str) -> String {
        let created = self
            .states()
            .create_state(pb::CreateStateRequest {
                tenant_id: self.tenant.to_string(),
                instance_id: self.instance.to_string(),
                physical_name: physical_name.to_owned(),
            })
            .await;
        match created {
            Ok(r) => match r.into_inner().state {
                Some(state) => state.state_id,
                None => panic!("CreateState {physical_name}: no state in the answer"),
            },
            Err(e) => panic!("CreateState {physical_name}: {e}"),
        }
    }

    /// The state as GetState returns it.
    pub async fn state(&self, state_id: &str) -> pb::State {
        let got = self
            .states()
            .get_state(pb::GetStateRequest {
                state_id: state_id.to_owned(),
            })
            .await;
        match got {
            Ok(r) => match r.into_inner().state {
                Some(state) => state,
                None => panic!("GetState {state_id}: no state in the answer"),
            },
            Err(e) => panic!("GetState {state_id}: {e}"),
        }
    }

    /// A registration of a new run (a fresh id) of the default [`RunSpec`].
    pub fn registration(
        &self,
        state_id: &str,
        kind: pb::RunKind,
        environment: &str,
    ) -> pb::RegisterRunRequest {
        self.registration_of(state_id, kind, environment, &RunSpec::default())
    }

    /// A registration of a new run (a fresh id) of `spec`.
    pub fn registration_of(
        &self,
        state_id: &str,
        kind: pb::RunKind,
        environment: &str,
        spec: &RunSpec,
    ) -> pb::RegisterRunRequest {
        pb::RegisterRunRequest {
            run_id: Uuid::now_v7().to_string(),
            state_id: state_id.to_owned(),
            kind: kind as i32,
            environment: environment.to_owned(),
            config_hash: cairn_storage::sha256_hex(&spec.root_config),
            root_config: spec.root_config.clone(),
            context: Some(pb::ExecutionContext {
                tenant_id: self.tenant.to_string(),
                target_id: spec.target_id.clone(),
                target_settings: [("base_dir".to_owned(), spec.base_dir.clone())].into(),
                credential_ref: spec.credential_ref.clone(),
                sensitive_variable_refs: Default::default(),
            }),
            plan_run_id: spec.plan_run_id.clone().unwrap_or_default(),
        }
    }

    /// Sends a registration; returns the run id.
    pub async fn register_run(&self, req: pb::RegisterRunRequest) -> String {
        let run_id = req.run_id.clone();
        if let Err(e) = self.runs().register_run(req).await {
            panic!("RegisterRun {run_id}: {e}");
        }
        run_id
    }

    /// Registers a run of the default [`RunSpec`]; returns its id.
    pub async fn register(&self, state_id: &str, kind: pb::RunKind, environment: &str) -> String {
        self.register_run(self.registration(state_id, kind, environment))
            .await
    }

    /// Registers a run of `spec`; returns its id.
    pub async fn register_of(
        &self,
        state_id: &str,
        kind: pb::RunKind,
        environment: &str,
        spec: &RunSpec,
    ) -> String {
        self.register_run(self.registration_of(state_id, kind, environment, spec))
            .await
    }

    /// AdmitRun: the attempt's token, backend addresses and base generation, or the
    /// refusal (tests assert on it).
    pub async fn admit(&self, run_id: &str) -> Result<pb::AdmitRunResponse, tonic::Status> {
        self.runs()
            .admit_run(pb::AdmitRunRequest {
                run_id: run_id.to_owned(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// FinishRun of attempt `attempt` of `run_id`.
    pub async fn finish(
        &self,
        run_id: &str,
        attempt: u32,
        outcome: pb::RunOutcome,
        message: &str,
    ) -> pb::FinishRunResponse {
        let finished = self
            .runs()
            .finish_run(pb::FinishRunRequest {
                run_id: run_id.to_owned(),
                attempt,
                outcome: outcome as i32,
                message: message.to_owned(),
            })
            .await;
        match finished {
            Ok(r) => r.into_inner(),
            Err(e) => panic!("FinishRun {run_id} attempt {attempt}: {e}"),
        }
    }
}

/// `EXPLAIN (ANALYZE)` of the HTTP backend's hot statements
/// ([`crate::store::backend::hot_statements`]) as a GET and a POST of the run token `token`
/// run them, inside one transaction that is rolled back, so nothing changes. The token's
/// attempt must hold its state's lock: the commit is explained for a write of the next
/// generation, with its pending row made in the same transaction. Returns the plans, each
/// under its statement's name, and a last line that says whether any plan scans a table
/// sequentially.
pub async fn explain_hot_statements(pool: &sqlx::PgPool, token: &str) -> String {
    use std::fmt::Write;

    use crate::store::{backend, generations::NewGeneration, pending};

    let hash = crate::domain::token::hash_token(token);
    let mut tx = pool.begin().await.expect("begin");
    let checks = backend::write_checks_by_token(&mut tx, &hash)
        .await
        .expect("write checks")
        .expect("the token's attempt");
    assert_eq!(
        checks.lock_attempt_id,
        Some(checks.attempt.attempt_id),
        "the token's attempt holds its state's lock"
    );
    let (state, attempt) = (checks.state, checks.attempt);
    let next = state.current_generation + 1;
    let pending_id = Uuid::now_v7();
    let object_key = format!("explain/{pending_id}");
    pending::pending_insert(
        &mut tx,
        &pending::NewPending {
            pending_id,
            state_id: state.state_id,
            attempt_id: Some(attempt.attempt_id),
            target_generation: next,
            object_key: &object_key,
        },
    )
    .await
    .expect("pending row");
    let g = NewGeneration {
        state_id: state.state_id,
        generation: next,
        object_key: object_key.clone(),
        object_version: "v".to_owned(),
        ciphertext_sha256: "0".to_owned(),
        plaintext_sha256: "0".to_owned(),
        size: 1,
        key_id: "explain".to_owned(),
        wrapped_key: b"w".to_vec(),
        nonce: b"n".to_vec(),
        tofu_serial: 1,
        lineage: "explain".to_owned(),
        run_id: Some(attempt.run_id),
        attempt: Some(attempt.attempt),
        is_final: false,
        recovered_from: None,
    };

    let mut out = String::new();
    let mut sequential = Vec::new();
    for (name, sql) in backend::hot_statements() {
        let explain = sqlx::AssertSqlSafe(format!("EXPLAIN (ANALYZE, TIMING OFF) {sql}"));
        let q = match name {
            n if n.starts_with("GET") || n.contains("checks") => {
                sqlx::query_scalar::<_, String>(explain).bind(&hash)
            }
            n if n.contains("pending") => sqlx::query_scalar::<_, String>(explain)
                .bind(Uuid::now_v7())
                .bind(state.state_id)
                .bind(attempt.attempt_id)
                .bind(next)
                .bind(format!("explain/{}", Uuid::now_v7())),
            _ => {
                let event = (Uuid::now_v7(), b"explain".to_vec());
                let args =
                    backend::commit_run_write_args(attempt.attempt_id, pending_id, &g, event)
                        .expect("commit parameters");
                sqlx::query_scalar_with::<_, String, _>(explain, args)
            }
        };
        let plan = q.fetch_all(&mut *tx).await.expect("explain");
        writeln!(out, "-- {name}").ok();
        for line in plan {
            if line.contains("Seq Scan") {
                sequential.push(format!("{name}: {}", line.trim()));
            }
            writeln!(out, "{line}").ok();
        }
        writeln!(out).ok();
    }
    tx.rollback().await.expect("rollback");
    if sequential.is_empty() {
        writeln!(out, "index scans only: no plan scans a table sequentially").ok();
    } else {
        writeln!(out, "SEQUENTIAL SCANS: {}", sequential.join("; ")).ok();
    }
    out
}
