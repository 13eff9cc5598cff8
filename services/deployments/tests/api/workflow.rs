//! The workflow end to end: tenancy, templates, a coordinator and deployments in-process, and
//! a real runner (Docker executor, `cairn/tofu-sim:dev`) serving the tenant's local target,
//! all on one NATS prefix and one signing key. Conditions are polled with a deadline.
use std::time::{Duration, Instant};

use cairn_auth::Role;
use cairn_proto::deployments as pb;
use cairn_proto::templates as tpb;
use cairn_proto::tenancy as tnpb;
use cairn_runner::config::{ExecutorKind, ServeConfig};
use cairn_runner::serve::Runner;
use cairn_service::Service as _;
use cairn_state_coordinator::testing as coord;
use cairn_testkit::{TempDir, TestKeys};
use tonic::transport::Channel;
use uuid::Uuid;

use crate::helpers::{
    Deployments, Instances, PARAMS, authed, db_args, nats_args, repo, start_templates,
    start_tenancy,
};

const CREDENTIAL_REF: &str = "local-default";
/// The secret reference in [`PARAMS`].
const DB_PASSWORD_ARN: &str = "arn:aws:secretsmanager:us-east-1:000000000000:secret:shop-db";

pub struct Rig {
    pub channel: Channel,
    pub keys: TestKeys,
    pub tenant: Uuid,
    _target_id: String,
    pub base_dir: TempDir,
    pub coordinator: cairn_state_coordinator::Server,
    _runner: Runner,
    _deployments: cairn_deployments::Server,
    _tenancy: cairn_tenancy::Server,
    _templates: cairn_templates::Server,
    _dbs: Vec<cairn_db::TestDatabase>,
    _aws: cairn_testkit::TestAws,
    _dirs: Vec<TempDir>,
    _work: tempfile::TempDir,
}

fn tofu_image() -> String {
    std::env::var("CAIRN_TOFU_IMAGE").unwrap_or_else(|_| "cairn/tofu-sim:dev".to_owned())
}

pub async fn rig() -> Rig {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let nats = cairn_testkit::connect_nats().await;
    let dir = cairn_testkit::temp_dir();
    let base_dir = cairn_testkit::temp_dir();
    let (tenancy, tenancy_db, tenant) = start_tenancy(&keys, &nats, &dir).await;
    let (templates, templates_db) = start_templates(&keys).await;
    let tenancy_ch = cairn_testkit::connect_grpc(tenancy.grpc_addr()).await;
    let templates_ch = cairn_testkit::connect_grpc(templates.grpc_addr()).await;

    // The coordinator, with short leases.
    let coord_db = cairn_testkit::fresh_database().await;
    let aws = cairn_testkit::TestAws::create().await;
    let config = cairn_state_coordinator::Config {
        run_lease: Duration::from_secs(20),
        ..coord::test_config(&coord_db, &nats, &aws, &keys)
    };
    let (coordinator, _) =
        coord::start(config, coord::aws_edges(&aws, &aws.endpoint, &aws.endpoint)).await;

    // The tenant's local target and its web-stack template, made by its admin.
    let admin = keys.user_token(tenant, Role::Admin);
    let target_id = tnpb::targets_client::TargetsClient::new(authed(&tenancy_ch, admin.clone()))
        .create_target(tnpb::CreateTargetRequest {
            tenant_id: tenant.to_string(),
            name: "local".into(),
            spec: Some(tnpb::TargetSpec {
                provider: Some(tnpb::target_spec::Provider::Local(tnpb::LocalProvider {
                    base_dir: base_dir.path().display().to_string(),
                })),
                credential_ref: CREDENTIAL_REF.into(),
                max_concurrent_deployments: 2,
                enabled: true,
            }),
        })
        .await
        .expect("create target")
        .into_inner()
        .target
        .unwrap()
        .target_id;
    let mut t = tpb::templates_client::TemplatesClient::new(authed(&templates_ch, admin));
    let template_id = t
        .create_template(tpb::CreateTemplateRequest {
            tenant_id: tenant.to_string(),
            name: "web-stack".into(),
            description: "the demo".into(),
        })
        .await
        .expect("create template")
        .into_inner()
        .template
        .unwrap()
        .template_id;
    t.publish_version(tpb::PublishVersionRequest {
        template_id,
        document: std::fs::read_to_string(repo("modules/examples/web-stack/template.yaml"))
            .unwrap(),
    })
    .await
    .expect("publish web-stack");

    // The runner: the tenant's target in its credential registry, Docker and tofu-sim.
    let files = cairn_testkit::temp_dir();
    std::fs::write(files.path().join("key"), "workflow-test-key\n").unwrap();
    std::fs::write(files.path().join("password"), "workflow-test-password\n").unwrap();
    std::fs::write(
        files.path().join("credentials.json"),
        serde_json::json!({"entries": [
            {"tenant_id": tenant.to_string(), "target_id": target_id, "reference": CREDENTIAL_REF,
             "vars": {"LOCAL_API_KEY": {"file": files.path().join("key")}}},
            // web-stack's sensitive parameter: one value, from a file.
            {"tenant_id": tenant.to_string(), "target_id": target_id, "reference": DB_PASSWORD_ARN,
             "vars": {"DB_ADMIN_PASSWORD": {"file": files.path().join("password")}}}
        ]})
        .to_string(),
    )
    .unwrap();
    std::fs::write(files.path().join("token"), keys.service_token()).unwrap();
    let work = tempfile::tempdir_in("/dev/shm").unwrap();
    let spool = cairn_testkit::temp_dir();
    let instance = format!("wf-{}", &Uuid::new_v4().simple().to_string()[..12]);
    let runner = Runner::start(ServeConfig {
        instance: Some(instance),
        nats: nats_args(&nats),
        coordinator_url: format!("http://{}", coordinator.grpc_addr()),
        tenancy_url: None,
        service_token_file: files.path().join("token"),
        credentials_file: files.path().join("credentials.json"),
        secrets_endpoint: None,
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        jwks: cairn_service::JwksArgs {
            jwt_public_keys_file: keys.jwks_path().to_owned(),
        },
        executor: ExecutorKind::Docker,
        tofu_image: Some(tofu_image()),
        tofu_bin: "tofu".into(),
        tofu_timeout: Duration::from_secs(120),
        tofu_grace: Duration::from_secs(5),
        extra_env: String::new(),
        modules_dir: repo("modules"),
        work_root: work.path().to_path_buf(),
        spool_dir: spool.path().to_path_buf(),
        plugin_cache: Some("cairn-test-plugin-cache".to_owned()),
        tofu_memory_mib: 256,
        tofu_cpus: 1.0,
        tofu_pids: 256,
        docker_network: Some("host".to_owned()),
        concurrency: 4,
        ack_wait: Duration::from_secs(3),
        log_tail: 50,
    })
    .await
    .expect("start runner");

    // Deployments with its workers.
    let db = cairn_testkit::fresh_database().await;
    let token_file = dir.path().join("deployments.token");
    std::fs::write(&token_file, keys.service_token_as("deployments")).unwrap();
    let config = cairn_deployments::Config {
        db: db_args(&db, "deployments"),
        nats: nats_args(&nats),
        jwks: cairn_service::JwksArgs {
            jwt_public_keys_file: keys.jwks_path().to_owned(),
        },
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        tenancy_url: format!("http://{}", tenancy.grpc_addr()),
        templates_url: format!("http://{}", templates.grpc_addr()),
        coordinator_url: format!("http://{}", coordinator.grpc_addr()),
        service_token_file: token_file,
        deploy_parallelism: 4,
        deploy_retries: 2,
        approval_ttl: Duration::from_secs(3600),
        step_admit_timeout: Duration::from_secs(60),
        step_log_lines: 1000,
        deploy_workers: 2,
        deploy_ack_wait: Duration::from_secs(10),
        deploy_retry_backoff: Duration::from_millis(200),
        run_result_fallback: Duration::from_secs(5),
        slot_wait: Duration::from_millis(500),
    };
    let deployments = cairn_deployments::Server::start(config)
        .await
        .expect("start deployments");
    let channel = cairn_testkit::connect_grpc(deployments.grpc_addr()).await;
    Rig {
        channel,
        keys,
        tenant,
        _target_id: target_id,
        base_dir,
        coordinator,
        _runner: runner,
        _deployments: deployments,
        _tenancy: tenancy,
        _templates: templates,
        _dbs: vec![tenancy_db, templates_db, coord_db, db],
        _aws: aws,
        _dirs: vec![dir, files, spool],
        _work: work,
    }
}

impl Rig {
    pub fn clients_as(&self, token: String) -> (Instances, Deployments) {
        (
            Instances::new(authed(&self.channel, token.clone())),
            Deployments::new(authed(&self.channel, token)),
        )
    }

    pub fn clients(&self) -> (Instances, Deployments) {
        self.clients_as(self.keys.user_token(self.tenant, Role::Operator))
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

    pub async fn deploy(&self, d: &mut Deployments, instance: &str, key: &str) -> pb::Deployment {
        d.create_deployment(pb::CreateDeploymentRequest {
            tenant_id: self.tenant.to_string(),
            instance_ref: instance.into(),
            kind: pb::DeploymentKind::Deploy as i32,
            idempotency_key: key.into(),
            ..Default::default()
        })
        .await
        .expect("create deployment")
        .into_inner()
        .deployment
        .unwrap()
    }

    pub async fn get(&self, deployment_id: &str) -> pb::Deployment {
        let (_, mut d) = self.clients();
        d.get_deployment(pb::GetDeploymentRequest {
            tenant_id: self.tenant.to_string(),
            deployment_id: deployment_id.to_owned(),
        })
        .await
        .expect("get deployment")
        .into_inner()
        .deployment
        .unwrap()
    }

    /// Polls the deployment until its status is one of `want` (panics on a deadline, or on
    /// a terminal status not wanted, with the steps).
    pub async fn wait_status(
        &self,
        deployment_id: &str,
        want: &[pb::DeploymentStatus],
        within: Duration,
    ) -> pb::Deployment {
        let deadline = Instant::now() + within;
        loop {
            let d = self.get(deployment_id).await;
            let status = pb::DeploymentStatus::try_from(d.status).unwrap();
            if want.contains(&status) {
                return d;
            }
            let terminal = matches!(
                status,
                pb::DeploymentStatus::Succeeded
                    | pb::DeploymentStatus::Failed
                    | pb::DeploymentStatus::Cancelled
            );
            assert!(
                !terminal && Instant::now() < deadline,
                "deployment {deployment_id} is {status:?}, not one of {want:?}: {}\n{:#?}",
                d.summary,
                d.steps
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    pub async fn instance(&self, instance_id: &str) -> pb::Instance {
        let (mut i, _) = self.clients();
        i.get_instance(pb::GetInstanceRequest {
            tenant_id: self.tenant.to_string(),
            instance_ref: instance_id.to_owned(),
        })
        .await
        .expect("get instance")
        .into_inner()
        .instance
        .unwrap()
    }

    /// The coordinator's runs of this test's tenant: (kind, count).
    pub async fn coordinator_runs(&self) -> Vec<(String, i64)> {
        let mut conn = self.coordinator.app().pool.acquire().await.unwrap();
        sqlx::query_as(
            "SELECT kind, count(*) FROM runs WHERE tenant_id = $1 GROUP BY kind ORDER BY kind",
        )
        .bind(self.tenant)
        .fetch_all(&mut *conn)
        .await
        .unwrap()
    }

    /// How many apply runs each state of this test's tenant had at the coordinator.
    pub async fn apply_runs_per_state(&self) -> Vec<i64> {
        let mut conn = self.coordinator.app().pool.acquire().await.unwrap();
        sqlx::query_scalar(
            "SELECT count(*) FROM runs WHERE tenant_id = $1 AND kind = 'apply' GROUP BY state_id",
        )
        .bind(self.tenant)
        .fetch_all(&mut *conn)
        .await
        .unwrap()
    }

    /// Relative paths of the files under the target's base dir.
    pub fn files(&self) -> Vec<String> {
        fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, root, out);
                } else {
                    out.push(p.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(self.base_dir.path(), self.base_dir.path(), &mut out);
        out.sort();
        out
    }
}

fn step_kind(s: &pb::Step) -> pb::StepKind {
    pb::StepKind::try_from(s.kind).unwrap()
}

fn step_status(s: &pb::Step) -> pb::StepStatus {
    pb::StepStatus::try_from(s.status).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn deploy_to_a_local_target_applies_every_resource_in_order() {
    let rig = rig().await;
    let shop = rig.create_instance("shop", "dev", PARAMS).await;
    let (_, mut d) = rig.clients();
    let dep = rig.deploy(&mut d, "shop", "first").await;
    let dep = rig
        .wait_status(
            &dep.deployment_id,
            &[pb::DeploymentStatus::Succeeded],
            Duration::from_secs(240),
        )
        .await;

    let applies: Vec<&pb::Step> = dep
        .steps
        .iter()
        .filter(|s| step_kind(s) == pb::StepKind::Apply)
        .collect();
    assert!(applies.len() >= 2, "apply steps: {:#?}", dep.steps);
    for s in &applies {
        assert_eq!(step_status(s), pb::StepStatus::Succeeded, "{s:#?}");
        assert!(!s.run_id.is_empty(), "{s:#?}");
    }
    let instance = rig.instance(&shop.instance_id).await;
    assert_eq!(
        pb::InstanceStatus::try_from(instance.status).unwrap(),
        pb::InstanceStatus::Active
    );
    let files = rig.files();
    for kind in ["network", "database", "queue", "service"] {
        assert!(
            files
                .iter()
                .any(|f| f.starts_with("shop/") && f.contains(kind)),
            "no {kind} file under the base dir: {files:?}"
        );
    }
    // One apply run per resource, each on the resource's own state.
    let runs = rig.coordinator_runs().await;
    let apply_runs = runs
        .iter()
        .find(|(k, _)| k == "apply")
        .map_or(0, |(_, n)| *n);
    assert_eq!(apply_runs, 4, "coordinator runs: {runs:?}");
    assert_eq!(rig.apply_runs_per_state().await, vec![1; 4]);
    let mut applied: Vec<&str> = applies.iter().map(|s| s.resource.as_str()).collect();
    applied.sort_unstable();
    assert_eq!(applied, ["database", "network", "queue", "web"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_risky_production_plan_waits_for_another_approver() {
    let rig = rig().await;
    let alice = rig.keys.user_token_as("alice", rig.tenant, Role::Approver);
    let bob = rig.keys.user_token_as("bob", rig.tenant, Role::Approver);
    let (mut instances, mut as_alice) = rig.clients_as(alice);
    let (_, mut as_bob) = rig.clients_as(bob);
    rig.create_instance("shop", "production", PARAMS).await;

    // The first deployment only creates: low risk, no approval.
    let first = rig.deploy(&mut as_alice, "shop", "first").await;
    rig.wait_status(
        &first.deployment_id,
        &[pb::DeploymentStatus::Succeeded],
        Duration::from_secs(240),
    )
    .await;

    // A new engine version replaces the database: high risk in production.
    instances
        .update_instance(pb::UpdateInstanceRequest {
            tenant_id: rig.tenant.to_string(),
            instance_ref: "shop".into(),
            template_version: 0,
            parameters_patch_json: r#"{"db_engine_version": "17"}"#.into(),
        })
        .await
        .expect("update instance");
    let second = rig.deploy(&mut as_alice, "shop", "second").await;
    let parked = rig
        .wait_status(
            &second.deployment_id,
            &[pb::DeploymentStatus::AwaitingApproval],
            Duration::from_secs(240),
        )
        .await;
    assert!(!parked.plan_set_hash.is_empty());
    assert!(
        parked
            .steps
            .iter()
            .any(|s| step_kind(s) == pb::StepKind::Plan
                && s.resource == "database"
                && s.plan.as_ref().is_some_and(|p| p.risk == "high")),
        "{:#?}",
        parked.steps
    );
    let approve = |hash: &str| pb::ApproveRequest {
        tenant_id: rig.tenant.to_string(),
        deployment_id: second.deployment_id.clone(),
        plan_set_hash: hash.to_owned(),
        comment: "looks right".into(),
    };

    // The requester may not approve their own deployment.
    let refused = as_alice
        .approve(approve(&parked.plan_set_hash))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("requested"),
        "refused as the requester: {refused:?}"
    );
    // An approval of other plans than the current ones is refused.
    let stale = as_bob.approve(approve(&"0".repeat(64))).await.unwrap_err();
    assert_eq!(stale.code(), tonic::Code::FailedPrecondition, "{stale:?}");
    let still = rig.get(&second.deployment_id).await;
    assert_eq!(
        pb::DeploymentStatus::try_from(still.status).unwrap(),
        pb::DeploymentStatus::AwaitingApproval
    );

    // Another approver approves the plans they saw: the deployment applies them.
    as_bob
        .approve(approve(&parked.plan_set_hash))
        .await
        .expect("approve");
    let done = rig
        .wait_status(
            &second.deployment_id,
            &[pb::DeploymentStatus::Succeeded],
            Duration::from_secs(240),
        )
        .await;
    assert_eq!(done.approvals.len(), 1, "{:#?}", done.approvals);
    assert_eq!(done.approvals[0].decision, "approved");
    assert_eq!(done.approvals[0].by, "bob");
    let db_apply = done
        .steps
        .iter()
        .find(|s| step_kind(s) == pb::StepKind::Apply && s.resource == "database")
        .expect("an apply of the database");
    assert_eq!(
        step_status(db_apply),
        pb::StepStatus::Succeeded,
        "{db_apply:#?}"
    );
}
