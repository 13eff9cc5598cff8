//! Chaos: deployments across several instances while a driver SIGKILLs a random service
//! (deployments, drift, runner, coordinator, templates, tenancy) at random moments and restarts it.
//! At the end every deployment is terminal; after one clean redeploy of every instance its
//! files on disk match its state's outputs; no generation is lost or duplicated; no lock,
//! slot or container is left.
//!
//! Seeded and reproducible: the seed is printed first (`CAIRN_CHAOS_SEED=<seed>` repeats a
//! run's choices). CI runs a short run; the full one (30 deployments across 5 instances):
//! `CAIRN_CHAOS_DEPLOYMENTS=30 CAIRN_CHAOS_INSTANCES=5 deploy/local/test.sh -p
//! cairn-integration-tests -E 'test(chaos)'`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cairn_integration_tests::cli::{Cli, Run};
use cairn_integration_tests::platform::{Options, Platform, Svc};
use cairn_integration_tests::seed::Seeded;
use cairn_integration_tests::world::{self, Rows};
use cairn_integration_tests::{DB_PASSWORD_REF, repo};
use cairn_sdk::{Cairn, Credential, Endpoint};
use serde_json::Value;
use tokio::sync::Mutex;

const TERMINAL: [&str; 5] = ["succeeded", "failed", "cancelled", "rejected", "expired"];

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs a CLI command until it succeeds (services come and go), at most `within`.
async fn until_ok(cli: &Cli, args: &[&str], within: Duration) -> Run {
    let deadline = Instant::now() + within;
    loop {
        let r = cli.run(args).await;
        if r.code == 0 || Instant::now() > deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Requests a deployment of `instance` (one idempotency key, re-sent until the platform
/// answers) and waits until it is terminal; returns its final status.
async fn deploy_and_settle(cli: &Cli, instance: &str, replicas: u64, key: &str) -> String {
    let param = format!("replicas={replicas}");
    let deadline = Instant::now() + Duration::from_secs(600);
    let id = loop {
        let r = cli
            .run(&[
                "deploy",
                instance,
                "--param",
                &param,
                "--idempotency-key",
                key,
                "-o",
                "json",
            ])
            .await;
        if r.code == 0 {
            break r.json()["deployment_id"].as_str().unwrap().to_owned();
        }
        // Refusals no retry changes (the platform answered, and said no).
        for code in [
            "INVALID_ARGUMENT",
            "PERMISSION_DENIED",
            "NOT_FOUND",
            "UNAUTHENTICATED",
        ] {
            assert!(
                !r.stderr.contains(&format!("({code}")),
                "deploy {instance} refused: {}",
                r.describe()
            );
        }
        assert!(
            Instant::now() < deadline,
            "deploy {instance} never accepted: {}",
            r.describe()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    loop {
        let r = cli.run(&["deployments", "get", &id, "-o", "json"]).await;
        if r.code == 0 {
            let status = r.json()["status"].as_str().unwrap_or_default().to_owned();
            if TERMINAL.contains(&status.as_str()) {
                return status;
            }
        }
        assert!(
            Instant::now() < deadline,
            "deployment {id} of {instance} never ended"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deployments_converge_while_services_are_killed_at_random() {
    let seed = Seeded::seed_from_env();
    eprintln!("chaos seed = {seed} (CAIRN_CHAOS_SEED={seed} repeats this run)");
    let instances = setting("CAIRN_CHAOS_INSTANCES", 2).max(1);
    let deployments = setting("CAIRN_CHAOS_DEPLOYMENTS", 6).max(instances);

    let mut p = Platform::start(Options {
        run_lease: "8s",
        ack_wait: "4s",
        ..Options::default()
    })
    .await
    .expect("start the platform");
    let cli = p.cli("owner").await.with_token(&p.owner_api_token);
    let dir = p.targets_dir.join("local");
    let target = cli
        .json(&[
            "targets",
            "create",
            "local",
            "--local-dir",
            dir.to_str().unwrap(),
            "--max-concurrent",
            "2",
        ])
        .await;
    let target_id = target["target_id"].as_str().unwrap().to_owned();
    let credential_ref = target["credential_ref"].as_str().unwrap().to_owned();
    p.serve_targets(&[(target_id, credential_ref)])
        .await
        .expect("runner");
    let web_stack = repo("modules/examples/web-stack/template.yaml");
    cli.json(&[
        "templates",
        "create",
        "web-stack",
        "-f",
        web_stack.to_str().unwrap(),
    ])
    .await;
    let names: Vec<String> = (0..instances).map(|i| format!("app{i}")).collect();
    let password = format!("db_admin_password={DB_PASSWORD_REF}");
    for name in &names {
        cli.json(&[
            "instances",
            "create",
            name,
            "--template",
            "web-stack",
            "--target",
            "local",
            "--env",
            "development",
            "--param",
            &format!("app_name={name}"),
            "--param",
            &password,
        ])
        .await;
    }

    // The driver: kill a random service at a random moment, start it again a moment later.
    let platform = Arc::new(Mutex::new(p));
    let done = Arc::new(AtomicBool::new(false));
    let driver = {
        let platform = platform.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let mut rng = Seeded::new(seed);
            let victims = [
                Svc::Deployments,
                Svc::Drift,
                Svc::Runner,
                Svc::Coordinator,
                Svc::Templates,
                Svc::Tenancy,
            ];
            let mut kills = Vec::new();
            while !done.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(1500 + rng.below(3000))).await;
                if done.load(Ordering::SeqCst) {
                    break;
                }
                let victim = *rng.pick(&victims);
                let down = Duration::from_millis(rng.below(1500));
                let mut p = platform.lock().await;
                p.kill(victim).await;
                tokio::time::sleep(down).await;
                p.start_service(victim).await.expect("restart after a kill");
                kills.push(victim.name());
            }
            kills
        })
    };

    // The requesters: per instance, one deployment after another (each a new replica count).
    let per_instance = deployments.div_ceil(instances);
    let mut requesters = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let cli = cli.clone();
        let name = name.clone();
        requesters.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for n in 0..per_instance {
                let replicas = 1 + ((i + n) % 5) as u64;
                let key = format!("chaos-{name}-{n}");
                statuses.push(deploy_and_settle(&cli, &name, replicas, &key).await);
            }
            statuses
        }));
    }
    let mut statuses = Vec::new();
    for r in requesters {
        statuses.extend(r.await.expect("a requester panicked"));
    }
    done.store(true, Ordering::SeqCst);
    let kills = driver.await.expect("the driver panicked");
    eprintln!("chaos seed {seed}: kills {kills:?}; deployment outcomes {statuses:?}");
    let mut p = Arc::try_unwrap(platform)
        .unwrap_or_else(|_| panic!("the driver still holds the platform"))
        .into_inner();
    p.check_alive().expect("every service runs after the chaos");
    assert_eq!(statuses.len(), per_instance * instances);
    let rows = Rows::connect(&p.db).await;
    assert_eq!(rows.unfinished_deployments().await, 0, "seed {seed}");

    // One clean redeploy of every instance converges it: its files match its state.
    let cairn = Cairn::builder()
        .endpoint(Endpoint::Tenancy, p.url(Svc::Tenancy))
        .endpoint(Endpoint::State, p.url(Svc::Coordinator))
        .credential(Credential::ApiToken(p.owner_api_token.clone()))
        .build()
        .expect("an SDK client");
    for (i, name) in names.iter().enumerate() {
        // A count no chaos deployment used (those are 1..=5), within the template's 1..=10.
        let replicas = 6 + (i % 5) as u64;
        let status = deploy_and_settle(&cli, name, replicas, &format!("clean-{name}")).await;
        assert_eq!(
            status, "succeeded",
            "seed {seed}: the clean redeploy of {name}"
        );
        let inst = until_ok(
            &cli,
            &["instances", "get", name, "-o", "json"],
            Duration::from_secs(30),
        )
        .await
        .ok()
        .json();
        let resources = inst["resources"].as_array().unwrap();
        assert_eq!(resources.len(), 4, "{inst:#}");
        for r in resources {
            assert_eq!(r["status"], "applied", "seed {seed}: {r:#}");
            let outputs = world::outputs(&cairn, r["state_id"].as_str().unwrap()).await;
            for (key, value) in &outputs {
                if key.ends_with("_path") {
                    let path = value.as_str().unwrap();
                    assert!(
                        std::path::Path::new(path).is_file(),
                        "seed {seed}: {name}/{}: output {key} names {path}, which is not there",
                        r["name"]
                    );
                }
            }
            if r["name"] == "web" {
                assert_eq!(
                    outputs.get("replicas"),
                    Some(&Value::from(replicas)),
                    "seed {seed}"
                );
                let file = dir.join(format!("{name}/service.json"));
                let service: Value =
                    serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
                assert_eq!(
                    service["replicas"],
                    replicas,
                    "seed {seed}: {}",
                    file.display()
                );
            }
        }
    }

    // Nothing lost, nothing twice, nothing held.
    assert_eq!(
        rows.duplicated_serials().await,
        0,
        "seed {seed}: a write stored twice"
    );
    assert_eq!(
        rows.inconsistent_states().await,
        0,
        "seed {seed}: a generation lost"
    );
    assert_eq!(rows.unfinished_deployments().await, 0, "seed {seed}");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (locks, slots) = (rows.locks().await, rows.slots().await);
        let containers = world::containers_of(&p.runner_instance).await;
        if locks == 0 && slots == 0 && containers.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: left behind: {locks} locks, {slots} slots, containers {containers:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
