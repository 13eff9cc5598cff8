//! Real crashes: the `cairn-state-coordinator` binary runs as a child process and is
//! SIGKILLed while tofu's POST waits at one write step (pending row, object put, before
//! commit, after commit before the response: `CAIRN_TEST_FAILPOINT_BLOCK`, compiled in with
//! the `testing` feature only). It is restarted on the same ports while tofu — the tofu-sim
//! emulator (test infrastructure, see integration/tofu-sim), with the runner's
//! `TF_HTTP_RETRY_MAX` and tofu's default waits — rides the crash out with its own retries:
//! exactly one generation per serial, and after a sweep no pending row and no object the
//! database does not reference.
//! Also: PostgreSQL cut through the fault proxy mid-commit answers tofu 503 and writes
//! nothing; tofu's retry commits exactly one generation once it is back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use cairn_proto::state as pb;
use cairn_state_coordinator::failpoints::{
    AFTER_COMMIT, AFTER_PENDING, AFTER_PUT, BEFORE_COMMIT, BLOCK_ENV, REACHED_ENV,
};
use cairn_state_coordinator::testing::Fixtures;
use cairn_storage::{FileObjectStore, ObjectStore};
use cairn_testkit::{Fault, FaultProxy, TestKeys, TestNats};
use tokio::time::Instant;
use uuid::Uuid;

/// `TF_HTTP_RETRY_MAX` as the runner sets it (services/runner, `HTTP_RETRY_MAX`); the waits
/// stay tofu's defaults (1 s doubling, at most 30 s).
const RETRY_MAX: &str = "8";

/// The root module every apply here runs: three chained resources and an output.
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

output "b" {
  value = terraform_data.b.output
}
"#;

/// tofu-sim: `CAIRN_TOFU_BIN`, or the static binary deploy/images/tofu-sim/build.sh builds
/// into the target directory (as the runner's tests find it).
fn tofu_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("CAIRN_TOFU_BIN") {
        return PathBuf::from(bin);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let bin = target.join("x86_64-unknown-linux-gnu/release/tofu");
    assert!(
        bin.is_file(),
        "no tofu binary: set CAIRN_TOFU_BIN or run deploy/images/tofu-sim/build.sh (expected {})",
        bin.display()
    );
    bin
}

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// Everything a coordinator process needs, kept across its restarts.
struct Harness {
    db: cairn_db::TestDatabase,
    nats: TestNats,
    keys: TestKeys,
    dir: cairn_testkit::TempDir,
    grpc: SocketAddr,
    http: SocketAddr,
    child: Option<tokio::process::Child>,
}

impl Harness {
    async fn new() -> Harness {
        cairn_testkit::init_tracing();
        Harness {
            db: cairn_testkit::fresh_database().await,
            nats: cairn_testkit::connect_nats().await,
            keys: TestKeys::new(),
            dir: cairn_testkit::temp_dir(),
            grpc: free_addr(),
            http: free_addr(),
            child: None,
        }
    }

    fn reached_file(&self) -> PathBuf {
        self.dir.path().join("failpoint-reached")
    }

    fn objects(&self) -> FileObjectStore {
        FileObjectStore::new(self.dir.path().join("objects"))
    }

    /// Starts the binary; `block` names the write step it blocks at; `sweep` makes the
    /// sweeper run every 200 ms with a 2 s pending TTL.
    async fn start(&mut self, block: Option<&str>, sweep: bool) {
        assert!(self.child.is_none());
        let _ = std::fs::remove_file(self.reached_file());
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_cairn-state-coordinator"));
        cmd.env("CAIRN_DATABASE_URL", &self.db.runtime_url)
            .env("CAIRN_DATABASE_MIGRATE_URL", &self.db.migrate_url)
            .env("CAIRN_NATS_URL", &self.nats.url)
            .env("CAIRN_NATS_PREFIX", &self.nats.prefix)
            .env("CAIRN_GRPC_ADDR", self.grpc.to_string())
            .env("CAIRN_HTTP_ADDR", self.http.to_string())
            .env(
                "CAIRN_OBJECT_STORE",
                format!("file://{}", self.dir.path().join("objects").display()),
            )
            .env(
                "CAIRN_KMS_KEY",
                format!("local:{}", self.dir.path().join("keys.json").display()),
            )
            .env("CAIRN_JWT_PUBLIC_KEYS_FILE", self.keys.jwks_path())
            .env("CAIRN_RUN_LEASE", "60s")
            .env("CAIRN_SWEEP_INTERVAL", if sweep { "200ms" } else { "1h" })
            .env("CAIRN_PENDING_TTL", if sweep { "2s" } else { "1h" })
            .env_remove(BLOCK_ENV)
            .env(REACHED_ENV, self.reached_file())
            .kill_on_drop(true);
        if let Some(point) = block {
            cmd.env(BLOCK_ENV, point);
        }
        self.child = Some(cmd.spawn().expect("spawn cairn-state-coordinator"));
        // Ready once the HTTP backend accepts connections (it binds after the gRPC server).
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if tokio::net::TcpStream::connect(self.http).await.is_ok()
                && tokio::net::TcpStream::connect(self.grpc).await.is_ok()
            {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("the coordinator exited during start-up: {status}");
            }
            assert!(Instant::now() < deadline, "the coordinator did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL, and wait until the process is gone.
    async fn kill(&mut self) {
        let mut child = self.child.take().expect("running");
        child.start_kill().unwrap();
        child.wait().await.unwrap();
    }

    /// Fixtures on a fresh channel to the running process, for `tenant` and `instance`.
    async fn fixtures(&self, tenant: Option<(Uuid, Uuid)>) -> Fixtures {
        let channel = cairn_testkit::connect_grpc(self.grpc).await;
        let mut fx = Fixtures::new(channel, self.keys.service_token());
        if let Some((tenant, instance)) = tenant {
            fx.tenant = tenant;
            fx.instance = instance;
        }
        fx
    }

    async fn wait_reached(&self, point: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if std::fs::read_to_string(self.reached_file())
                .is_ok_and(|s| s.lines().any(|l| l == point))
            {
                return;
            }
            assert!(Instant::now() < deadline, "{point} was not reached");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn pool(&self) -> sqlx::PgPool {
        cairn_db::connect(&cairn_db::PoolSettings::new(
            self.db.migrate_url.clone(),
            "state",
        ))
        .unwrap()
    }
}

/// A work directory with [`CONFIG`], initialised, and one attempt's `TF_HTTP_*` settings.
struct Tofu {
    dir: cairn_testkit::TempDir,
    env: Vec<(&'static str, String)>,
}

/// What a tofu command did.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Tofu {
    async fn new(attempt: &pb::AdmitRunResponse) -> Tofu {
        let dir = cairn_testkit::temp_dir();
        std::fs::write(dir.path().join("main.tf"), CONFIG).unwrap();
        let backend = attempt.backend.clone().unwrap();
        let unlock = if backend.unlock_address.is_empty() {
            backend.lock_address.clone()
        } else {
            backend.unlock_address
        };
        let tofu = Tofu {
            dir,
            env: vec![
                ("TF_IN_AUTOMATION", "1".to_owned()),
                ("TF_LOG", "DEBUG".to_owned()),
                ("TF_HTTP_ADDRESS", backend.address),
                ("TF_HTTP_LOCK_ADDRESS", backend.lock_address),
                ("TF_HTTP_UNLOCK_ADDRESS", unlock),
                ("TF_HTTP_USERNAME", "run".to_owned()),
                ("TF_HTTP_PASSWORD", attempt.run_token.clone()),
                ("TF_HTTP_RETRY_MAX", RETRY_MAX.to_owned()),
            ],
        };
        let init = tofu.run(&["init", "-input=false"]).await;
        assert_eq!(init.code, Some(0), "init: {}", init.stderr);
        tofu
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(tofu_bin());
        cmd.args(args)
            .current_dir(self.dir.path())
            .kill_on_drop(true);
        for (k, _) in std::env::vars() {
            if k.starts_with("TF_") || k.starts_with("TOFU_SIM_") {
                cmd.env_remove(k);
            }
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    async fn run(&self, args: &[&str]) -> Ran {
        let out = self.command(args).output().await.unwrap();
        Ran {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Starts `args` in the background, stderr to [`Tofu::stderr`] (read while it runs).
    fn spawn(&self, args: &[&str]) -> tokio::process::Child {
        let stderr = std::fs::File::create(self.dir.path().join("stderr.log")).unwrap();
        self.command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr))
            .spawn()
            .unwrap()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }
}

/// Registers and admits a run of `kind`: its attempt and tofu set up for it.
async fn admit(fx: &Fixtures, state: &str, kind: pb::RunKind) -> (String, Tofu) {
    let run = fx.register(state, kind, "dev").await;
    let attempt = fx.admit(&run).await.unwrap();
    let tofu = Tofu::new(&attempt).await;
    (run, tofu)
}

/// The state as `tofu state pull` reads it through a fresh read-only attempt.
async fn pulled(fx: &Fixtures, state: &str) -> serde_json::Value {
    let (run, tofu) = admit(fx, state, pb::RunKind::Plan).await;
    let pull = tofu.run(&["state", "pull"]).await;
    assert_eq!(pull.code, Some(0), "state pull: {}", pull.stderr);
    fx.finish(&run, 1, pb::RunOutcome::Succeeded, "").await;
    serde_json::from_str(&pull.stdout).unwrap()
}

async fn killed_at(point: &'static str) {
    let mut h = Harness::new().await;
    h.start(None, false).await;
    let fx = h.fixtures(None).await;
    let state = fx.create_state("real-crash").await;
    // Generation 1 (serial 1) by a whole apply.
    let (run1, tofu1) = admit(&fx, &state, pb::RunKind::Apply).await;
    let first = tofu1.run(&["apply", "-auto-approve", "-input=false"]).await;
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    fx.finish(&run1, 1, pb::RunOutcome::Succeeded, "").await;

    // A second apply (serial 2) against a coordinator whose write of it blocks at `point`.
    h.kill().await;
    h.start(Some(point), false).await;
    let fx = h.fixtures(Some((fx.tenant, fx.instance))).await;
    let (run2, tofu2) = admit(&fx, &state, pb::RunKind::Apply).await;
    let mut apply = tofu2.spawn(&["apply", "-auto-approve", "-input=false", "-var=v=two"]);
    h.wait_reached(point).await;
    // Killed there; tofu's request gets no answer and tofu retries until the coordinator is
    // back (restarted with a fast sweeper).
    h.kill().await;
    h.start(None, true).await;
    let code = tokio::time::timeout(Duration::from_secs(120), apply.wait())
        .await
        .expect("tofu finished")
        .unwrap();
    let stderr = tofu2.stderr();
    assert_eq!(code.code(), Some(0), "{point}: tofu apply:\n{stderr}");
    assert!(
        stderr.contains("POST ") && stderr.contains("retrying in"),
        "{point}: tofu's own retry re-sent the write:\n{stderr}"
    );
    let fx = h.fixtures(Some((fx.tenant, fx.instance))).await;
    fx.finish(&run2, 1, pb::RunOutcome::Succeeded, "").await;

    let pool = h.pool().await;
    let sid = Uuid::parse_str(&state).unwrap();
    let generations: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT generation, tofu_serial FROM generations WHERE state_id = $1 ORDER BY generation",
    )
    .bind(sid)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        generations,
        vec![(1, 1), (2, 2)],
        "{point}: one generation per serial"
    );
    let current: i64 =
        sqlx::query_scalar("SELECT current_generation FROM states WHERE state_id = $1")
            .bind(sid)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(current, 2);
    let st = pulled(&fx, &state).await;
    assert_eq!(st["serial"], 2, "{point}: {st}");
    assert_eq!(st["outputs"]["b"]["value"], "two-b", "{point}: {st}");

    // The sweeper (pending TTL 2 s) leaves no pending row and no unreferenced object.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM pending_objects")
            .fetch_one(&pool)
            .await
            .unwrap();
        let referenced: Vec<(String, String)> =
            sqlx::query_as("SELECT object_key, object_version FROM generations ORDER BY 1, 2")
                .fetch_all(&pool)
                .await
                .unwrap();
        let mut stored: Vec<(String, String)> = h
            .objects()
            .list("")
            .await
            .unwrap()
            .into_iter()
            .map(|o| (o.key, o.version_id))
            .collect();
        stored.sort();
        if pending == 0 && stored == referenced {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{point}: after sweeps: {pending} pending rows, stored {stored:?}, referenced {referenced:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    h.kill().await;
}

#[tokio::test]
async fn killed_after_the_pending_row() {
    killed_at(AFTER_PENDING).await;
}

#[tokio::test]
async fn killed_after_the_object_put() {
    killed_at(AFTER_PUT).await;
}

#[tokio::test]
async fn killed_before_commit() {
    killed_at(BEFORE_COMMIT).await;
}

#[tokio::test]
async fn killed_after_commit_before_the_response() {
    killed_at(AFTER_COMMIT).await;
}

/// A killed coordinator can leave a partial `.tmp-*` file in the file object store (killed
/// inside the put); the sweeper removes it once older than the pending TTL, and never a
/// stored version.
#[tokio::test]
async fn the_sweeper_removes_partial_files_of_killed_writes() {
    let mut h = Harness::new().await;
    h.start(None, false).await;
    let fx = h.fixtures(None).await;
    let state = fx.create_state("partial-files").await;
    let (run, tofu) = admit(&fx, &state, pb::RunKind::Apply).await;
    let apply = tofu.run(&["apply", "-auto-approve", "-input=false"]).await;
    assert_eq!(apply.code, Some(0), "{}", apply.stderr);
    fx.finish(&run, 1, pb::RunOutcome::Succeeded, "").await;
    h.kill().await;
    // What a put killed between its temporary file and the link leaves behind.
    let key_dir = h
        .dir
        .path()
        .join("objects/cairn/partial.tfstate/g000000000002-0");
    std::fs::create_dir_all(&key_dir).unwrap();
    let partial = key_dir.join(".tmp-0123456789abcdef");
    std::fs::write(&partial, b"half a ciphertext").unwrap();
    h.start(None, true).await;
    // Younger than the pending TTL (2 s): kept for a while; then swept.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        partial.exists(),
        "a partial file younger than the pending TTL stays"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while partial.exists() || key_dir.exists() {
        assert!(Instant::now() < deadline, "the partial file was not swept");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        h.objects().list("").await.unwrap().len(),
        1,
        "the generation stays"
    );
    h.kill().await;
}

/// PostgreSQL cut (through the fault proxy) while tofu's write holds the commit transaction
/// open: tofu is answered 503, nothing is half-written, and tofu's own retry commits
/// exactly one generation once PostgreSQL is back.
#[tokio::test]
async fn postgres_cut_mid_commit_is_a_503_and_writes_nothing() {
    use cairn_state_coordinator::testing::{aws_edges, start, test_config};
    cairn_testkit::init_tracing();
    let db = cairn_testkit::fresh_database().await;
    let nats = cairn_testkit::connect_nats().await;
    let aws = cairn_testkit::TestAws::create().await;
    let keys = TestKeys::new();
    let pg = FaultProxy::start_for_url(&db.runtime_url).await.unwrap();
    let mut config = test_config(&db, &nats, &aws, &keys);
    config.db.database_url = pg.url_for(&db.runtime_url);
    let (server, channel) = start(config, aws_edges(&aws, &aws.endpoint, &aws.endpoint)).await;
    let app = server.app().clone();
    let fx = Fixtures::new(channel, keys.service_token());
    let state = fx.create_state("pg-cut").await;
    let (run, tofu) = admit(&fx, &state, pb::RunKind::Apply).await;

    let pause = app.failpoints.pause(BEFORE_COMMIT);
    let mut apply = tofu.spawn(&["apply", "-auto-approve", "-input=false"]);
    pause.reached().await;
    pg.set(Fault::Cut);
    app.failpoints.unpause(BEFORE_COMMIT);
    pause.release();
    // tofu saw the 503 and waits to retry.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !tofu.stderr().contains("(status: 503)") {
        assert!(
            Instant::now() < deadline,
            "tofu was not answered 503:\n{}",
            tofu.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Nothing half-written: no generation, the state did not move (seen directly).
    let pool = cairn_db::connect(&cairn_db::PoolSettings::new(
        db.migrate_url.clone(),
        "state",
    ))
    .unwrap();
    let sid = Uuid::parse_str(&state).unwrap();
    let (current, generations): (i64, i64) = sqlx::query_as(
        "SELECT current_generation, (SELECT count(*) FROM generations WHERE state_id = $1)
         FROM states WHERE state_id = $1",
    )
    .bind(sid)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((current, generations), (0, 0));

    // PostgreSQL back: tofu's retry (the pool reconnects) commits one generation.
    pg.heal();
    let code = tokio::time::timeout(Duration::from_secs(120), apply.wait())
        .await
        .expect("tofu finished")
        .unwrap();
    assert_eq!(code.code(), Some(0), "tofu apply:\n{}", tofu.stderr());
    let generations: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT generation, tofu_serial FROM generations WHERE state_id = $1 ORDER BY generation",
    )
    .bind(sid)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(generations, vec![(1, 1)]);
    fx.finish(&run, 1, pb::RunOutcome::Succeeded, "").await;
    let st = pulled(&fx, &state).await;
    assert_eq!(st["serial"], 1, "{st}");
    assert_eq!(st["outputs"]["b"]["value"], "one-b", "{st}");
    server.shutdown().await;
}
