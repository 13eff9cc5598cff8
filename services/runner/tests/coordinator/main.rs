//! The run pipeline against a real state coordinator (in-process) with the process executor
//! and tofu-sim: state goes through the coordinator's http backend.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;
#[path = "../executor/helpers.rs"]
#[allow(dead_code)]
mod helpers;

use std::time::Duration;

use cairn_contract::RefusalReason;
use cairn_proto::state as pb;
use cairn_runner::credentials::CredentialRegistry;
use cairn_runner::pipeline::{
    AdmittedRun, ErrorClass, Pipeline, PipelineSettings, RunConfig, RunOutcome, RunResult,
    SavedPlan,
};
use cairn_runner::plan_tags::sha256_hex;
use cairn_tofu::Risk;
use tokio_util::sync::CancellationToken;

fn root_config(base_dir: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "terraform": {"backend": {"http": {}}},
        "module": {"net": {
            "source": "./modules/local/network",
            "name": "net1",
            "base_dir": base_dir,
        }},
        "output": {"config_path": {"value": "${module.net.config_path}"}}
    }))
    .unwrap()
}

#[tokio::test]
async fn plan_then_apply_with_state_in_the_coordinator() {
    let coord = common::spawn_coordinator().await;
    let state_id = coord.create_state("net").await;
    let base = tempfile::tempdir().unwrap();
    let base_dir = base.path().to_string_lossy().into_owned();
    let creds = tempfile::tempdir().unwrap();
    let key = creds.path().join("key");
    std::fs::write(&key, "canary-credential-5678").unwrap();
    let registry = CredentialRegistry::parse(
        &serde_json::json!({"entries": [
            {"tenant_id": coord.tenant.to_string(), "target_id": "local", "reference": "deploy",
             "vars": {"LOCAL_API_KEY": {"file": key}}}
        ]})
        .to_string(),
    )
    .unwrap();
    let scratch = helpers::scratch();
    let exec = helpers::process_executor(helpers::instance("coord"), scratch.path()).await;
    let pipeline = Pipeline::new(
        &exec,
        &registry,
        PipelineSettings {
            timeout: Duration::from_secs(120),
            cancel: CancellationToken::new(),
            log_tail: 100,
            log_sink: None,
            module_library: helpers::module_library(),
            extra_env: Vec::new(),
            backend_tls: Default::default(),
        },
    );

    let plan_id = coord
        .register(
            &state_id,
            pb::RunKind::Plan,
            "staging",
            root_config(&base_dir),
            &base_dir,
            None,
        )
        .await;
    let (admitted, config) = coord.admit(&plan_id).await;
    assert_eq!(admitted.base_generation, 0);
    let planned = pipeline.run(&admitted, &config, None).await.unwrap();
    assert_eq!(
        planned.outcome,
        RunOutcome::Succeeded,
        "{}: {:#?}",
        planned.message,
        planned.log_tail
    );
    let summary = planned.summary.clone().unwrap();
    assert!(summary.add >= 1, "{summary:?}");
    assert_eq!((summary.change, summary.destroy), (0, 0));
    assert_eq!(summary.risk, Risk::Low);
    // PutPlan with the masked plan JSON: stored under the plan file's own sha256, and served
    // back (masked) by GetMaskedPlan.
    let saved_plan = planned.saved_plan.as_ref().unwrap();
    let stored = coord
        .client()
        .put_plan(&admitted, saved_plan, planned.masked_plan.as_ref())
        .await
        .unwrap();
    assert_eq!(stored.plan_sha256, sha256_hex(&saved_plan.plan));
    let review = coord.client().masked_plan(&plan_id).await.unwrap().unwrap();
    assert_eq!(review.plan_id, stored.plan_id);
    assert_eq!(review.plan_sha256, stored.plan_sha256);
    assert_eq!(review.base_generation, 0);
    let masked: serde_json::Value = serde_json::from_slice(&review.masked_plan_json).unwrap();
    assert_eq!(&masked, planned.masked_plan.as_ref().unwrap());
    let finished = coord
        .finish(&admitted, pb::RunOutcome::Succeeded, "planned")
        .await;
    assert_eq!(finished.final_generation, 0);
    assert!(finished.refusal_reason.is_empty());
    assert!(!base.path().join("net1/network.json").exists());

    let apply_id = coord
        .register(
            &state_id,
            pb::RunKind::Apply,
            "staging",
            root_config(&base_dir),
            &base_dir,
            Some(&plan_id),
        )
        .await;
    let (admitted, config) = coord.admit(&apply_id).await;
    let (saved, current) = coord.take_plan(&admitted).await;
    assert!(current);
    assert_eq!(saved.tags, planned.saved_plan.as_ref().unwrap().tags);
    assert_eq!(saved.plan, planned.saved_plan.as_ref().unwrap().plan);
    let applied = pipeline
        .run(&admitted, &config, Some(&saved))
        .await
        .unwrap();
    assert!(applied.stale_tags.is_empty(), "{:?}", applied.stale_tags);
    assert_eq!(
        applied.outcome,
        RunOutcome::Succeeded,
        "{}: {:#?}",
        applied.message,
        applied.log_tail
    );
    assert!(applied.errored_state.is_none());
    let finished = coord
        .finish(&admitted, pb::RunOutcome::Succeeded, "applied")
        .await;
    assert!(finished.final_generation >= 1, "{finished:?}");
    assert!(finished.refusal_reason.is_empty(), "{finished:?}");
    let state = coord.state(&state_id).await;
    assert_eq!(state.current_generation, finished.final_generation);
    assert!(base.path().join("net1/network.json").is_file());
    let path = applied
        .outputs
        .iter()
        .find(|o| o.name == "config_path")
        .unwrap();
    assert!(
        path.value
            .as_ref()
            .unwrap()
            .as_str()
            .unwrap()
            .starts_with(&base_dir)
    );
    let tail = format!("{:?} {:?}", planned.log_tail, applied.log_tail);
    assert!(!tail.contains("canary-credential-5678"));
}

struct Env {
    coord: common::Coordinator,
    registry: CredentialRegistry,
    exec: cairn_runner::executor::ProcessExecutor,
    base: tempfile::TempDir,
    _scratch: tempfile::TempDir,
    _creds: tempfile::TempDir,
}

impl Env {
    async fn new() -> Self {
        let coord = common::spawn_coordinator().await;
        let creds = tempfile::tempdir().unwrap();
        let key = creds.path().join("key");
        std::fs::write(&key, "canary-credential-9").unwrap();
        let registry = CredentialRegistry::parse(
            &serde_json::json!({"entries": [
                {"tenant_id": coord.tenant.to_string(), "target_id": "local",
                 "reference": "deploy", "vars": {"LOCAL_API_KEY": {"file": key}}}
            ]})
            .to_string(),
        )
        .unwrap();
        let scratch = helpers::scratch();
        let exec = helpers::process_executor(helpers::instance("stale"), scratch.path()).await;
        Self {
            coord,
            registry,
            exec,
            base: tempfile::tempdir().unwrap(),
            _scratch: scratch,
            _creds: creds,
        }
    }

    fn pipeline(&self) -> Pipeline<'_> {
        Pipeline::new(
            &self.exec,
            &self.registry,
            PipelineSettings {
                timeout: Duration::from_secs(120),
                cancel: CancellationToken::new(),
                log_tail: 100,
                log_sink: None,
                module_library: helpers::module_library(),
                extra_env: Vec::new(),
                backend_tls: Default::default(),
            },
        )
    }

    fn root(&self, name: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "terraform": {"backend": {"http": {}}},
            "module": {name: {
                "source": "./modules/local/network",
                "name": name,
                "base_dir": self.base_dir(),
            }}
        }))
        .unwrap()
    }

    fn base_dir(&self) -> String {
        self.base.path().to_string_lossy().into_owned()
    }

    /// A plan run whose saved plan is put to the coordinator; returns the plan run's id.
    async fn plan(&self, state_id: &str, env: &str, name: &str) -> String {
        let id = self
            .coord
            .register(
                state_id,
                pb::RunKind::Plan,
                env,
                self.root(name),
                &self.base_dir(),
                None,
            )
            .await;
        let (admitted, config) = self.coord.admit(&id).await;
        let planned = self.pipeline().run(&admitted, &config, None).await.unwrap();
        assert_eq!(planned.outcome, RunOutcome::Succeeded, "{planned:?}");
        self.coord
            .put_plan(&admitted, planned.saved_plan.as_ref().unwrap())
            .await;
        self.coord
            .finish(&admitted, pb::RunOutcome::Succeeded, "planned")
            .await;
        id
    }

    /// An apply (of the plan run's saved plan, if any), finished with its outcome.
    async fn apply(
        &self,
        state_id: &str,
        env: &str,
        name: &str,
        plan_id: Option<&str>,
    ) -> (RunResult, pb::FinishRunResponse) {
        let id = self
            .coord
            .register(
                state_id,
                pb::RunKind::Apply,
                env,
                self.root(name),
                &self.base_dir(),
                plan_id,
            )
            .await;
        let (admitted, config) = self.coord.admit(&id).await;
        let saved = match plan_id {
            Some(_) => Some(self.coord.take_plan(&admitted).await.0),
            None => None,
        };
        self.run_and_finish(&admitted, &config, saved.as_ref())
            .await
    }

    /// Runs an admitted attempt and finishes it with its outcome; the coordinator's refusal
    /// reason reclassifies a failure.
    async fn run_and_finish(
        &self,
        admitted: &AdmittedRun,
        config: &RunConfig,
        saved: Option<&SavedPlan>,
    ) -> (RunResult, pb::FinishRunResponse) {
        let mut result = self.pipeline().run(admitted, config, saved).await.unwrap();
        let outcome = match result.outcome {
            RunOutcome::Succeeded => pb::RunOutcome::Succeeded,
            _ => pb::RunOutcome::Failed,
        };
        let finished = self.coord.finish(admitted, outcome, &result.message).await;
        result.apply_refusal_reason(RefusalReason::from_code(&finished.refusal_reason));
        (result, finished)
    }

    /// Fences the state (as a detected damage would), at generation `seen`.
    async fn fence(&self, state_id: &str, seen: i64) {
        let mut conn = self.coord.server.app().pool.acquire().await.unwrap();
        let fenced = cairn_state_coordinator::store::states::state_fence(
            &mut conn,
            state_id.parse().unwrap(),
            seen,
            "damage planted by the test",
        )
        .await
        .unwrap();
        assert!(fenced);
    }
}

#[tokio::test]
async fn a_fence_at_lock_is_classed_fenced_not_transient() {
    let env = Env::new().await;
    let state_id = env.coord.create_state("fenced").await;
    let id = env
        .coord
        .register(
            &state_id,
            pb::RunKind::Apply,
            "staging",
            env.root("netf"),
            &env.base_dir(),
            None,
        )
        .await;
    let (admitted, config) = env.coord.admit(&id).await;
    // Fenced after the admission: the attempt runs, and tofu's LOCK is refused (422). Tofu
    // only says it could not acquire the lock (which reads as transient); the coordinator
    // recorded why on the attempt, and that wins.
    env.fence(&state_id, 0).await;
    let (result, finished) = env.run_and_finish(&admitted, &config, None).await;
    assert_eq!(result.outcome, RunOutcome::Failed, "{result:?}");
    assert_eq!(
        RefusalReason::from_code(&finished.refusal_reason),
        Some(RefusalReason::Fenced),
        "{finished:?}"
    );
    assert_eq!(result.class, Some(ErrorClass::Fenced), "{result:?}");
    assert!(
        result
            .log_tail
            .iter()
            .any(|l| l.contains("Error acquiring the state lock")),
        "{:#?}",
        result.log_tail
    );
    assert!(!env.base.path().join("netf/network.json").exists());
    assert_eq!(env.coord.state(&state_id).await.current_generation, 0);
}

#[tokio::test]
async fn a_plan_made_stale_by_another_apply() {
    let env = Env::new().await;
    let state_id = env.coord.create_state("stale").await;

    // Production: the stale plan fails naming the base generation and applies nothing.
    let plan_id = env.plan(&state_id, "production", "neta").await;
    let (other, finished) = env.apply(&state_id, "production", "netb", None).await;
    assert_eq!(other.outcome, RunOutcome::Succeeded, "{other:?}");
    assert_eq!(finished.final_generation, 1);
    let (stale, finished) = env
        .apply(&state_id, "production", "neta", Some(&plan_id))
        .await;
    assert_eq!(stale.outcome, RunOutcome::Failed);
    assert_eq!(stale.class, Some(ErrorClass::StalePlan));
    assert_eq!(stale.stale_tags, ["base generation"]);
    assert!(
        stale.message.contains("base generation changed"),
        "{}",
        stale.message
    );
    assert_eq!(finished.final_generation, 1);
    assert!(!env.base.path().join("neta/network.json").exists());
    assert_eq!(env.coord.state(&state_id).await.current_generation, 1);

    // Staging: the same situation plans again and applies.
    let plan_id = env.plan(&state_id, "staging", "neta").await;
    let (_, finished) = env.apply(&state_id, "staging", "netc", None).await;
    assert_eq!(finished.final_generation, 2);
    let (replanned, finished) = env
        .apply(&state_id, "staging", "neta", Some(&plan_id))
        .await;
    assert_eq!(
        replanned.outcome,
        RunOutcome::Succeeded,
        "{}: {:#?}",
        replanned.message,
        replanned.log_tail
    );
    assert_eq!(replanned.message, "planned again and applied");
    assert_eq!(replanned.stale_tags, ["base generation"]);
    assert_eq!(finished.final_generation, 3);
    assert!(env.base.path().join("neta/network.json").is_file());
}

#[tokio::test]
async fn execute_run_takes_and_puts_saved_plans_itself() {
    use cairn_runner::run::{RunOptions, execute_run};
    let env = Env::new().await;
    let state_id = env.coord.create_state("exec").await;
    let client = env.coord.client();
    let pipeline = env.pipeline();
    let options = RunOptions::default();

    let plan_id = env
        .coord
        .register(
            &state_id,
            pb::RunKind::Plan,
            "production",
            env.root("netx"),
            &env.base_dir(),
            None,
        )
        .await;
    let before = std::time::SystemTime::now();
    let planned = execute_run(&client, &pipeline, &plan_id, &options)
        .await
        .unwrap();
    assert_eq!(planned.result.outcome, RunOutcome::Succeeded, "{planned:?}");
    assert!(planned.plan_id.is_some());
    assert!(!planned.took_saved_plan);
    assert_eq!(planned.final_generation, 0);
    assert_eq!(planned.base_generation, 0);
    assert!(planned.started_at >= before && planned.started_at <= std::time::SystemTime::now());
    // The plan_sha256 reported is the coordinator's, and that of the plan file it stored.
    let review = client.masked_plan(&plan_id).await.unwrap().unwrap();
    assert_eq!(planned.plan_id.as_deref(), Some(review.plan_id.as_str()));
    assert_eq!(
        planned.plan_sha256.as_deref(),
        Some(review.plan_sha256.as_str())
    );
    let saved = planned.result.saved_plan.as_ref().unwrap();
    assert_eq!(review.plan_sha256, sha256_hex(&saved.plan));
    assert!(!review.masked_plan_json.is_empty());

    let apply_id = env
        .coord
        .register(
            &state_id,
            pb::RunKind::Apply,
            "production",
            env.root("netx"),
            &env.base_dir(),
            Some(&plan_id),
        )
        .await;
    let applied = execute_run(&client, &pipeline, &apply_id, &options)
        .await
        .unwrap();
    assert_eq!(
        applied.result.outcome,
        RunOutcome::Succeeded,
        "{}: {:#?}",
        applied.result.message,
        applied.result.log_tail
    );
    assert_eq!(applied.result.message, "applied");
    assert!(applied.took_saved_plan);
    assert_eq!(applied.final_generation, 1);
    assert_eq!(applied.base_generation, 0);
    assert_eq!(applied.plan_sha256, None);
    assert!(applied.quarantine_id.is_none());
    assert!(env.base.path().join("netx/network.json").is_file());
    assert_eq!(env.coord.state(&state_id).await.current_generation, 1);
}
