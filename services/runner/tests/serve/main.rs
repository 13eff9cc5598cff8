//! `cairn-runner serve` end to end: run requests on the NATS work queue, a real coordinator,
//! the Docker executor with the tofu-sim image; results and redacted logs on JetStream.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;
mod drift;
#[path = "../executor/helpers.rs"]
#[allow(dead_code)]
mod helpers;
mod metrics;
mod reliability;
mod rig;

use std::process::Stdio;
use std::time::Duration;

use cairn_proto::runner as rpb;
use cairn_proto::state as pb;
use cairn_runner::serve::Runner;
use cairn_service::Service as _;
use prost::Message;
use rig::{CANARY_CREDENTIAL, TARGET, containers_of, platform_admin_claims};

const WITHIN: Duration = Duration::from_secs(120);

fn outcome(r: &rpb::RunResult) -> pb::RunOutcome {
    pb::RunOutcome::try_from(r.outcome).unwrap()
}

fn class(r: &rpb::RunResult) -> rpb::ErrorClass {
    rpb::ErrorClass::try_from(r.error_class).unwrap()
}

#[tokio::test]
async fn plan_then_apply_through_the_queue_in_containers() {
    let rig = rig::rig(Duration::from_secs(30)).await;
    let runner = rig.start_runner("serve", "").await;
    assert_eq!(runner.targets(), [TARGET.to_owned()]);

    let (plan_id, planned) = rig.run(pb::RunKind::Plan, "production", 1, None).await;
    assert_eq!(outcome(&planned), pb::RunOutcome::Succeeded, "{planned:#?}");
    assert_eq!(planned.attempt, 1);
    assert_eq!(planned.target_id, TARGET);
    assert_eq!(planned.runner_instance, runner.instance());
    assert!(!planned.plan_id.is_empty());
    let summary = planned.summary.clone().unwrap();
    assert!(summary.add >= 1, "{summary:?}");
    assert_eq!(summary.risk, rpb::Risk::Low as i32);
    assert!(!rig.base.path().join("net1/network.json").exists());

    let (apply_id, applied) = rig
        .run(pb::RunKind::Apply, "production", 1, Some(&plan_id))
        .await;
    assert_eq!(outcome(&applied), pb::RunOutcome::Succeeded, "{applied:#?}");
    assert_eq!(applied.final_generation, 1);
    assert!(applied.stale_tags.is_empty());
    assert_eq!(applied.outputs, ["config_path"]);
    assert!(rig.base.path().join("net1/network.json").is_file());
    assert_eq!(rig.coord.state(&rig.state_id).await.current_generation, 1);

    // Logs streamed, numbered gaplessly, redacted; one result per attempt; no container left.
    for run in [&plan_id, &apply_id] {
        let lines = rig.log_lines(run).await;
        assert!(!lines.is_empty(), "no log lines for {run}");
        let seqs: Vec<u64> = lines.iter().map(|l| l.seq).collect();
        assert_eq!(seqs, (1..=lines.len() as u64).collect::<Vec<_>>());
        for l in &lines {
            assert!(!l.text.contains(CANARY_CREDENTIAL), "{l:?}");
        }
        assert_eq!(rig.results(run).await.len(), 1);
        assert_eq!(containers_of(run).await, 0);
    }
    let everything = format!("{planned:?}{applied:?}");
    assert!(!everything.contains(CANARY_CREDENTIAL));

    // A redelivered request of a finished run publishes its result again under the same
    // Nats-Msg-Id: a subscriber sees the publish, the stream keeps one.
    let mut again = rig
        .nats
        .subscribe(rig.ns.runres(&apply_id).unwrap())
        .await
        .unwrap();
    rig.nats.flush().await.unwrap();
    rig.request(&apply_id).await;
    let republished = tokio::time::timeout(WITHIN, futures::StreamExt::next(&mut again))
        .await
        .expect("the result published again")
        .unwrap();
    let republished = rpb::RunResult::decode(republished.payload).unwrap();
    assert_eq!(
        (outcome(&republished), republished.attempt),
        (pb::RunOutcome::Succeeded, applied.attempt),
        "{republished:#?}"
    );
    let results = rig.results(&apply_id).await;
    assert_eq!(results.len(), 1, "{results:#?}");
    // Acknowledged once its publish was confirmed (just after the subscriber saw it).
    rig.wait_until("the redelivered request acknowledged", WITHIN, || async {
        rig.queued().await == 0
    })
    .await;

    // Destroy: a write attempt that removes what the apply made.
    let (destroy_id, destroyed) = rig.run(pb::RunKind::Destroy, "production", 1, None).await;
    assert_eq!(
        outcome(&destroyed),
        pb::RunOutcome::Succeeded,
        "{destroyed:#?}"
    );
    assert_eq!(destroyed.final_generation, 2);
    assert!(!rig.base.path().join("net1/network.json").exists());
    assert_eq!(containers_of(&destroy_id).await, 0);
    runner.shutdown().await;
}

#[tokio::test]
async fn a_stale_production_plan_fails_and_a_stale_staging_plan_is_made_again() {
    let rig = rig::rig(Duration::from_secs(30)).await;
    let runner = rig.start_runner("stale", "").await;
    for (environment, n) in [("production", 1), ("staging", 3)] {
        let (plan_id, planned) = rig.run(pb::RunKind::Plan, environment, n, None).await;
        assert_eq!(outcome(&planned), pb::RunOutcome::Succeeded, "{planned:#?}");
        // Another apply (one more resource) moves the state on: the saved plan's base
        // generation is stale.
        let (_, moved) = rig.run(pb::RunKind::Apply, environment, n + 1, None).await;
        assert_eq!(outcome(&moved), pb::RunOutcome::Succeeded, "{moved:#?}");
        let before = rig.coord.state(&rig.state_id).await.current_generation;

        let (_, applied) = rig
            .run(pb::RunKind::Apply, environment, n, Some(&plan_id))
            .await;
        assert!(
            applied.stale_tags.iter().any(|t| t == "base generation"),
            "{applied:#?}"
        );
        let after = rig.coord.state(&rig.state_id).await.current_generation;
        if environment == "production" {
            assert_eq!(outcome(&applied), pb::RunOutcome::Failed, "{applied:#?}");
            assert_eq!(class(&applied), rpb::ErrorClass::StalePlan);
            assert!(
                applied.message.contains("nothing was applied"),
                "{}",
                applied.message
            );
            assert_eq!(after, before, "a stale production plan changed the state");
        } else {
            assert_eq!(outcome(&applied), pb::RunOutcome::Succeeded, "{applied:#?}");
            assert_eq!(applied.message, "planned again and applied");
            assert!(applied.summary.is_some());
            assert!(after > before);
        }
    }
    runner.shutdown().await;
}

#[tokio::test]
async fn cancel_on_runctl_and_through_the_admin_api_stops_tofu_gracefully() {
    let rig = rig::rig(Duration::from_secs(30)).await;
    // Ten resources of 2 s each in tofu-sim: there is time to cancel, and tofu stops well
    // within its 5 s grace once it heard SIGINT (it finishes the resource in progress).
    let config = rig.config(
        &helpers::instance("cancel").to_string(),
        "TOFU_SIM_RESOURCE_DELAY=2s",
    );
    let grace = config.tofu_grace;
    let runner = Runner::start(config).await.unwrap();
    let admin_token = rig
        .coord
        .keys
        .sign(&platform_admin_claims(rig.coord.tenant));
    let channel = cairn_testkit::connect_grpc(runner.grpc_addr()).await;
    let mut admin = rpb::runner_admin_client::RunnerAdminClient::with_interceptor(
        channel.clone(),
        common::Bearer(admin_token.into()),
    );

    for how in ["runctl", "admin"] {
        let run_id = rig.register(pb::RunKind::Apply, "staging", 5, None).await;
        rig.request(&run_id).await;
        rig.wait_for_log(&run_id, "Creating...", WITHIN).await;
        assert!(rig.locked().await, "the apply holds the lock");
        let listed = admin
            .list_runs(rpb::ListRunsRequest {})
            .await
            .unwrap()
            .into_inner();
        assert!(
            listed
                .runs
                .iter()
                .any(|r| r.run_id == run_id && r.kind == "apply"),
            "{listed:?}"
        );
        let cancelled_at = std::time::Instant::now();
        if how == "runctl" {
            let cancel = rpb::CancelRun {
                run_id: run_id.clone(),
                reason: "test".into(),
            };
            rig.nats
                .publish(
                    rig.ns.runctl(&run_id).unwrap(),
                    cancel.encode_to_vec().into(),
                )
                .await
                .unwrap();
        } else {
            let r = admin
                .cancel_run(rpb::CancelRunRequest {
                    run_id: run_id.clone(),
                    reason: "test".into(),
                })
                .await
                .unwrap()
                .into_inner();
            assert!(r.cancelled);
        }
        // tofu unlocks the state itself, within its grace period.
        rig.wait_until("the lock released", grace, || async { !rig.locked().await })
            .await;
        let released = cancelled_at.elapsed();
        let result = rig.result(&run_id, Duration::from_secs(60)).await;
        assert!(released < grace, "{how}: the lock was held {released:?}");
        assert_eq!(outcome(&result), pb::RunOutcome::Cancelled, "{result:#?}");
        assert_eq!(class(&result), rpb::ErrorClass::Cancelled);
        assert!(
            result.message.contains("state may be incomplete"),
            "{}",
            result.message
        );
        assert_eq!(containers_of(&run_id).await, 0);
        // SIGINT first: tofu heard the interrupt (and was not simply killed).
        let lines = rig.log_lines(&run_id).await;
        assert!(
            lines.iter().any(|l| l.text.contains("Interrupt received.")),
            "{how}: tofu got no SIGINT: {:?}",
            lines.iter().map(|l| &l.text).collect::<Vec<_>>()
        );
        // No attempt 2 follows: the run is finished with attempt 1, its request acknowledged.
        let run = rig.get_run(&run_id).await;
        assert!(run.finished && run.attempt == 1, "{how}: {run:?}");
        rig.wait_until("the cancelled request acknowledged", WITHIN, || async {
            rig.queued().await == 0
        })
        .await;
        let run = rig.get_run(&run_id).await;
        assert!(run.finished && run.attempt == 1, "{how}: {run:?}");
        assert_eq!(rig.results(&run_id).await.len(), 1);
    }

    // The admin API is for platform admins only.
    let mut viewer = rpb::runner_admin_client::RunnerAdminClient::with_interceptor(
        channel,
        common::Bearer(
            rig.coord
                .keys
                .user_token(rig.coord.tenant, cairn_auth::Role::Admin)
                .into(),
        ),
    );
    let denied = viewer.list_runs(rpb::ListRunsRequest {}).await.unwrap_err();
    assert_eq!(denied.code(), tonic::Code::PermissionDenied);
    runner.shutdown().await;
}

/// The runner process killed mid-apply and restarted under the same instance id: it removes
/// its orphan container, the redelivered request becomes attempt 2 once the lease expired,
/// which plans afresh and applies (staging) or reports interrupted (production); no
/// generation is lost or duplicated.
#[tokio::test]
async fn a_runner_killed_mid_apply_is_replaced_by_attempt_two() {
    let rig = rig::rig(Duration::from_secs(4)).await;
    let instance = helpers::instance("killed").to_string();
    let extra = "TOFU_SIM_RESOURCE_DELAY=3s";
    // Production adds two resources to the three staging created: there is something to
    // apply when the runner is killed.
    for (environment, resources) in [("staging", 3), ("production", 5)] {
        let before = rig.coord.state(&rig.state_id).await.current_generation;
        let mut first = spawn_runner(&rig, &instance, extra);
        let run_id = rig
            .register(pb::RunKind::Apply, environment, resources, None)
            .await;
        rig.request(&run_id).await;
        rig.wait_for_log(&run_id, "Creating...", WITHIN).await;
        assert_eq!(containers_of(&run_id).await, 1, "the apply container runs");
        first.start_kill().unwrap();
        first.wait().await.unwrap();

        let mut second = spawn_runner(&rig, &instance, "");
        let result = rig.result(&run_id, WITHIN).await;
        assert_eq!(result.attempt, 2, "{result:#?}");
        assert_eq!(
            containers_of(&run_id).await,
            0,
            "orphan container left behind"
        );
        let generations = rig.generations().await;
        let numbers: Vec<u64> = generations.iter().map(|g| g.0).collect();
        let by_attempt_2: Vec<u64> = rig
            .generation_infos()
            .await
            .iter()
            .filter(|g| g.run_id == run_id && g.attempt == 2)
            .map(|g| g.generation)
            .collect();
        let in_state = rig.files_in_state().await;
        let on_disk = rig.files_on_disk();
        assert_eq!(
            numbers,
            (1..=numbers.len() as u64).collect::<Vec<_>>(),
            "generations are not gapless"
        );
        let after = rig.coord.state(&rig.state_id).await.current_generation;
        assert_eq!(after, *numbers.last().unwrap_or(&0));
        if environment == "staging" {
            assert_eq!(outcome(&result), pb::RunOutcome::Succeeded, "{result:#?}");
            assert!(result.summary.is_some());
            assert!(after > before);
            assert!(!by_attempt_2.is_empty(), "attempt 2 applied nothing");
            for i in 1..=3 {
                assert!(
                    rig.base
                        .path()
                        .join(format!("net{i}/network.json"))
                        .is_file()
                );
            }
            // Attempt 2 planned afresh and applied: the state records exactly what is on disk.
            assert_eq!(in_state, on_disk, "the state and the files disagree");
            assert_eq!(in_state.len(), 3);
        } else {
            assert_eq!(outcome(&result), pb::RunOutcome::Interrupted, "{result:#?}");
            assert_eq!(class(&result), rpb::ErrorClass::Interrupted);
            assert!(
                by_attempt_2.is_empty(),
                "interrupted attempt 2 wrote generations {by_attempt_2:?}"
            );
            // What the state records is on disk as recorded (attempt 1 was killed mid-apply:
            // the disk may hold more than the state says).
            for (path, content) in &in_state {
                assert_eq!(on_disk.get(path), Some(content), "{path}");
            }
            assert!(in_state.len() >= 3, "{in_state:?}");
        }
        assert_eq!(rig.results(&run_id).await.len(), 1);
        second.start_kill().unwrap();
        second.wait().await.unwrap();
    }
}

#[tokio::test]
async fn containers_of_dead_runs_are_reaped_and_live_ones_kept() {
    let rig = rig::rig(Duration::from_secs(2)).await;
    let other = helpers::instance("other");
    // Two runs admitted with a 2 s lease and given containers of another instance; once
    // both leases expired, one run gets a new live attempt. The live run has a container of
    // its dead attempt 1, one of its live attempt 2 and one without an attempt label (an
    // older runner's: the lease decides).
    let dead = rig.register(pb::RunKind::Plan, "staging", 1, None).await;
    let live = rig.register(pb::RunKind::Plan, "staging", 1, None).await;
    rig.coord.admit(&dead).await;
    let (live_run, _) = rig.coord.admit(&live).await;
    let client = rig.coord.client();
    let docker = bollard::Docker::connect_with_defaults().unwrap();
    for (run, attempt) in [
        (&dead, Some("1")),
        (&live, Some("1")),
        (&live, Some("2")),
        (&live, None),
    ] {
        let mut labels = std::collections::HashMap::from([
            ("cairn.run_id".to_owned(), run.clone()),
            ("cairn.runner_instance".to_owned(), other.to_string()),
        ]);
        if let Some(attempt) = attempt {
            labels.insert("cairn.attempt".to_owned(), attempt.to_owned());
        }
        docker
            .create_container(
                None::<bollard::query_parameters::CreateContainerOptions>,
                bollard::models::ContainerCreateBody {
                    image: Some(helpers::image()),
                    cmd: Some(vec!["version".into()]),
                    labels: Some(labels),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    // Both leases expired (renewal is refused); the live run gets attempt 2.
    for run in [&dead, &live] {
        rig.wait_until("the lease expired", WITHIN, || async {
            !rig.get_run(run).await.lease_live
        })
        .await;
    }
    client.renew(&live_run).await.unwrap_err();
    rig.coord.admit(&live).await;

    let runner = rig.start_runner("reaper", "").await;
    assert_eq!(
        containers_of(&dead).await,
        0,
        "a dead run's container was kept"
    );
    let mut kept = rig::container_attempts(&live).await;
    kept.sort();
    assert_eq!(
        kept,
        ["", "2"],
        "the dead attempt's container must go, the live attempt's stay"
    );
    runner.shutdown().await;
    // Clean up the live run's container ourselves.
    rig::remove_containers_of(&live).await;
}

#[tokio::test]
async fn a_fenced_state_gets_a_fenced_result_and_bad_requests_are_dropped() {
    let rig = rig::rig(Duration::from_secs(30)).await;
    let runner = rig.start_runner("fenced", "").await;
    // A request for a run the coordinator does not know, and garbage: dropped, no result.
    let unknown = uuid::Uuid::now_v7().to_string();
    rig.request(&unknown).await;
    rig.js
        .publish(rig.ns.runq(TARGET).unwrap(), "not protobuf".into())
        .await
        .unwrap()
        .await
        .unwrap();

    let run_id = rig.register(pb::RunKind::Apply, "staging", 1, None).await;
    {
        let mut conn = rig.coord.server.app().pool.acquire().await.unwrap();
        let fenced = cairn_state_coordinator::store::states::state_fence(
            &mut conn,
            rig.state_id.parse().unwrap(),
            0,
            "damage planted by the test",
        )
        .await
        .unwrap();
        assert!(fenced);
    }
    rig.request(&run_id).await;
    let result = rig.result(&run_id, WITHIN).await;
    assert_eq!(outcome(&result), pb::RunOutcome::Failed, "{result:#?}");
    assert_eq!(class(&result), rpb::ErrorClass::Fenced);
    assert_eq!(result.attempt, 0);
    assert!(rig.results(&unknown).await.is_empty());
    // The queue is empty: everything was acknowledged.
    let stream = rig.js.get_stream(rig.ns.runq_stream()).await.unwrap();
    let mut info = stream.clone();
    let state = info.info().await.unwrap().state.clone();
    assert_eq!(state.messages, 0, "{state:?}");
    runner.shutdown().await;
}

fn spawn_runner(rig: &rig::Rig, instance: &str, extra_env: &str) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_cairn-runner"));
    cmd.arg("serve")
        .envs(rig.env(instance, extra_env))
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    cmd.spawn().unwrap()
}

#[tokio::test]
async fn a_config_changed_between_plan_and_apply_is_refused_in_production() {
    let rig = rig::rig(Duration::from_secs(30)).await;
    let runner = rig.start_runner("config", "").await;
    let (plan_id, planned) = rig.run(pb::RunKind::Plan, "production", 1, None).await;
    assert_eq!(outcome(&planned), pb::RunOutcome::Succeeded, "{planned:#?}");
    // The apply carries another root config (two resources) than the one planned.
    let (_, applied) = rig
        .run(pb::RunKind::Apply, "production", 2, Some(&plan_id))
        .await;
    assert_eq!(outcome(&applied), pb::RunOutcome::Failed, "{applied:#?}");
    assert_eq!(class(&applied), rpb::ErrorClass::StalePlan);
    assert!(
        applied.stale_tags.iter().any(|t| t == "config hash"),
        "{applied:#?}"
    );
    assert!(
        applied.message.contains("config hash"),
        "{}",
        applied.message
    );
    assert_eq!(rig.coord.state(&rig.state_id).await.current_generation, 0);
    assert!(!rig.base.path().join("net1/network.json").exists());
    runner.shutdown().await;
}

/// A sensitive value of the plan (a sensitive root output): in the plan file and its JSON,
/// never in a result or a log line.
const CANARY_PLAN: &str = "canary-plan-secret-4471";

/// The rig's one-network root config with a sensitive output holding [`CANARY_PLAN`].
fn root_with_sensitive_output(rig: &rig::Rig) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "terraform": {"backend": {"http": {}}},
        "module": {"net1": {
            "source": "./modules/local/network",
            "name": "net1",
            "base_dir": rig.base_dir(),
        }},
        "output": {
            "config_path": {"value": "${module.net1.config_path}"},
            "api_key": {"value": CANARY_PLAN, "sensitive": true}
        }
    }))
    .unwrap()
}

fn time(t: Option<prost_types::Timestamp>) -> std::time::SystemTime {
    std::time::SystemTime::try_from(t.expect("timestamp set")).unwrap()
}

/// started_at is set, not before `not_before`, and not after finished_at.
fn assert_timed(r: &rpb::RunResult, not_before: std::time::SystemTime) {
    let started = time(r.started_at);
    let finished = time(r.finished_at);
    assert!(started >= not_before, "{r:#?}");
    assert!(started <= finished, "{r:#?}");
}

/// The published result is what the workflow binds an approval to: the saved plan's sha256
/// (the coordinator's, which GetMaskedPlan serves with the masked plan JSON), the base
/// generation and when the attempt started; the plan itself and its JSON stay off NATS.
#[tokio::test]
async fn a_plan_result_carries_the_stored_plans_sha256_base_generation_and_start() {
    let rig = rig::rig(Duration::from_secs(30)).await;
    let runner = rig.start_runner("sha", "").await;
    let mut runs = rig.coord.runs();
    let root = root_with_sensitive_output(&rig);

    // A plan on a new state: base generation 0.
    let requested = std::time::SystemTime::now();
    let (plan_id, planned) = rig
        .run_root(pb::RunKind::Plan, "production", root.clone(), None)
        .await;
    assert_eq!(outcome(&planned), pb::RunOutcome::Succeeded, "{planned:#?}");
    assert_eq!(planned.base_generation, 0);
    assert_timed(&planned, requested);
    let stored = runs
        .get_masked_plan(pb::GetMaskedPlanRequest {
            run_id: plan_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(planned.plan_sha256.len(), 64, "{planned:#?}");
    assert_eq!(planned.plan_sha256, stored.plan_sha256);
    assert_eq!(planned.plan_id, stored.plan_id);
    assert_eq!(stored.base_generation, 0);
    // The masked plan JSON has the sensitive value masked, the rest as planned.
    let masked: serde_json::Value = serde_json::from_slice(&stored.masked_plan_json).unwrap();
    assert_eq!(
        masked["output_changes"]["api_key"]["after"],
        cairn_tofu::SENSITIVE_MARKER,
        "{masked:#}"
    );
    assert!(
        masked["resource_changes"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );
    assert!(!stored.masked_plan_json.is_empty());
    assert!(
        !String::from_utf8_lossy(&stored.masked_plan_json).contains(CANARY_PLAN),
        "the masked plan has the sensitive value"
    );

    // The apply takes exactly that plan (its bytes have the stored sha256), from generation 0.
    let requested = std::time::SystemTime::now();
    let (apply_id, applied) = rig
        .run_root(
            pb::RunKind::Apply,
            "production",
            root.clone(),
            Some(&plan_id),
        )
        .await;
    assert_eq!(outcome(&applied), pb::RunOutcome::Succeeded, "{applied:#?}");
    assert_eq!(applied.base_generation, 0);
    assert_eq!(applied.final_generation, 1);
    assert!(applied.plan_sha256.is_empty(), "{applied:#?}");
    assert_timed(&applied, requested);

    // The next plan starts from generation 1.
    let (replan_id, replanned) = rig
        .run_root(pb::RunKind::Plan, "production", root, None)
        .await;
    assert_eq!(
        outcome(&replanned),
        pb::RunOutcome::Succeeded,
        "{replanned:#?}"
    );
    assert_eq!(replanned.base_generation, 1);
    let restored = runs
        .get_masked_plan(pb::GetMaskedPlanRequest {
            run_id: replan_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replanned.plan_sha256, restored.plan_sha256);
    assert_eq!(restored.base_generation, 1);

    // Plans never travel on NATS: no stored result (in its encoded bytes) nor log line
    // has the plan's sensitive value or its JSON.
    for run in [&plan_id, &apply_id, &replan_id] {
        for r in rig.results(run).await {
            let bytes = r.encode_to_vec();
            for needle in [CANARY_PLAN, "output_changes", "resource_changes"] {
                assert!(
                    !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                    "the result of {run} has {needle:?}: {r:#?}"
                );
            }
        }
        for l in rig.log_lines(run).await {
            assert!(!l.text.contains(CANARY_PLAN), "{l:?}");
        }
    }

    // A redelivered request of the finished plan run publishes its result again (the stream
    // keeps the first under its Nats-Msg-Id; a subscriber sees the publish) with what the
    // coordinator still knows: the plan's id and sha256 and the base generation; not when it
    // started.
    let mut sub = rig
        .nats
        .subscribe(rig.ns.runres(&replan_id).unwrap())
        .await
        .unwrap();
    rig.nats.flush().await.unwrap();
    rig.request(&replan_id).await;
    let again = tokio::time::timeout(WITHIN, futures::StreamExt::next(&mut sub))
        .await
        .expect("the result published again")
        .unwrap();
    let again = rpb::RunResult::decode(again.payload).unwrap();
    assert_eq!(outcome(&again), pb::RunOutcome::Succeeded, "{again:#?}");
    assert_eq!(again.attempt, replanned.attempt);
    assert_eq!(again.plan_id, replanned.plan_id);
    assert_eq!(again.plan_sha256, replanned.plan_sha256);
    assert_eq!(again.base_generation, 1);
    assert_eq!(again.started_at, None);
    assert!(again.finished_at.is_some());
    assert_eq!(rig.results(&replan_id).await.len(), 1);
    runner.shutdown().await;
}
