//! The emulator against the real state coordinator (spawned in-process on a fresh database,
//! NATS prefix, bucket and KMS key): lock conflicts, -lock-timeout, a stale saved plan, a 503
//! storm the retries ride out, a crash that leaves a lock behind until a new attempt is
//! admitted after the lease expired, and the backend over TLS with mTLS (the coordinator's
//! public backend URL an https front with certificates made at test time).
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_proto::state as pb;
use cairn_state_coordinator::Server;
use cairn_state_coordinator::testing::{Fixtures, RunSpec, aws_edges, start, test_config};
use cairn_testkit::{Fault, FaultProxy, TestAws, TestKeys, TestNats};
use common::{Run, Work};
use serde_json::Value;

struct App {
    server: Server,
    _keys: TestKeys,
    _db: cairn_db::TestDatabase,
    _aws: TestAws,
    _nats: TestNats,
    kms_proxy: FaultProxy,
    fx: Fixtures,
}

/// What a runner hands tofu for one attempt.
#[derive(Clone, Debug)]
struct Attempt {
    run_id: String,
    attempt: u32,
    token: String,
    address: String,
    lock_address: String,
    unlock_address: String,
}

async fn spawn_app(lease: Duration) -> App {
    spawn_app_behind(lease, None).await
}

/// The coordinator handing out `public_http_url` as its backend's address (a TLS front).
async fn spawn_app_behind(lease: Duration, public_http_url: Option<String>) -> App {
    cairn_testkit::init_tracing();
    let db = cairn_testkit::fresh_database().await;
    let aws = TestAws::create().await;
    let nats = cairn_testkit::connect_nats().await;
    let keys = TestKeys::new();
    let kms_proxy = FaultProxy::start_for_url(&aws.endpoint)
        .await
        .expect("kms proxy");
    let config = cairn_state_coordinator::Config {
        run_lease: lease,
        // No cached data keys: every state read and write goes to KMS (the storm test).
        key_cache_size: 0,
        key_cache_ttl: Duration::from_secs(1),
        public_http_url,
        ..test_config(&db, &nats, &aws, &keys)
    };
    let edges = aws_edges(&aws, &aws.endpoint, &kms_proxy.url_for(&aws.endpoint));
    let (server, grpc) = start(config, edges).await;
    let fx = Fixtures::new(grpc, keys.service_token());
    App {
        server,
        _keys: keys,
        _db: db,
        _aws: aws,
        _nats: nats,
        kms_proxy,
        fx,
    }
}

impl App {
    async fn create_state(&self, name: &str) -> String {
        self.fx.create_state(name).await
    }

    async fn current_generation(&self, state_id: &str) -> u64 {
        self.fx.state(state_id).await.current_generation
    }

    async fn register(&self, state_id: &str, kind: pb::RunKind) -> String {
        let spec = RunSpec {
            root_config: CONFIG.as_bytes().to_vec(),
            ..RunSpec::default()
        };
        self.fx.register_of(state_id, kind, "dev", &spec).await
    }

    async fn admit(&self, run_id: &str) -> Result<Attempt, tonic::Status> {
        let a = self.fx.admit(run_id).await?;
        let b = a.backend.expect("backend addresses");
        Ok(Attempt {
            run_id: a.run_id,
            attempt: a.attempt,
            token: a.run_token,
            address: b.address,
            lock_address: b.lock_address,
            unlock_address: b.unlock_address,
        })
    }

    async fn start(&self, state_id: &str, kind: pb::RunKind) -> Attempt {
        let run = self.register(state_id, kind).await;
        self.admit(&run).await.expect("admit")
    }

    async fn finish(&self, a: &Attempt, outcome: pb::RunOutcome) {
        self.fx.finish(&a.run_id, a.attempt, outcome, "").await;
    }
}

const CONFIG: &str = r#"
terraform {
  backend "http" {}
}

variable "v" {
  type    = string
  default = "one"
}

resource "terraform_data" "a" {
  input = var.v
}

resource "terraform_data" "b" {
  input = "${terraform_data.a.output}-b"
}

resource "terraform_data" "c" {
  input = "${terraform_data.b.output}-c"
}

output "c" {
  value = terraform_data.c.output
}
"#;

/// A work dir with the config, initialised, and the attempt's TF_HTTP_* settings.
fn work_for(a: &Attempt) -> Work {
    let mut w = Work::new();
    w.write("main.tf", CONFIG);
    w.ok(&["init", "-input=false"], 0);
    set_attempt(&mut w, a);
    w
}

fn set_attempt(w: &mut Work, a: &Attempt) {
    w.env.retain(|(k, _)| !k.starts_with("TF_HTTP_"));
    w.set("TF_HTTP_ADDRESS", &a.address);
    w.set("TF_HTTP_LOCK_ADDRESS", &a.lock_address);
    let unlock = if a.unlock_address.is_empty() {
        &a.lock_address
    } else {
        &a.unlock_address
    };
    w.set("TF_HTTP_UNLOCK_ADDRESS", unlock);
    w.set("TF_HTTP_USERNAME", "run");
    w.set("TF_HTTP_PASSWORD", &a.token);
    w.set("TF_HTTP_RETRY_MAX", "8");
    w.set("TF_HTTP_RETRY_WAIT_MIN", "1");
    w.set("TF_HTTP_RETRY_WAIT_MAX", "2");
}

/// Runs tofu without blocking the runtime the coordinator lives on.
async fn tofu(w: &Work, args: &[&str]) -> Run {
    let out = tokio::process::Command::from(w.command(args))
        .output()
        .await
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

async fn tofu_ok(w: &Work, args: &[&str], code: i32) -> Run {
    let r = tofu(w, args).await;
    assert_eq!(
        r.code,
        code,
        "tofu {args:?} exited {} (want {code}):\n{}",
        r.code,
        r.all()
    );
    r
}

async fn pull(w: &Work) -> Value {
    tofu_ok(w, &["state", "pull"], 0).await.json()
}

/// The current state, read through a fresh read-only (preview) attempt.
async fn read_state(app: &App, state: &str) -> Value {
    let p = app.start(state, pb::RunKind::Preview).await;
    let w = work_for(&p);
    let st = pull(&w).await;
    app.finish(&p, pb::RunOutcome::Succeeded).await;
    st
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_is_reported_and_lock_timeout_waits_for_it() {
    let app = spawn_app(Duration::from_secs(60)).await;
    let state = app.create_state("lock-conflict").await;

    // Run A applies slowly and holds the lock meanwhile.
    let a = app.start(&state, pb::RunKind::Apply).await;
    let mut wa = work_for(&a);
    wa.set("TOFU_SIM_RESOURCE_DELAY", "1500ms");
    let wa = Arc::new(wa);
    let wa2 = wa.clone();
    let slow =
        tokio::spawn(async move { tofu(&wa2, &["apply", "-auto-approve", "-input=false"]).await });

    // Run B's plan meets the lock: 423 with A's LockInfo, reported as OpenTofu does.
    let b = app.start(&state, pb::RunKind::Plan).await;
    let wb = work_for(&b);
    let deadline = Instant::now() + Duration::from_secs(20);
    let conflict = loop {
        let r = tofu(&wb, &["plan", "-input=false"]).await;
        if r.code == 1 && r.all().contains("already locked") {
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "B never met A's lock:\n{}",
            r.all()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        conflict.all().contains("Error acquiring the state lock"),
        "{}",
        conflict.all()
    );
    assert!(
        conflict
            .all()
            .contains("HTTP remote state already locked: ID=")
    );
    assert!(conflict.all().contains("Operation: OperationTypeApply"));

    let ra = slow.await.unwrap();
    assert_eq!(ra.code, 0, "{}", ra.all());
    app.finish(&a, pb::RunOutcome::Succeeded).await;
    assert_eq!(pull(&wb).await["outputs"]["c"]["value"], "one-b-c");

    // -lock-timeout: C holds the lock (a LOCK of its own); D's plan waits, then plans.
    let c = app.start(&state, pb::RunKind::Plan).await;
    let d = app.start(&state, pb::RunKind::Plan).await;
    let wc = work_for(&c);
    let wd = work_for(&d);
    let holder = serde_json::json!({"ID": "c-holds-it", "Operation": "OperationTypePlan", "Info": "", "Who": "test@host", "Version": "1.12.6", "Created": "2026-11-29T12:00:00Z", "Path": ""});
    let send = |method: &'static str, body: Value, at: &Attempt| {
        let url = at.lock_address.clone();
        let token = at.token.clone();
        async move {
            let out = tokio::process::Command::new("curl")
                .args([
                    "-s",
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                    "-X",
                    method,
                    "-u",
                    &format!("run:{token}"),
                    "-H",
                    "Content-Type: application/json",
                    "--data-binary",
                    &body.to_string(),
                    &url,
                ])
                .output()
                .await
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        }
    };
    assert_eq!(send("LOCK", holder.clone(), &c).await, "200");
    let started = Instant::now();
    let waiter = tokio::spawn(async move {
        tofu(
            &wd,
            &[
                "plan",
                "-input=false",
                "-lock-timeout=60s",
                "-detailed-exitcode",
            ],
        )
        .await
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!waiter.is_finished(), "D waits for the lock");
    assert_eq!(send("UNLOCK", holder, &c).await, "200");
    let rd = waiter.await.unwrap();
    assert_eq!(
        rd.code,
        0,
        "no changes once the lock is free:\n{}",
        rd.all()
    );
    assert!(started.elapsed() >= Duration::from_secs(3));
    drop(wc);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_plan_is_refused_once_the_state_moved_on() {
    let app = spawn_app(Duration::from_secs(60)).await;
    let state = app.create_state("stale-plan").await;
    let first = app.start(&state, pb::RunKind::Apply).await;
    let w = work_for(&first);
    tofu_ok(&w, &["apply", "-auto-approve", "-input=false"], 0).await;
    app.finish(&first, pb::RunOutcome::Succeeded).await;
    let gen_after_first = app.current_generation(&state).await;

    // A plan, saved.
    let p = app.start(&state, pb::RunKind::Plan).await;
    let mut wp = work_for(&p);
    tofu_ok(
        &wp,
        &[
            "plan",
            "-input=false",
            "-var=v=two",
            "-out=tfplan",
            "-detailed-exitcode",
        ],
        2,
    )
    .await;
    app.finish(&p, pb::RunOutcome::Succeeded).await;

    // Another apply changes the state meanwhile.
    let other = app.start(&state, pb::RunKind::Apply).await;
    let wo = work_for(&other);
    tofu_ok(&wo, &["apply", "-auto-approve", "-var=v=three"], 0).await;
    app.finish(&other, pb::RunOutcome::Succeeded).await;
    let gen_after_other = app.current_generation(&state).await;
    assert!(gen_after_other > gen_after_first);

    // The saved plan's apply, in a fresh attempt: refused in OpenTofu's words, nothing written.
    let apply = app.start(&state, pb::RunKind::Apply).await;
    set_attempt(&mut wp, &apply);
    let r = tofu_ok(&wp, &["apply", "-input=false", "tfplan"], 1).await;
    assert!(r.all().contains("Saved plan is stale"), "{}", r.all());
    assert!(r.all().contains("The given plan file can no longer be applied because the state was changed by another operation after the plan was created."));
    app.finish(&apply, pb::RunOutcome::Failed).await;
    assert_eq!(app.current_generation(&state).await, gen_after_other);
    assert_eq!(
        read_state(&app, &state).await["outputs"]["c"]["value"],
        "three-b-c"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retries_ride_out_a_503_storm() {
    let app = spawn_app(Duration::from_secs(60)).await;
    let state = app.create_state("storm").await;
    let a = app.start(&state, pb::RunKind::Apply).await;
    let mut w = work_for(&a);
    w.set("TF_LOG", "DEBUG");
    // KMS unreachable: the coordinator answers 503 to the write until it heals.
    app.kms_proxy.set(Fault::Cut);
    let w = Arc::new(w);
    let w2 = w.clone();
    let run =
        tokio::spawn(async move { tofu(&w2, &["apply", "-auto-approve", "-input=false"]).await });
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!run.is_finished(), "tofu is still retrying");
    app.kms_proxy.set(Fault::None);
    let r = run.await.unwrap();
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stderr.contains("retrying"),
        "the storm was seen and retried:\n{}",
        r.stderr
    );
    app.finish(&a, pb::RunOutcome::Succeeded).await;
    let st = read_state(&app, &state).await;
    assert_eq!(st["serial"], 1);
    assert_eq!(st["outputs"]["c"]["value"], "one-b-c");
    assert_eq!(
        app.current_generation(&state).await,
        1,
        "one generation despite resent POSTs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_leaves_the_lock_until_a_new_attempt_is_admitted() {
    let lease = Duration::from_secs(4);
    let app = spawn_app(lease).await;
    let state = app.create_state("crash").await;
    let a1 = app.start(&state, pb::RunKind::Apply).await;
    let mut w = work_for(&a1);
    w.set("TF_STATE_PERSIST_INTERVAL", "0");
    w.set("TOFU_SIM_CRASH_MID_APPLY", "1");
    let r = tofu_ok(&w, &["apply", "-auto-approve", "-input=false"], 86).await;
    assert!(r.stderr.contains("simulated crash"), "{}", r.all());
    w.env.retain(|(k, _)| !k.starts_with("TOFU_SIM_"));
    assert_eq!(
        app.current_generation(&state).await,
        1,
        "one intermediate write before the crash"
    );

    // The lock stays: another run is refused with the crashed attempt's LockInfo.
    let other = app.start(&state, pb::RunKind::Plan).await;
    let wo = work_for(&other);
    let r = tofu_ok(&wo, &["plan", "-input=false"], 1).await;
    assert!(r.all().contains("already locked"), "{}", r.all());

    // No new attempt of the crashed run while its lease runs.
    let early = app.admit(&a1.run_id).await;
    assert!(
        early.is_err(),
        "admitted attempt 2 before attempt 1's lease expired"
    );

    // After the lease: attempt 2 is admitted, the lock is freed, and it applies the rest.
    tokio::time::sleep(lease + Duration::from_millis(500)).await;
    let a2 = app
        .admit(&a1.run_id)
        .await
        .expect("attempt 2 after the lease expired");
    assert_eq!(a2.attempt, 2);
    set_attempt(&mut w, &a2);
    tofu_ok(&w, &["apply", "-auto-approve", "-input=false"], 0).await;
    app.finish(&a2, pb::RunOutcome::Succeeded).await;
    let st = read_state(&app, &state).await;
    assert_eq!(st["resources"].as_array().unwrap().len(), 3);
    assert_eq!(st["outputs"]["c"]["value"], "one-b-c");

    // Attempt 1's token is refused now.
    let mut stale = Work::new();
    stale.write("main.tf", CONFIG);
    stale.ok(&["init"], 0);
    set_attempt(&mut stale, &a1);
    let r = tofu(&stale, &["plan", "-input=false"]).await;
    assert_eq!(r.code, 1, "{}", r.all());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_with_the_ca_and_a_client_certificate_the_state_is_committed() {
    use common::test_ca::{Ca, server_config, tls_front};
    let ca = Ca::new("coordinator-ca");
    // The front listens before the coordinator starts (its address is the public backend
    // URL); its upstream, the coordinator's plain listener, is known after.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let front = listener.local_addr().unwrap();
    let app = spawn_app_behind(Duration::from_secs(60), Some(format!("https://{front}"))).await;
    tls_front(
        listener,
        server_config(&ca.server(), Some(&ca)),
        app.server.http_addr(),
    );
    let state = app.create_state("over-tls").await;
    let client = ca.client();

    let a = app.start(&state, pb::RunKind::Apply).await;
    assert!(a.address.starts_with("https://127.0.0.1:"), "{}", a.address);
    let mut w = work_for(&a);
    w.set("TF_HTTP_CLIENT_CA_CERTIFICATE_PEM", &ca.pem());
    w.set("TF_HTTP_CLIENT_CERTIFICATE_PEM", &client.cert);
    w.set("TF_HTTP_CLIENT_PRIVATE_KEY_PEM", &client.key);
    tofu_ok(&w, &["apply", "-auto-approve", "-input=false"], 0).await;
    app.finish(&a, pb::RunOutcome::Succeeded).await;
    assert_eq!(app.current_generation(&state).await, 1);

    // A wrong CA: refused before any request, nothing committed.
    let other = Ca::new("someone-else");
    let b = app.start(&state, pb::RunKind::Apply).await;
    let mut w = work_for(&b);
    w.set("TF_HTTP_CLIENT_CA_CERTIFICATE_PEM", &other.pem());
    w.set("TF_HTTP_CLIENT_CERTIFICATE_PEM", &client.cert);
    w.set("TF_HTTP_CLIENT_PRIVATE_KEY_PEM", &client.key);
    w.set("TF_VAR_v", "two");
    let r = tofu_ok(&w, &["apply", "-auto-approve", "-input=false"], 1).await;
    assert!(
        r.stderr.contains(
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        ),
        "{}",
        r.all()
    );
    app.finish(&b, pb::RunOutcome::Failed).await;
    assert_eq!(app.current_generation(&state).await, 1);
}
