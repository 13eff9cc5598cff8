//! The run pipeline end to end with the process executor and the tofu-sim binary: a plan run
//! of a root config using the module library, then an apply of its saved plan; a config error
//! stopping before any plan; an interrupted attempt running nothing; an unregistered
//! credential refused.
#![allow(clippy::unwrap_used)]

#[path = "../executor/helpers.rs"]
#[allow(dead_code)]
mod helpers;

use std::collections::BTreeMap;
use std::time::Duration;

use cairn_runner::credentials::CredentialRegistry;
use cairn_runner::executor::{Executor, Secret};
use cairn_runner::pipeline::{
    AdmittedRun, BackendAddresses, Environment, ErrorClass, Pipeline, PipelineSettings, RunConfig,
    RunKind, RunOutcome,
};
use cairn_tofu::Risk;
use helpers::*;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn settings(log_sink: Option<mpsc::Sender<cairn_runner::executor::LogLine>>) -> PipelineSettings {
    PipelineSettings {
        timeout: Duration::from_secs(120),
        cancel: CancellationToken::new(),
        log_tail: 50,
        log_sink,
        module_library: module_library(),
        extra_env: Vec::new(),
        backend_tls: Default::default(),
    }
}

fn admitted(token: &str) -> AdmittedRun {
    AdmittedRun {
        run_id: run_id(),
        attempt: 1,
        // The root configs below have no http backend: these are not used by tofu.
        backend: BackendAddresses {
            address: "http://127.0.0.1:9/state".into(),
            lock_address: "http://127.0.0.1:9/lock".into(),
            unlock_address: "http://127.0.0.1:9/unlock".into(),
        },
        run_token: Secret::new(token),
        base_generation: 0,
        read_only: false,
        interrupted: false,
    }
}

fn network_root(base_dir: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "module": {"net": {
            "source": "./modules/local/network",
            "name": "net1",
            "base_dir": base_dir,
        }},
        "output": {
            "config_path": {"value": "${module.net.config_path}"},
            "token": {"value": "${var.api_secret}", "sensitive": true}
        },
        "variable": {"api_secret": {"type": "string", "sensitive": true}}
    }))
    .unwrap()
}

fn config(kind: RunKind, root: Vec<u8>, base_dir: &str) -> RunConfig {
    RunConfig {
        kind,
        environment: Environment::parse("staging").unwrap(),
        root_config: root,
        config_hash: "h1".into(),
        tenant_id: "t1".into(),
        target_id: "local".into(),
        target_settings: BTreeMap::from([("base_dir".to_owned(), base_dir.to_owned())]),
        credential_ref: Some("deploy".into()),
        sensitive_variable_refs: BTreeMap::from([("api_secret".to_owned(), "db-pass".to_owned())]),
    }
}

fn registry(dir: &std::path::Path) -> CredentialRegistry {
    let key = dir.join("key");
    std::fs::write(&key, "canary-credential-1234\n").unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "canary-sensitive-value").unwrap();
    CredentialRegistry::parse(
        &serde_json::json!({"entries": [
            {"tenant_id": "t1", "target_id": "local", "reference": "deploy",
             "vars": {"LOCAL_API_KEY": {"file": key}}},
            {"tenant_id": "t1", "target_id": "local", "reference": "db-pass",
             "vars": {"VALUE": {"file": secret}}}
        ]})
        .to_string(),
    )
    .unwrap()
}

#[tokio::test]
async fn plan_then_apply_of_the_saved_plan() {
    let scratch = scratch();
    let exec = process_executor(instance("pipe"), scratch.path()).await;
    let creds = tempfile::tempdir().unwrap();
    let registry = registry(creds.path());
    let base = tempfile::tempdir().unwrap();
    let base_dir = base.path().to_string_lossy().into_owned();
    let (tx, mut rx) = mpsc::channel(1024);
    let pipeline = Pipeline::new(&exec, &registry, settings(Some(tx)));

    let plan_run = admitted("canary-token-plan");
    let plan_cfg = config(RunKind::Plan, network_root(&base_dir), &base_dir);
    let planned = pipeline.run(&plan_run, &plan_cfg, None).await.unwrap();
    assert_eq!(
        planned.outcome,
        RunOutcome::Succeeded,
        "{}: {:?}",
        planned.message,
        planned.log_tail
    );
    let summary = planned.summary.as_ref().unwrap();
    assert!(summary.add >= 1, "{summary:?}");
    assert_eq!(summary.change, 0);
    assert_eq!(summary.destroy, 0);
    assert_eq!(summary.risk, Risk::Low);
    let masked = planned.masked_plan.as_ref().unwrap().to_string();
    assert!(!masked.contains("canary-sensitive-value"), "{masked}");
    let saved = planned.saved_plan.clone().unwrap();
    assert!(!saved.plan.is_empty());
    assert!(!saved.lock_file.is_empty());
    assert_eq!(saved.tags.config_hash, "h1");
    assert_eq!(saved.tags.tofu_version, "1.12.6");
    assert_eq!(saved.tags.provider_lock_hash.len(), 64);
    assert_eq!(saved.tags.module_library_hash.len(), 64);
    assert!(!exec.work_dir(&plan_run.run_id).exists());
    assert!(!base.path().join("net1/network.json").exists());

    let apply_run = admitted("canary-token-apply");
    let apply_cfg = config(RunKind::Apply, network_root(&base_dir), &base_dir);
    let applied = pipeline
        .run(&apply_run, &apply_cfg, Some(&saved))
        .await
        .unwrap();
    assert_eq!(
        applied.outcome,
        RunOutcome::Succeeded,
        "{}: {:?}",
        applied.message,
        applied.log_tail
    );
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
    let token = applied.outputs.iter().find(|o| o.name == "token").unwrap();
    assert!(token.sensitive && token.value.is_none());
    assert!(applied.errored_state.is_none());
    assert!(applied.stale_tags.is_empty(), "{:?}", applied.stale_tags);
    assert_eq!(applied.message, "applied");
    assert!(!exec.work_dir(&apply_run.run_id).exists());

    drop(pipeline);
    let mut logged = Vec::new();
    while let Some(line) = rx.recv().await {
        logged.push(line.text);
    }
    let all = format!("{logged:?} {:?} {:?}", planned.log_tail, applied.log_tail);
    assert!(!logged.is_empty());
    for canary in [
        "canary-credential-1234",
        "canary-token-plan",
        "canary-token-apply",
        "canary-sensitive-value",
    ] {
        assert!(!all.contains(canary), "{canary} logged");
    }
}

#[tokio::test]
async fn a_config_error_stops_before_any_plan() {
    let scratch = scratch();
    let exec = process_executor(instance("pipe-cfg"), scratch.path()).await;
    let creds = tempfile::tempdir().unwrap();
    let registry = registry(creds.path());
    let pipeline = Pipeline::new(&exec, &registry, settings(None));
    let root = serde_json::to_vec(&serde_json::json!({
        "output": {"x": {"value": "${var.undeclared}"}}
    }))
    .unwrap();
    let run = admitted("token-of-a-test-run");
    let result = pipeline
        .run(&run, &config(RunKind::Plan, root, "/tmp"), None)
        .await
        .unwrap();
    assert_eq!(result.outcome, RunOutcome::Failed, "{:?}", result.log_tail);
    assert_eq!(result.class, Some(ErrorClass::Config));
    assert!(
        result.message.starts_with("validate failed"),
        "{}",
        result.message
    );
    assert!(result.summary.is_none() && result.saved_plan.is_none());
}

#[tokio::test]
async fn interrupted_attempts_and_unregistered_credentials_run_nothing() {
    let scratch = scratch();
    let exec = process_executor(instance("pipe-int"), scratch.path()).await;
    let creds = tempfile::tempdir().unwrap();
    let registry = registry(creds.path());
    let pipeline = Pipeline::new(&exec, &registry, settings(None));

    let mut run = admitted("token-of-a-test-run");
    run.attempt = 2;
    run.interrupted = true;
    let result = pipeline
        .run(&run, &config(RunKind::Apply, b"{}".to_vec(), "/tmp"), None)
        .await
        .unwrap();
    assert_eq!(result.outcome, RunOutcome::Interrupted);
    assert_eq!(result.class, Some(ErrorClass::Interrupted));
    assert!(!exec.work_dir(&run.run_id).exists());

    let run = admitted("token-of-a-test-run");
    let mut cfg = config(RunKind::Plan, b"{}".to_vec(), "/tmp");
    cfg.tenant_id = "t2".into();
    let result = pipeline.run(&run, &cfg, None).await.unwrap();
    assert_eq!(result.outcome, RunOutcome::Failed);
    assert!(
        result.message.contains("not registered"),
        "{}",
        result.message
    );
    assert!(!exec.work_dir(&run.run_id).exists());
}

#[tokio::test]
async fn a_stale_saved_plan_fails_in_production_and_is_replanned_elsewhere() {
    let scratch = scratch();
    let exec = process_executor(instance("pipe-stale"), scratch.path()).await;
    let creds = tempfile::tempdir().unwrap();
    let registry = registry(creds.path());
    let base = tempfile::tempdir().unwrap();
    let base_dir = base.path().to_string_lossy().into_owned();
    let pipeline = Pipeline::new(&exec, &registry, settings(None));
    let planned = pipeline
        .run(
            &admitted("token-of-a-test-run"),
            &config(RunKind::Plan, network_root(&base_dir), &base_dir),
            None,
        )
        .await
        .unwrap();
    let mut saved = planned.saved_plan.unwrap();
    saved.tags.tofu_version = "1.6.0".into();
    saved.tags.module_library_hash = "0".repeat(64);

    // Production by any of its names (the one production rule): nothing is applied.
    for name in ["production", "prod", "Production"] {
        let mut prod = config(RunKind::Apply, network_root(&base_dir), &base_dir);
        prod.environment = Environment::parse(name).unwrap();
        let failed = pipeline
            .run(&admitted("token-of-a-test-run"), &prod, Some(&saved))
            .await
            .unwrap();
        assert_eq!(failed.outcome, RunOutcome::Failed, "{name}");
        assert_eq!(failed.class, Some(ErrorClass::StalePlan), "{name}");
        assert_eq!(failed.stale_tags, ["tofu version", "module library"]);
        assert!(
            failed
                .message
                .contains("tofu version, module library changed"),
            "{}",
            failed.message
        );
        assert!(!base.path().join("net1/network.json").exists(), "{name}");
    }

    let staging = config(RunKind::Apply, network_root(&base_dir), &base_dir);
    let applied = pipeline
        .run(&admitted("token-of-a-test-run"), &staging, Some(&saved))
        .await
        .unwrap();
    assert_eq!(
        applied.outcome,
        RunOutcome::Succeeded,
        "{}: {:?}",
        applied.message,
        applied.log_tail
    );
    assert_eq!(applied.message, "planned again and applied");
    assert_eq!(applied.stale_tags, ["tofu version", "module library"]);
    let summary = applied.summary.as_ref().unwrap();
    assert!(summary.add >= 1, "{summary:?} {:?}", applied.log_tail);
    assert!(
        applied
            .log_tail
            .iter()
            .any(|l| l.starts_with("warning: the saved plan is stale"))
    );
    assert!(base.path().join("net1/network.json").is_file());
}
