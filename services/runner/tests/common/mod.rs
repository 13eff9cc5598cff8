//! A real state coordinator for runner tests: started in-process on port 0 against a fresh
//! database, its own NATS prefix and its own bucket and KMS key in moto, with typed clients
//! and the runner's own client on top.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use cairn_proto::state as pb;
use cairn_runner::coordinator::CoordinatorClient;
use cairn_runner::executor::Secret;
use cairn_runner::pipeline::{AdmittedRun, RunConfig, SavedPlan};
use cairn_state_coordinator::testing::{grpc_channel, test_config};
use cairn_state_coordinator::{Config, Edges, Server};
use cairn_storage::{KmsKeyManager, S3ObjectStore};
pub use cairn_testkit::{Authed, Bearer};
use cairn_testkit::{TestAws, TestKeys, TestNats};
use tonic::transport::Channel;
use uuid::Uuid;

pub use pb::runs_client::RunsClient;
pub use pb::states_client::StatesClient;

pub struct Coordinator {
    pub server: Server,
    pub grpc: Channel,
    pub keys: TestKeys,
    pub db: cairn_db::TestDatabase,
    pub aws: TestAws,
    pub nats: TestNats,
    pub tenant: Uuid,
    pub instance: Uuid,
}

pub async fn spawn_coordinator() -> Coordinator {
    spawn_coordinator_with_lease(Duration::from_secs(60)).await
}

/// A coordinator whose run leases last `lease`.
pub async fn spawn_coordinator_with_lease(lease: Duration) -> Coordinator {
    cairn_testkit::init_tracing();
    let db = cairn_testkit::fresh_database().await;
    let aws = TestAws::create().await;
    let nats = cairn_testkit::connect_nats().await;
    let keys = TestKeys::new();
    let sdk = cairn_testkit::sdk_config_for(&aws.endpoint);
    let objects = Arc::new(S3ObjectStore::with_config(
        &sdk,
        aws.bucket.clone(),
        "cairn-test".to_owned(),
    ));
    let kms = Arc::new(KmsKeyManager::with_config(&sdk, aws.kms_key_id.clone()));
    let config = Config {
        run_lease: lease,
        ..test_config(&db, &nats, &aws, &keys)
    };
    let server = Server::start_with(
        config,
        Edges {
            objects: Some(objects),
            keys: Some(kms),
        },
    )
    .await
    .expect("start coordinator");
    let grpc = grpc_channel(&server).await;
    Coordinator {
        server,
        grpc,
        keys,
        db,
        aws,
        nats,
        tenant: Uuid::new_v4(),
        instance: Uuid::new_v4(),
    }
}

impl Coordinator {
    fn bearer(&self) -> Bearer {
        Bearer(Arc::from(self.keys.service_token()))
    }

    pub fn runs(&self) -> RunsClient<Authed> {
        RunsClient::with_interceptor(self.grpc.clone(), self.bearer())
    }

    pub fn states(&self) -> StatesClient<Authed> {
        StatesClient::with_interceptor(self.grpc.clone(), self.bearer())
    }

    pub async fn create_state(&self, physical_name: &str) -> String {
        self.states()
            .create_state(pb::CreateStateRequest {
                tenant_id: self.tenant.to_string(),
                instance_id: self.instance.to_string(),
                physical_name: physical_name.to_owned(),
            })
            .await
            .expect("create state")
            .into_inner()
            .state
            .expect("state")
            .state_id
    }

    pub async fn state(&self, state_id: &str) -> pb::State {
        self.states()
            .get_state(pb::GetStateRequest {
                state_id: state_id.to_owned(),
            })
            .await
            .expect("get state")
            .into_inner()
            .state
            .expect("state")
    }

    /// Registers a run of `root_config` on a local target with `base_dir`; returns its id.
    pub async fn register(
        &self,
        state_id: &str,
        kind: pb::RunKind,
        environment: &str,
        root_config: Vec<u8>,
        base_dir: &str,
        plan_run_id: Option<&str>,
    ) -> String {
        let run_id = Uuid::now_v7().to_string();
        self.runs()
            .register_run(pb::RegisterRunRequest {
                run_id: run_id.clone(),
                state_id: state_id.to_owned(),
                kind: kind as i32,
                environment: environment.to_owned(),
                config_hash: cairn_storage::sha256_hex(&root_config),
                root_config,
                context: Some(pb::ExecutionContext {
                    tenant_id: self.tenant.to_string(),
                    target_id: "local".to_owned(),
                    target_settings: [("base_dir".to_owned(), base_dir.to_owned())].into(),
                    credential_ref: "deploy".to_owned(),
                    sensitive_variable_refs: Default::default(),
                }),
                plan_run_id: plan_run_id.unwrap_or_default().to_owned(),
            })
            .await
            .expect("register run");
        run_id
    }

    /// AdmitRun then GetRunConfig through the runner's client.
    pub async fn admit(&self, run_id: &str) -> (AdmittedRun, RunConfig) {
        let a = self.client().admit(run_id).await.expect("admit run");
        (a.run, a.config)
    }

    pub async fn finish(
        &self,
        run: &AdmittedRun,
        outcome: pb::RunOutcome,
        message: &str,
    ) -> pb::FinishRunResponse {
        self.runs()
            .finish_run(pb::FinishRunRequest {
                run_id: run.run_id.to_string(),
                attempt: run.attempt,
                outcome: outcome as i32,
                message: message.to_owned(),
            })
            .await
            .expect("finish run")
            .into_inner()
    }
}

impl Coordinator {
    /// The runner's client, authenticated as a service.
    pub fn client(&self) -> CoordinatorClient {
        CoordinatorClient::new(self.grpc.clone(), Secret::new(self.keys.service_token()))
    }

    /// PutPlan of a plan run's saved plan, through the runner's client.
    pub async fn put_plan(&self, run: &AdmittedRun, saved: &SavedPlan) -> String {
        self.client().put_plan(run, saved).await.expect("put plan")
    }

    /// TakePlan of an apply run, through the runner's client.
    pub async fn take_plan(&self, run: &AdmittedRun) -> (SavedPlan, bool) {
        self.client().take_plan(run).await.expect("take plan")
    }
}
