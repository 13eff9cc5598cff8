//! A user's whole lifecycle through the `cairn` binary, against every service running as a
//! real process: login, target, template (a malformed one refused), instance, deploy, update
//! (only what changed applies), preview (nothing changes), a production change that awaits
//! approval (the requester's own approval refused, another approver's applies), drift found
//! by a scan with one signed webhook and resolved by the next deployment, destroy, and
//! the audit log showing each step with its actor. Every command's `--output json` parses;
//! a wrong token and another tenant's ids give one line and a non-zero exit. At the end no
//! lock, slot or container is left.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::Path;
use std::time::{Duration, Instant};

use cairn_integration_tests::cli::Cli;
use cairn_integration_tests::platform::{Options, Platform};
use cairn_integration_tests::receiver::Receiver;
use cairn_integration_tests::world::{self, Rows};
use cairn_integration_tests::{DB_PASSWORD_REF, repo};
use serde_json::Value;

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} is not there: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// The steps of a deployment view of `kind` for `resource` ("" for whole-deployment steps).
fn step<'a>(d: &'a Value, kind: &str, resource: &str) -> &'a Value {
    d["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|st| st["kind"] == kind && st["resource"] == resource)
        .unwrap_or_else(|| panic!("no {kind} step for {resource:?} in {d:#}"))
}

/// Waits until `check` holds (polling), failing with `what` after two minutes.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(120);
    while !check().await {
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until drift shows `resource` of `shop` with `status` and no scan in flight.
async fn wait_for_drift(
    cli: &Cli,
    resource: &str,
    status: &str,
    drift_of: &dyn Fn(Value, &str) -> (String, bool),
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let now = cli.json(&["drift", "status", "shop"]).await;
        let (got, scanning) = drift_of(now.clone(), resource);
        if got == status && !scanning {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{resource} never became {status}: {now:#}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn login_with_password(p: &Platform, user: &str, email: &str, password: &str) -> Cli {
    let cli = p.cli(user).await;
    cli.run_with_stdin(
        &[
            "login",
            "--tenant",
            "e2e",
            "--email",
            email,
            "--password-stdin",
        ],
        Some(&format!("{password}\n")),
    )
    .await
    .ok();
    cli
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_user_deploys_updates_approves_and_destroys_through_the_cli() {
    let mut p = Platform::start(Options::default())
        .await
        .expect("start the platform");
    let owner = p.cli("owner").await;

    // Login with an API token file; whoami says who we are.
    let token_file = p.dir.path().join("owner.token");
    std::fs::write(&token_file, format!("{}\n", p.owner_api_token)).unwrap();
    owner
        .run(&["login", "--api-token-file", token_file.to_str().unwrap()])
        .await
        .ok();
    let me = owner.json(&["whoami"]).await;
    assert_eq!(me["tenant_id"], p.tenant_id.as_str(), "{me:#}");
    assert_eq!(me["role"], "owner", "{me:#}");

    // Bad credentials and another tenant's ids: one line, non-zero, nothing shown.
    let wrong = owner.with_token("cairn_0000000000000000_not-a-real-token");
    let line = wrong.run(&["whoami"]).await;
    assert!(
        line.one_line_error().contains("UNAUTHENTICATED"),
        "{}",
        line.describe()
    );
    let other_tenant = uuid::Uuid::new_v4().to_string();
    let r = owner
        .run(&["--tenant-id", &other_tenant, "instances", "list"])
        .await;
    let msg = r.one_line_error().to_owned();
    assert!(
        msg.contains("PERMISSION_DENIED") || msg.contains("NOT_FOUND"),
        "{msg}"
    );

    // The target, then the runner serving it (its registry names the target's id).
    let shop_dir = p.targets_dir.join("local");
    let target = owner
        .json(&[
            "targets",
            "create",
            "local",
            "--local-dir",
            shop_dir.to_str().unwrap(),
            "--max-concurrent",
            "2",
        ])
        .await;
    let target_id = s(&target["target_id"]).to_owned();
    let credential_ref = s(&target["credential_ref"]).to_owned();
    assert_eq!(
        owner.json(&["targets", "get", "local"]).await["target_id"],
        target_id.as_str()
    );
    assert_eq!(
        owner
            .json(&["targets", "list"])
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
    p.serve_targets(&[(target_id.clone(), credential_ref)])
        .await
        .expect("start the runner");

    // A malformed template: file:line:col problems, a non-zero exit, nothing created.
    let bad = p.dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "name: bad\nresources:\n  web:\n    module: local/nonexistent\n    inputs: {}\n",
    )
    .unwrap();
    let v = owner
        .run(&["templates", "validate", "-f", bad.to_str().unwrap()])
        .await;
    assert_ne!(v.code, 0, "{}", v.describe());
    assert!(
        v.stderr
            .lines()
            .any(|l| l.starts_with(&format!("{}:4:", bad.display()))),
        "{}",
        v.describe()
    );
    let c = owner
        .run(&["templates", "create", "bad", "-f", bad.to_str().unwrap()])
        .await;
    assert_ne!(c.code, 0, "{}", c.describe());
    let web_stack = repo("modules/examples/web-stack/template.yaml");
    owner
        .json(&[
            "templates",
            "create",
            "web-stack",
            "-f",
            web_stack.to_str().unwrap(),
        ])
        .await;
    let templates = owner.json(&["templates", "list"]).await;
    let names: Vec<&str> = templates
        .as_array()
        .unwrap()
        .iter()
        .map(|t| s(&t["name"]))
        .collect();
    assert_eq!(
        names,
        ["web-stack"],
        "a refused template was created anyway"
    );
    assert_eq!(
        owner
            .json(&["templates", "versions", "web-stack"])
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // An instance, its first deployment: every resource applied, its files on the target.
    let password = format!("db_admin_password={DB_PASSWORD_REF}");
    let inst = owner
        .json(&[
            "instances",
            "create",
            "shop",
            "--template",
            "web-stack",
            "--target",
            "local",
            "--env",
            "development",
            "--param",
            "app_name=shop",
            "--param",
            &password,
        ])
        .await;
    assert_eq!(inst["status"], "pending", "{inst:#}");
    let first = owner.json(&["deploy", "shop", "--wait"]).await;
    assert_eq!(first["status"], "succeeded", "{first:#}");
    let service = read_json(&shop_dir.join("shop/service.json"));
    assert_eq!(service["replicas"], 1, "development's override: {service}");
    let got = owner.json(&["instances", "get", "shop"]).await;
    assert_eq!(got["status"], "active", "{got:#}");
    let resources = got["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 4, "{got:#}");
    for r in resources {
        assert_eq!(r["status"], "applied", "{r:#}");
        assert!(r["last_generation"].as_u64().unwrap() >= 1, "{r:#}");
    }

    // The instance's outputs: values from the state, the sensitive one withheld.
    let outputs = got["outputs"].as_array().expect("outputs");
    let output = |name: &str| {
        outputs
            .iter()
            .find(|o| o["name"] == name)
            .unwrap_or_else(|| panic!("no output {name}: {got:#}"))
    };
    let config_path = s(&output("service_config_path")["value"]).to_owned();
    assert_eq!(Path::new(&config_path), shop_dir.join("shop/service.json"));
    assert!(
        s(&output("url")["value"]).starts_with("http://shop."),
        "{got:#}"
    );
    let admin = output("database_admin_username");
    assert_eq!(admin["sensitive"], true, "{admin:#}");
    assert!(
        admin["value"].is_null(),
        "a sensitive output shown: {admin:#}"
    );

    // An update: only the web service plans and applies; the file shows the new value.
    let before = world::files(&shop_dir);
    let update = owner
        .json(&["deploy", "shop", "--param", "replicas=3", "--wait"])
        .await;
    assert_eq!(update["status"], "succeeded", "{update:#}");
    assert_eq!(
        step(&update, "apply", "web")["status"],
        "succeeded",
        "{update:#}"
    );
    for r in ["network", "database", "queue"] {
        assert_eq!(
            step(&update, "apply", r)["status"],
            "skipped",
            "{r}: {update:#}"
        );
    }
    let after = world::files(&shop_dir);
    assert_eq!(
        read_json(&shop_dir.join("shop/service.json"))["replicas"],
        3
    );
    for (path, content) in &before {
        if !path.starts_with("shop/service") {
            assert_eq!(
                after.get(path),
                Some(content),
                "{path} changed by an update of web only"
            );
        }
    }

    // Drift: a file edited by hand is found by a scan (one open finding); the next
    // deployment puts it back, and a scan then finds the instance in sync.
    let receiver = Receiver::start().await;
    let hook = owner
        .json(&[
            "webhooks",
            "create",
            "--url",
            &receiver.url(),
            "--events",
            "instance.drift_detected,instance.drift_resolved",
        ])
        .await;
    let secret = s(&hook["secret"]).to_owned();
    let listed = owner.run(&["webhooks", "list", "-o", "json"]).await.ok();
    assert!(
        !listed.stdout.contains(&secret),
        "a listed webhook shows its secret"
    );
    let queue_file = shop_dir.join("shop/queue.json");
    let queue_before = std::fs::read_to_string(&queue_file).unwrap();
    std::fs::write(&queue_file, "{\"edited\": \"by hand\"}\n").unwrap();
    owner.run(&["drift", "scan", "shop"]).await.ok();
    let drift_of = |status: Value, resource: &str| -> (String, bool) {
        let r = status["resources"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["resource"] == resource))
            .unwrap_or_else(|| panic!("no {resource} in {status:#}"))
            .clone();
        (s(&r["status"]).to_owned(), r["scanning"] == true)
    };
    wait_for_drift(&owner, "queue", "drift_detected", &drift_of).await;
    let findings = owner
        .json(&["drift", "findings", "--instance", "shop", "--open"])
        .await;
    let open: Vec<&Value> = findings.as_array().unwrap().iter().collect();
    assert_eq!(open.len(), 1, "{findings:#}");
    assert_eq!(open[0]["resource"], "queue", "{findings:#}");
    // The same drift scanned again is no news: no second finding (and, below, no second
    // webhook).
    let last_scan = |status: &Value| {
        status["resources"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["resource"] == "queue"))
            .map(|r| r["last_scan_at"].clone())
            .unwrap_or(Value::Null)
    };
    let first_scan = last_scan(&owner.json(&["drift", "status", "shop"]).await);
    owner.run(&["drift", "scan", "shop"]).await.ok();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let now = owner.json(&["drift", "status", "shop"]).await;
        if last_scan(&now) != first_scan
            && drift_of(now.clone(), "queue") == ("drift_detected".to_owned(), false)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the second scan never ended: {now:#}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let again = owner
        .json(&["drift", "findings", "--instance", "shop", "--open"])
        .await;
    assert_eq!(again, findings, "the same drift opened another finding");
    for r in ["network", "database", "web"] {
        assert_eq!(
            drift_of(owner.json(&["drift", "status", "shop"]).await, r).0,
            "in_sync",
            "{r}"
        );
    }
    let redeploy = owner.json(&["deploy", "shop", "--wait"]).await;
    assert_eq!(redeploy["status"], "succeeded", "{redeploy:#}");
    assert_eq!(std::fs::read_to_string(&queue_file).unwrap(), queue_before);
    owner.run(&["drift", "scan", "shop"]).await.ok();
    wait_for_drift(&owner, "queue", "in_sync", &drift_of).await;
    let findings = owner
        .json(&["drift", "findings", "--instance", "shop", "--open"])
        .await;
    assert_eq!(findings.as_array().unwrap().len(), 0, "{findings:#}");
    // Webhooks: one signed drift_detected (the repeated scan sent none), then drift_resolved,
    // in order (deliveries of a subscription go out one after another).
    let deadline = Instant::now() + Duration::from_secs(120);
    let hooks = loop {
        let got = receiver.received();
        if got
            .iter()
            .any(|r| r.json()["type"] == "instance.drift_resolved")
        {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "no drift_resolved webhook: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let types: Vec<String> = hooks
        .iter()
        .map(|r| s(&r.json()["type"]).to_owned())
        .collect();
    assert_eq!(
        types,
        ["instance.drift_detected", "instance.drift_resolved"],
        "{hooks:?}"
    );
    for h in &hooks {
        assert!(h.signed_with(&secret), "a bad signature: {h:?}");
        assert!(
            !h.signed_with("whsec_another"),
            "any secret verifies: {h:?}"
        );
        assert_eq!(h.json()["tenant"], p.tenant_id.as_str(), "{h:?}");
    }
    let after = world::files(&shop_dir);

    // A preview of a change plans it and changes nothing.
    let preview = owner
        .json(&["preview", "shop", "--param", "replicas=5", "--wait"])
        .await;
    assert_eq!(preview["status"], "succeeded", "{preview:#}");
    assert_eq!(world::files(&shop_dir), after, "a preview changed files");
    let plans = owner
        .json(&["deployments", "plans", s(&preview["deployment_id"])])
        .await;
    let web_plan = plans["plans"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["resource"] == "web"))
        .unwrap_or_else(|| panic!("no plan of web: {plans:#}"));
    assert!(
        web_plan["summary"]["change"].as_u64().unwrap()
            + web_plan["summary"]["add"].as_u64().unwrap()
            > 0,
        "{plans:#}"
    );

    // Production: a change that replaces the database awaits approval; the requester cannot
    // approve it; another approver can.
    let prod = owner
        .json(&[
            "instances",
            "create",
            "shop-prod",
            "--template",
            "web-stack",
            "--target",
            "local",
            "--env",
            "production",
            "--param",
            "app_name=prod",
            "--param",
            &password,
        ])
        .await;
    assert_eq!(prod["environment"], "production");
    owner
        .run_with_stdin(
            &[
                "users",
                "add",
                "approver@e2e.example",
                "--role",
                "approver",
                "--password-stdin",
            ],
            Some("approver-password-1\n"),
        )
        .await
        .ok();
    let approver = login_with_password(
        &p,
        "approver",
        "approver@e2e.example",
        "approver-password-1",
    )
    .await;
    let approver_id = s(&approver.json(&["whoami"]).await["subject"]).to_owned();
    let first_prod = owner
        .run(&["deploy", "shop-prod", "--wait", "-o", "json"])
        .await;
    if first_prod.code == 3 {
        let id = s(&first_prod.json()["deployment_id"]).to_owned();
        approver.run(&["approve", &id, "--yes"]).await.ok();
        approver.run(&["deployments", "watch", &id]).await.ok();
    } else {
        first_prod.clone().ok();
    }
    let replace = owner
        .run(&[
            "deploy",
            "shop-prod",
            "--param",
            "db_engine_version=17",
            "--wait",
            "-o",
            "json",
        ])
        .await
        .code(3);
    let d = replace.json();
    assert_eq!(d["status"], "awaiting_approval", "{d:#}");
    let id = s(&d["deployment_id"]).to_owned();
    let refused = owner.run(&["approve", &id, "--yes"]).await;
    assert!(
        refused.one_line_error().contains("PERMISSION_DENIED"),
        "{}",
        refused.describe()
    );
    let db_file = p.targets_dir.join("local/prod/database.json");
    assert_eq!(
        read_json(&db_file)["engine_version"],
        "16",
        "applied before approval"
    );
    let shown = approver.run(&["approve", &id, "--yes"]).await.ok();
    assert!(
        shown.stdout.contains(s(&d["plan_set_hash"])),
        "{}",
        shown.describe()
    );
    approver.run(&["deployments", "watch", &id]).await.ok();
    let approved = owner.json(&["deployments", "get", &id]).await;
    assert_eq!(approved["status"], "succeeded", "{approved:#}");
    assert_eq!(
        approved["approvals"][0]["by"],
        approver_id.as_str(),
        "{approved:#}"
    );
    assert_eq!(read_json(&db_file)["engine_version"], "17");
    // Watching the approved deployment again replays all of it, what followed the approval
    // too, in order (a watch ends at a parked status only while it is still parked).
    let replay = approver.run(&["deployments", "watch", &id]).await.ok();
    let at = |suffix: &str| {
        replay
            .stdout
            .lines()
            .position(|line| line.trim_end().ends_with(suffix))
            .unwrap_or_else(|| panic!("no line ending {suffix:?}: {}", replay.describe()))
    };
    let (parked, applied, done) = (
        at("deployment awaiting_approval"),
        at("database apply: succeeded"),
        at("deployment succeeded"),
    );
    assert!(parked < applied && applied < done, "{}", replay.describe());

    // Destroy: every file of the instance goes, the instance ends destroyed.
    let destroyed = owner.json(&["destroy", "shop", "--yes", "--wait"]).await;
    assert_eq!(destroyed["status"], "succeeded", "{destroyed:#}");
    assert!(
        world::files(&shop_dir.join("shop")).is_empty(),
        "files left: {:?}",
        world::files(&shop_dir.join("shop"))
    );
    assert_eq!(
        owner.json(&["instances", "get", "shop"]).await["status"],
        "destroyed"
    );
    owner.run(&["instances", "delete", "shop"]).await.ok();
    let list = owner.json(&["instances", "list"]).await;
    assert!(
        list.as_array().unwrap().iter().all(|i| i["name"] != "shop"),
        "{list:#}"
    );

    // The audit log holds each step with its actor.
    let me_id = s(&me["subject"]).to_owned();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let audit = owner.json(&["audit", "list", "--limit", "10000"]).await;
        let entries = audit.as_array().expect("an array");
        let has = |action: &str, actor: &str| {
            entries
                .iter()
                .any(|e| e["action"] == action && (actor.is_empty() || e["actor"] == actor))
        };
        if has("deployment.requested", &me_id)
            && has("deployment.approved", &approver_id)
            && has("target.created", &me_id)
            && has("deployment.succeeded", "")
        {
            break;
        }
        if Instant::now() > deadline {
            let seen: Vec<String> = entries
                .iter()
                .map(|e| format!("{} by {}", s(&e["action"]), e["actor"]))
                .collect();
            panic!(
                "the audit log lacks a step; it holds: {seen:#?} (owner {me_id}, approver {approver_id})"
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // Nothing left behind: no lock, no slot, no container, no unfinished deployment.
    let rows = Rows::connect(&p.db).await;
    eventually("no state lock is held", || async {
        rows.locks().await == 0
    })
    .await;
    assert_eq!(rows.slots().await, 0);
    assert_eq!(rows.unfinished_deployments().await, 0);
    assert_eq!(rows.duplicated_serials().await, 0);
    assert_eq!(rows.inconsistent_states().await, 0);
    let runner = p.runner_instance.clone();
    eventually("the runner removed its containers", || {
        let runner = runner.clone();
        async move { world::containers_of(&runner).await.is_empty() }
    })
    .await;
    p.check_alive().expect("every service still runs");
}
