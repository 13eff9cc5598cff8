//! A real state coordinator for runner tests: started in-process on port 0 against a fresh
//! database, its own NATS prefix and its own bucket and KMS key in moto, with typed clients
//! and the runner's own client on top.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use cairn_proto::state as pb;
use cairn_runner::coordinator::{CoordinatorClient, StoredPlan};
use cairn_runner::executor::Secret;
use cairn_runner::pipeline::{AdmittedRun, RunConfig, SavedPlan};
use cairn_state_coordinator::testing::{Fixtures, RunSpec, aws_edges, start, test_config};
use cairn_state_coordinator::{Config, Server};
// Bearer: for the tests that call as someone else (serve: a platform admin).
#[allow(unused_imports)]
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
    /// The coordinator's fixtures for this test's tenant and instance (as a service).
    pub fx: Fixtures,
    /// `fx.tenant` and `fx.instance`.
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
    let config = Config {
        run_lease: lease,
        ..test_config(&db, &nats, &aws, &keys)
    };
    let edges = aws_edges(&aws, &aws.endpoint, &aws.endpoint);
    let (server, grpc) = start(config, edges).await;
    let fx = Fixtures::new(grpc.clone(), keys.service_token());
    Coordinator {
        server,
        grpc,
        keys,
        db,
        aws,
        nats,
        tenant: fx.tenant,
        instance: fx.instance,
        fx,
    }
}

impl Coordinator {
    pub fn runs(&self) -> RunsClient<Authed> {
        self.fx.runs()
    }

    pub fn states(&self) -> StatesClient<Authed> {
        self.fx.states()
    }

    pub async fn create_state(&self, physical_name: &str) -> String {
        self.fx.create_state(physical_name).await
    }

    pub async fn state(&self, state_id: &str) -> pb::State {
        self.fx.state(state_id).await
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
        let spec = RunSpec {
            root_config,
            target_id: "local".to_owned(),
            base_dir: base_dir.to_owned(),
            credential_ref: "deploy".to_owned(),
            plan_run_id: plan_run_id.map(str::to_owned),
        };
        self.fx
            .register_of(state_id, kind, environment, &spec)
            .await
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
        self.fx
            .finish(&run.run_id.to_string(), run.attempt, outcome, message)
            .await
    }
}

impl Coordinator {
    /// The runner's client, authenticated as a service.
    pub fn client(&self) -> CoordinatorClient {
        CoordinatorClient::new(
            &format!("http://{}", self.server.grpc_addr()),
            self.grpc.clone(),
            Secret::new(self.keys.service_token()),
        )
        .expect("the coordinator's client")
    }

    /// PutPlan of a plan run's saved plan (no masked plan JSON), through the runner's client.
    pub async fn put_plan(&self, run: &AdmittedRun, saved: &SavedPlan) -> StoredPlan {
        self.client()
            .put_plan(run, saved, None)
            .await
            .expect("put plan")
    }

    /// TakePlan of an apply run, through the runner's client.
    pub async fn take_plan(&self, run: &AdmittedRun) -> (SavedPlan, bool) {
        self.client().take_plan(run).await.expect("take plan")
    }
}
