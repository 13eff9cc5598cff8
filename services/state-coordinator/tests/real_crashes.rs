//! Real crashes: the `cairn-state-coordinator` binary runs as a child process and is
//! SIGKILLed while a POST waits at one write step (pending row, object put, before commit,
//! after commit before the response: `CAIRN_TEST_FAILPOINT_BLOCK`, compiled in with the
//! `testing` feature only). It is restarted on the same ports, and a client re-sends the
//! POST as tofu does (transport errors and 5xx, same body): exactly one generation per
//! serial, and after a sweep no pending row and no object the database does not reference.
//! Also: PostgreSQL cut through the fault proxy mid-commit answers 503 and writes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use cairn_proto::state as pb;
use cairn_state_coordinator::failpoints::{
    AFTER_COMMIT, AFTER_PENDING, AFTER_PUT, BEFORE_COMMIT, BLOCK_ENV, REACHED_ENV,
};
use cairn_state_coordinator::testing::Fixtures;
use cairn_storage::{FileObjectStore, ObjectStore};
use cairn_testkit::{Fault, FaultProxy, TestKeys, TestNats};
use common::{lock_info, md5_b64, state_doc};
use tokio::time::Instant;
use uuid::Uuid;

const LINEAGE: &str = "lineage-real-crash";

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
    http_client: reqwest::Client,
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
            http_client: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .unwrap(),
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

    async fn request(
        &self,
        method: &str,
        url: &str,
        token: &str,
        body: &[u8],
    ) -> Result<(u16, String), reqwest::Error> {
        let resp = self
            .http_client
            .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url)
            .basic_auth("run", Some(token))
            .header("content-type", "application/json")
            .header("content-md5", md5_b64(body))
            .timeout(Duration::from_secs(10))
            .body(body.to_vec())
            .send()
            .await?;
        let status = resp.status().as_u16();
        Ok((status, resp.text().await.unwrap_or_default()))
    }

    /// tofu's client: re-send the same request on transport errors and 5xx (not 501).
    async fn tofu_send(&self, method: &str, url: &str, token: &str, body: &[u8]) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.request(method, url, token, body).await {
                Ok((status, _)) if status < 500 || status == 501 => return status,
                Ok(_) | Err(_) => {}
            }
            assert!(Instant::now() < deadline, "{method} {url} kept failing");
            tokio::time::sleep(Duration::from_millis(200)).await;
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

/// What tofu is given for one attempt.
struct Attempt {
    address: String,
    lock_address: String,
    token: String,
}

async fn admit(fx: &Fixtures, state: &str, kind: pb::RunKind) -> (String, Attempt) {
    let run = fx.register(state, kind, "dev").await;
    let a = fx.admit(&run).await.unwrap();
    let backend = a.backend.unwrap();
    (
        run,
        Attempt {
            address: backend.address,
            lock_address: backend.lock_address,
            token: a.run_token,
        },
    )
}

async fn killed_at(point: &'static str) {
    let mut h = Harness::new().await;
    h.start(None, false).await;
    let fx = h.fixtures(None).await;
    let state = fx.create_state("real-crash").await;
    let (doc1, doc2) = (state_doc(1, LINEAGE, "v1"), state_doc(2, LINEAGE, "v2"));
    // Generation 1 by a whole apply; then attempt 1 of a second apply locks and reads.
    let (run1, a1) = admit(&fx, &state, pb::RunKind::Apply).await;
    let l1 = Uuid::new_v4().to_string();
    let info1 = lock_info(&l1, "OperationTypeApply");
    assert_eq!(
        h.tofu_send("LOCK", &a1.lock_address, &a1.token, info1.as_bytes())
            .await,
        200
    );
    let post1 = format!("{}?ID={l1}", a1.address);
    assert_eq!(h.tofu_send("POST", &post1, &a1.token, &doc1).await, 200);
    assert_eq!(
        h.tofu_send("UNLOCK", &a1.lock_address, &a1.token, info1.as_bytes())
            .await,
        200
    );
    fx.finish(&run1, 1, pb::RunOutcome::Succeeded, "").await;
    let (run2, a2) = admit(&fx, &state, pb::RunKind::Apply).await;
    let l2 = Uuid::new_v4().to_string();
    let info2 = lock_info(&l2, "OperationTypeApply");
    assert_eq!(
        h.tofu_send("LOCK", &a2.lock_address, &a2.token, info2.as_bytes())
            .await,
        200
    );
    let (status, _) = h.request("GET", &a2.address, &a2.token, b"").await.unwrap();
    assert_eq!(status, 200);

    // The write of generation 2 blocks at `point`; the process is killed there.
    h.kill().await;
    h.start(Some(point), false).await;
    let post2 = format!("{}?ID={l2}", a2.address);
    let in_flight = tokio::spawn({
        let (client, url, token, body) = (
            h.http_client.clone(),
            post2.clone(),
            a2.token.clone(),
            doc2.clone(),
        );
        async move {
            client
                .post(url)
                .basic_auth("run", Some(token))
                .header("content-md5", md5_b64(&body))
                .body(body)
                .send()
                .await
                .map(|r| r.status().as_u16())
        }
    });
    h.wait_reached(point).await;
    h.kill().await;
    let lost = in_flight.await.unwrap();
    assert!(
        lost.is_err(),
        "{point}: the killed request got no answer: {lost:?}"
    );

    // Restarted (with a fast sweeper): tofu re-sends the same POST until it is answered.
    h.start(None, true).await;
    assert_eq!(
        h.tofu_send("POST", &post2, &a2.token, &doc2).await,
        200,
        "{point}"
    );
    assert_eq!(
        h.tofu_send("POST", &post2, &a2.token, &doc2).await,
        200,
        "{point}: again"
    );
    assert_eq!(
        h.tofu_send("UNLOCK", &a2.lock_address, &a2.token, info2.as_bytes())
            .await,
        200
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
    let (_, reader) = admit(&fx, &state, pb::RunKind::Plan).await;
    let (status, body) = h
        .request("GET", &reader.address, &reader.token, b"")
        .await
        .unwrap();
    assert_eq!((status, body.as_bytes()), (200, doc2.as_slice()), "{point}");

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
    let (run, a) = admit(&fx, &state, pb::RunKind::Apply).await;
    let l = Uuid::new_v4().to_string();
    let info = lock_info(&l, "OperationTypeApply");
    assert_eq!(
        h.tofu_send("LOCK", &a.lock_address, &a.token, info.as_bytes())
            .await,
        200
    );
    let post = format!("{}?ID={l}", a.address);
    assert_eq!(
        h.tofu_send("POST", &post, &a.token, &state_doc(1, LINEAGE, "v1"))
            .await,
        200
    );
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

/// PostgreSQL cut (through the fault proxy) while the commit transaction is open: the POST
/// answers 503, nothing is half-written, and tofu's re-send commits exactly one generation.
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
    let (run, a) = admit(&fx, &state, pb::RunKind::Apply).await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let send = |method: &'static str, url: String, body: Vec<u8>| {
        let (client, token) = (client.clone(), a.token.clone());
        async move {
            let resp = client
                .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url)
                .basic_auth("run", Some(token))
                .header("content-md5", md5_b64(&body))
                .body(body)
                .send()
                .await
                .unwrap();
            (resp.status().as_u16(), resp.text().await.unwrap())
        }
    };
    let l = Uuid::new_v4().to_string();
    let info = lock_info(&l, "OperationTypeApply").into_bytes();
    assert_eq!(
        send("LOCK", a.lock_address.clone(), info.clone()).await.0,
        200
    );
    let post = format!("{}?ID={l}", a.address);
    let doc = state_doc(1, LINEAGE, "v1");

    let pause = app.failpoints.pause(BEFORE_COMMIT);
    let in_flight = tokio::spawn(send("POST", post.clone(), doc.clone()));
    pause.reached().await;
    pg.set(Fault::Cut);
    app.failpoints.unpause(BEFORE_COMMIT);
    pause.release();
    let (status, body) = in_flight.await.unwrap();
    assert_eq!(status, 503, "{body}");

    // Nothing half-written: no generation, the state did not move (seen directly).
    pg.heal();
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

    // tofu re-sends (the pool reconnects): one generation.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = send("POST", post.clone(), doc.clone()).await;
        if status == 200 {
            break;
        }
        assert!(
            status >= 500 && Instant::now() < deadline,
            "{status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(send("POST", post.clone(), doc.clone()).await.0, 200);
    let generations: i64 =
        sqlx::query_scalar("SELECT count(*) FROM generations WHERE state_id = $1")
            .bind(sid)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(generations, 1);
    assert_eq!(send("UNLOCK", a.lock_address.clone(), info).await.0, 200);
    fx.finish(&run, 1, pb::RunOutcome::Succeeded, "").await;
    server.shutdown().await;
}
