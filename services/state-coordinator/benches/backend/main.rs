//! Benchmark of the coordinator's HTTP backend (GET + POST of a state, as tofu does during an
//! apply) against its physical floor, all in one run against the same moto bucket, KMS key
//! and database, rounds interleaved (coordinator, raw S3, floor, coordinator, …):
//!
//! - GET floor: a raw S3 get of the same bytes + one PostgreSQL point read + one AES-GCM
//!   decrypt of what was read;
//! - POST floor: one KMS GenerateDataKey + a raw S3 put of the same bytes + one PostgreSQL
//!   commit (a one-row insert);
//! - the operation's floor is the two in sequence; raw S3 (get + put only) is printed too.
//!
//! Run on demand, never in CI:
//!
//! ```text
//! eval "$(deploy/local/start.sh)" && cargo bench -p cairn-state-coordinator --bench backend
//! ```
//!
//! `BENCH_ITERS` sets the measured operations per cell: one number for both sizes, or
//! `small,large` (default `200,50`). Goals (issue 17), judged on medians: GET and POST each
//! ≤ 1.15× their floor, the whole operation ≤ 1.25× its floor, p99 ≤ 1.5× the floor's p99.
//! The bench prints PASS/MISS and never fails on them.
//!
//! `BENCH_ROUNDS` sets how many rounds a cell's operations are split into. By default each
//! worker does one operation per round, so the modes alternate operation by operation (at
//! concurrency 16, block of sixteen by block of sixteen) and see the same moto, load and drift;
//! the mode that goes first turns with each round, and every block starts once the
//! coordinator's event relay has sent what the blocks before committed. `BENCH_ROUNDS=5` splits
//! them into five long rounds instead, as before. The spread printed is the ratio in each fifth
//! of the rounds.
//!
//! `BENCH_STATE_CACHE_BYTES` sets the coordinator's sealed cache (default its default; `0`:
//! every GET reads its object from S3, as before the cache).
//!
//! `BENCH_EVENT_RELAY_LINGER` sets the coordinator's event relay linger (default its default;
//! `0s`: each commit's event published at once, as before the linger).
//!
//! `BENCH_MODE` picks another mode: `scale` (GET/POST as the database grows to 100,000 states
//! and 1,000,000 generations, and the hot statements' plans: scale.rs) or `large` (a 100 MiB
//! state through a coordinator child process, its peak RSS: large_state.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../tests/common/mod.rs"]
mod common;
mod large_state;
mod scale;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use aws_sdk_kms::types::DataKeySpec;
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;
use cairn_proto::state as pb;
use cairn_state_coordinator::{Config, Edges, Server};
use cairn_storage::{
    BoxFuture, DataKey, EncryptionContext, KeyError, KeyManager, KmsKeyManager, S3ObjectStore,
    SecretKey,
};
use cairn_testkit::{FaultProxy, TestAws, TestKeys};
use common::{Admitted, Store, TestApp, md5_b64};
use uuid::Uuid;

/// The issue's goals: GET and POST p50 each at most this many times their floor's p50 …
const GOAL_STEP_RATIO: f64 = 1.15;
/// … the whole operation's p50 at most this many times the floor's …
const GOAL_RATIO: f64 = 1.25;
/// … and its p99 at most this many times the floor's p99.
const GOAL_P99_RATIO: f64 = 1.5;
const SIZES: [(usize, &str); 2] = [(10 * 1024, "10 KB"), (1024 * 1024, "1 MB")];
const CONCURRENCY: [usize; 2] = [1, 16];
/// The spread printed: the run's rounds in this many consecutive groups, one ratio each.
const SPREAD_GROUPS: usize = 5;
const MODES: [Mode; 3] = [Mode::Coordinator, Mode::RawS3, Mode::Floor];
const VARS: [&str; 3] = [
    cairn_testkit::env::DATABASE_URL_VAR,
    cairn_testkit::env::NATS_URL_VAR,
    cairn_testkit::env::AWS_ENDPOINT_VAR,
];

/// Delegates to the real key manager and counts the calls that reach it.
struct CountingKeys {
    inner: Arc<dyn KeyManager>,
    generated: AtomicU64,
    unwrapped: AtomicU64,
}

impl CountingKeys {
    fn calls(&self) -> u64 {
        self.generated.load(Ordering::Relaxed) + self.unwrapped.load(Ordering::Relaxed)
    }
}

impl KeyManager for CountingKeys {
    fn generate_data_key<'a>(
        &'a self,
        ctx: &'a EncryptionContext,
    ) -> BoxFuture<'a, Result<DataKey, KeyError>> {
        self.generated.fetch_add(1, Ordering::Relaxed);
        self.inner.generate_data_key(ctx)
    }

    fn unwrap_data_key<'a>(
        &'a self,
        key_id: &'a str,
        wrapped: &'a [u8],
        ctx: &'a EncryptionContext,
    ) -> BoxFuture<'a, Result<SecretKey, KeyError>> {
        self.unwrapped.fetch_add(1, Ordering::Relaxed);
        self.inner.unwrap_data_key(key_id, wrapped, ctx)
    }

    fn describe(&self) -> String {
        format!("counting {}", self.inner.describe())
    }
}

/// Everything the three modes share: one coordinator, one bucket, one key, one database.
struct Bench {
    app: TestApp,
    keys: Arc<CountingKeys>,
    s3: aws_sdk_s3::Client,
    kms: aws_sdk_kms::Client,
    floor_db: sqlx::PgPool,
    /// The coordinator's own schema, to see whether its event relay has work left.
    state_db: sqlx::PgPool,
    http: reqwest::Client,
    /// The coordinator's `CAIRN_EVENT_RELAY_LINGER`.
    relay_linger: Duration,
}

impl Bench {
    /// Waits until the coordinator's event relay has published every committed event (it
    /// lingers `relay_linger` after a commit), so that no operation of any mode is timed beside
    /// the relay's work for an earlier one: each block of a round starts on a quiet coordinator.
    async fn quiesce(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30) + self.relay_linger;
        loop {
            let unsent: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM outbox WHERE sent_at IS NULL)")
                    .fetch_one(&self.state_db)
                    .await?;
            if !unsent {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "the coordinator's event relay left events unsent for 30 s"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// The coordinator's HTTP and SDK clients reach moto directly (no fault proxy in the path),
/// exactly like the raw-S3 and floor clients.
async fn start() -> Result<Bench> {
    let db = cairn_testkit::fresh_database().await;
    let aws = TestAws::create().await;
    let nats = cairn_testkit::connect_nats().await;
    let test_keys = TestKeys::new();
    let sdk = cairn_testkit::sdk_config_for(&aws.endpoint);
    let objects = Arc::new(S3ObjectStore::with_config(
        &sdk,
        aws.bucket.clone(),
        "cairn-bench".to_owned(),
    ));
    let keys = Arc::new(CountingKeys {
        inner: Arc::new(KmsKeyManager::with_config(&sdk, aws.kms_key_id.clone())),
        generated: AtomicU64::new(0),
        unwrapped: AtomicU64::new(0),
    });
    let mut config = Config {
        object_store: format!("s3://{}/cairn-bench", aws.bucket),
        run_lease: Duration::from_secs(3600),
        state_cache_bytes: state_cache_bytes()?,
        ..cairn_state_coordinator::testing::test_config(&db, &nats, &aws, &test_keys)
    };
    if let Some(linger) = event_relay_linger()? {
        config.event_relay_linger = linger;
    }
    let relay_linger = config.event_relay_linger;
    let server = Server::start_with(
        config,
        Edges {
            objects: Some(objects),
            keys: Some(keys.clone()),
        },
    )
    .await
    .context("start the coordinator")?;
    let grpc = tonic::transport::Channel::from_shared(format!("http://{}", server.grpc_addr()))?
        .connect()
        .await
        .context("connect gRPC")?;
    // One client, connection reuse on, for every HTTP request of the coordinator mode.
    let http = reqwest::Client::builder().build()?;

    // The floor's commit: one small INSERT in a scratch table of its own schema, same database.
    let owner = cairn_db::connect(&cairn_db::PoolSettings::new(
        db.migrate_url.clone(),
        "public",
    ))?;
    sqlx::query("CREATE SCHEMA IF NOT EXISTS bench_floor")
        .execute(&owner)
        .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS bench_floor.scratch (
            op_id uuid PRIMARY KEY, size integer NOT NULL, at timestamptz NOT NULL DEFAULT now())",
    )
    .execute(&owner)
    .await?;
    owner.close().await;
    let floor_db = cairn_db::connect(&cairn_db::PoolSettings::new(
        db.migrate_url.clone(),
        "bench_floor",
    ))?;

    // Unused by the bench (nothing sits between the coordinator and moto) but part of TestApp.
    let s3_proxy = FaultProxy::start_for_url(&aws.endpoint).await?;
    let kms_proxy = FaultProxy::start_for_url(&aws.endpoint).await?;
    let s3 = cairn_testkit::s3_client_for(&aws.endpoint);
    let kms = cairn_testkit::kms_client_for(&aws.endpoint);
    let fx =
        cairn_state_coordinator::testing::Fixtures::new(grpc.clone(), test_keys.service_token());
    let app = TestApp {
        server: Some(server),
        grpc,
        http_base: String::new(),
        keys: test_keys,
        db,
        aws,
        nats,
        s3_proxy,
        kms_proxy,
        db_proxy: None,
        store: Store::S3,
        objects_dir: None,
        tenant: fx.tenant,
        instance: fx.instance,
        fx,
        http: http.clone(),
    };
    let state_db = app.admin_pool().await;
    Ok(Bench {
        app,
        keys,
        s3,
        kms,
        floor_db,
        state_db,
        http,
        relay_linger,
    })
}

/// A v4 state document of exactly `size` bytes, shaped like tofu's: the bulk is in
/// `resources` (one instance's attribute holds the padding), a small output on top.
fn padded_doc(serial: u64, lineage: &str, size: usize) -> Bytes {
    const MARK: &[u8] = b"@PAD@";
    let mut skeleton = serde_json::to_vec(&serde_json::json!({
        "version": 4, "terraform_version": "1.12.6", "serial": serial, "lineage": lineage,
        "outputs": {"id": {"value": "bench", "type": "string"}},
        "resources": [{
            "mode": "managed", "type": "local_file", "name": "blob",
            "provider": "provider[\"registry.opentofu.org/hashicorp/local\"]",
            "instances": [{"schema_version": 0, "attributes": {"id": "bench", "content": "@PAD@"},
                           "sensitive_attributes": []}]
        }],
        "check_results": null
    }))
    .expect("JSON of plain values");
    skeleton.push(b'\n');
    let at = skeleton
        .windows(MARK.len())
        .position(|w| w == MARK)
        .expect("the skeleton holds the mark");
    let fill = size.saturating_sub(skeleton.len() - MARK.len());
    let shift = usize::try_from(serial % 26).unwrap_or(0);
    let mut doc = Vec::with_capacity(size);
    doc.extend_from_slice(&skeleton[..at]);
    doc.extend((0..fill).map(|i| b"abcdefghijklmnopqrstuvwxyz"[(i * 7 + shift) % 26]));
    doc.extend_from_slice(&skeleton[at + MARK.len()..]);
    Bytes::from(doc)
}

/// Wall-clock time of each step of one operation.
#[derive(Default, Clone)]
struct Sample {
    total: Duration,
    steps: Vec<(&'static str, Duration)>,
    /// Its place in its worker's round (0: the round's first operation).
    position: usize,
}

struct Timer {
    start: Instant,
    last: Instant,
    steps: Vec<(&'static str, Duration)>,
}

impl Timer {
    fn start() -> Self {
        let now = Instant::now();
        Self {
            start: now,
            last: now,
            steps: Vec::with_capacity(4),
        }
    }

    fn step(&mut self, name: &'static str) {
        let now = Instant::now();
        self.steps.push((name, now - self.last));
        self.last = now;
    }

    /// Records the sum of `parts` (already recorded steps) as the step `name`.
    fn sum(&mut self, name: &'static str, parts: &[&str]) {
        let total = self
            .steps
            .iter()
            .filter(|(n, _)| parts.contains(n))
            .map(|(_, d)| *d)
            .sum();
        self.steps.push((name, total));
    }

    fn done(self) -> Sample {
        Sample {
            total: self.last - self.start,
            steps: self.steps,
            position: 0,
        }
    }
}

/// The input of one operation, built before a round starts so that no worker spends CPU on
/// building documents while others are being timed.
struct Prepared {
    doc: Bytes,
    /// Content-MD5 (tofu sends it; the coordinator checks it).
    md5: String,
    /// Object key of the raw modes.
    key: String,
    /// The floor's: `doc` sealed in advance under the worker's key (so the next GET has
    /// something to decrypt; sealing is work the floor's POST does not do).
    sealed: Option<(Bytes, [u8; 12])>,
}

/// One coordinator worker: its own state, admitted apply run and held lock.
struct CoordWorker {
    http: reqwest::Client,
    run: Admitted,
    lock_id: String,
    lineage: String,
    size: usize,
    serial: u64,
    current: Bytes,
}

impl CoordWorker {
    async fn new(b: &Bench, size: usize, name: &str) -> Result<Self> {
        let state_id = b.app.create_state(name).await;
        let run = b.app.start_run(&state_id, pb::RunKind::Apply).await;
        let lock_id = Uuid::new_v4().to_string();
        let locked = b.app.lock(&run, &lock_id).await;
        ensure!(locked.status == 200, "LOCK: {}", locked.text());
        let lineage = Uuid::new_v4().to_string();
        let current = padded_doc(1, &lineage, size);
        let first = b.app.post(&run, &lock_id, &current).await;
        ensure!(first.status == 200, "first POST: {}", first.text());
        Ok(Self {
            http: b.http.clone(),
            run,
            lock_id,
            lineage,
            size,
            serial: 1,
            current,
        })
    }

    fn prepare(&self, n: usize) -> Vec<Prepared> {
        (1..=n as u64)
            .map(|i| {
                let doc = padded_doc(self.serial + i, &self.lineage, self.size);
                Prepared {
                    md5: md5_b64(&doc),
                    doc,
                    key: String::new(),
                    sealed: None,
                }
            })
            .collect()
    }

    /// GET, then POST of serial+1 with `?ID=` of the held lock, timed.
    async fn op(&mut self, next: Prepared) -> Result<Sample> {
        let post_url = format!("{}?ID={}", self.run.address, self.lock_id);

        let mut t = Timer::start();
        let got = self
            .http
            .get(&self.run.address)
            .basic_auth("run", Some(&self.run.token))
            .send()
            .await?;
        let status = got.status();
        let read = got.bytes().await?;
        t.step("get");
        let posted = self
            .http
            .post(&post_url)
            .basic_auth("run", Some(&self.run.token))
            .header("content-type", "application/json")
            .header("content-md5", next.md5)
            .body(next.doc.clone())
            .send()
            .await?;
        let post_status = posted.status();
        let post_text = posted.text().await?;
        t.step("post");
        let sample = t.done();

        ensure!(status == 200, "GET {status}");
        ensure!(read == self.current, "GET returned another document");
        ensure!(post_status == 200, "POST {post_status}: {post_text}");
        self.serial += 1;
        self.current = next.doc;
        Ok(sample)
    }
}

/// One raw-S3 (and floor) worker: a chain of objects, each put under a new key.
struct RawWorker {
    s3: aws_sdk_s3::Client,
    kms: Option<(aws_sdk_kms::Client, String, EncryptionContext)>,
    db: Option<sqlx::PgPool>,
    /// The floor's data key and the current object's nonce and row.
    seal_key: [u8; 32],
    current_nonce: [u8; 12],
    current_row: Uuid,
    bucket: String,
    prefix: String,
    lineage: String,
    size: usize,
    serial: u64,
    current_key: String,
}

impl RawWorker {
    async fn new(b: &Bench, size: usize, prefix: String, floor: bool) -> Result<Self> {
        let lineage = Uuid::new_v4().to_string();
        let mut w = Self {
            s3: b.s3.clone(),
            kms: floor.then(|| {
                (
                    b.kms.clone(),
                    b.app.aws.kms_key_id.clone(),
                    EncryptionContext::new(b.app.tenant.to_string(), Uuid::new_v4().to_string()),
                )
            }),
            db: floor.then(|| b.floor_db.clone()),
            seal_key: *SecretKey::random().expect("randomness").expose(),
            current_nonce: [0; 12],
            current_row: Uuid::now_v7(),
            bucket: b.app.aws.bucket.clone(),
            prefix,
            lineage,
            size,
            serial: 1,
            current_key: String::new(),
        };
        w.current_key = w.key(1);
        let mut first = padded_doc(1, &w.lineage, size);
        if floor {
            let (sealed, nonce) = w.seal(&first);
            first = sealed;
            w.current_nonce = nonce;
            sqlx::query("INSERT INTO scratch (op_id, size) VALUES ($1, $2)")
                .bind(w.current_row)
                .bind(i32::try_from(size)?)
                .execute(&b.floor_db)
                .await?;
        }
        w.s3.put_object()
            .bucket(&w.bucket)
            .key(&w.current_key)
            .body(ByteStream::from(first))
            .send()
            .await?;
        Ok(w)
    }

    fn seal(&self, doc: &[u8]) -> (Bytes, [u8; 12]) {
        let sealed = cairn_storage::seal(&self.seal_key, b"bench", doc).expect("seal");
        (Bytes::from(sealed.ciphertext), sealed.nonce)
    }

    fn key(&self, serial: u64) -> String {
        format!("{}/g{serial:012}-{}", self.prefix, Uuid::now_v7().simple())
    }

    fn prepare(&self, n: usize) -> Vec<Prepared> {
        (1..=n as u64)
            .map(|i| {
                let doc = padded_doc(self.serial + i, &self.lineage, self.size);
                Prepared {
                    sealed: self.db.is_some().then(|| self.seal(&doc)),
                    doc,
                    md5: String::new(),
                    key: self.key(self.serial + i),
                }
            })
            .collect()
    }

    /// Raw: get + put. Floor: the GET floor (S3 get, point read, decrypt), then the POST
    /// floor (GenerateDataKey, put, commit), sequential, in the order the coordinator does
    /// them.
    async fn op(&mut self, next: Prepared) -> Result<Sample> {
        let op_id = Uuid::now_v7();
        let size = i32::try_from(next.doc.len())?;

        let mut t = Timer::start();
        let got = self
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(&self.current_key)
            .send()
            .await?;
        let read = got.body.collect().await?.into_bytes();
        t.step("get.s3");
        let mut plaintext_len = read.len();
        if let Some(db) = &self.db {
            let row: Option<i32> = sqlx::query_scalar("SELECT size FROM scratch WHERE op_id = $1")
                .bind(self.current_row)
                .fetch_optional(db)
                .await?;
            ensure!(row.is_some(), "the floor's point read found no row");
            t.step("get.pg");
            let opened = cairn_storage::open_in_place(
                &self.seal_key,
                &self.current_nonce,
                b"bench",
                Vec::from(read),
            )?;
            plaintext_len = opened.len();
            t.step("get.decrypt");
            t.sum("get", &["get.s3", "get.pg", "get.decrypt"]);
            let t_post = Instant::now();
            let (kms, key_id, ctx) = self.kms.as_ref().context("the floor has KMS")?;
            let dk = kms
                .generate_data_key()
                .key_id(key_id.as_str())
                .key_spec(DataKeySpec::Aes256)
                .set_encryption_context(Some(ctx.to_map().into_iter().collect()))
                .send()
                .await?;
            ensure!(dk.plaintext().is_some(), "GenerateDataKey without a key");
            t.step("post.kms");
            let (body, nonce) = next.sealed.context("the floor's input is sealed")?;
            self.s3
                .put_object()
                .bucket(&self.bucket)
                .key(&next.key)
                .body(ByteStream::from(body))
                .send()
                .await?;
            t.step("post.put");
            let mut tx = db.begin().await?;
            sqlx::query("INSERT INTO scratch (op_id, size) VALUES ($1, $2)")
                .bind(op_id)
                .bind(size)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            t.step("post.commit");
            t.steps.push(("post", t_post.elapsed()));
            self.current_nonce = nonce;
            self.current_row = op_id;
        } else {
            t.sum("get", &["get.s3"]);
            let t_post = Instant::now();
            self.s3
                .put_object()
                .bucket(&self.bucket)
                .key(&next.key)
                .body(ByteStream::from(next.doc))
                .send()
                .await?;
            t.step("post.put");
            t.steps.push(("post", t_post.elapsed()));
        }
        let sample = t.done();

        ensure!(
            plaintext_len >= self.size,
            "raw GET returned {plaintext_len} bytes",
        );
        self.serial += 1;
        self.current_key = next.key;
        Ok(sample)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Mode {
    Coordinator,
    RawS3,
    Floor,
}

enum Worker {
    Coord(Box<CoordWorker>),
    Raw(Box<RawWorker>),
}

impl Worker {
    fn prepare(&self, n: usize) -> Vec<Prepared> {
        match self {
            Self::Coord(w) => w.prepare(n),
            Self::Raw(w) => w.prepare(n),
        }
    }

    async fn op(&mut self, next: Prepared) -> Result<Sample> {
        match self {
            Self::Coord(w) => w.op(next).await,
            Self::Raw(w) => w.op(next).await,
        }
    }
}

/// Runs `iters` operations on every worker at once; returns the workers and the samples.
async fn round(workers: Vec<Worker>, iters: usize) -> Result<(Vec<Worker>, Vec<Sample>)> {
    let inputs: Vec<Vec<Prepared>> = workers.iter().map(|w| w.prepare(iters)).collect();
    let mut set = tokio::task::JoinSet::new();
    for (i, (mut w, inputs)) in workers.into_iter().zip(inputs).enumerate() {
        set.spawn(async move {
            let mut samples = Vec::with_capacity(iters);
            for (position, next) in inputs.into_iter().enumerate() {
                let mut sample = w.op(next).await?;
                sample.position = position;
                samples.push(sample);
            }
            Ok::<_, anyhow::Error>((i, w, samples))
        });
    }
    let mut back = Vec::new();
    let mut all = Vec::new();
    while let Some(done) = set.join_next().await {
        let (i, w, samples) = done??;
        back.push((i, w));
        all.extend(samples);
    }
    back.sort_by_key(|(i, _)| *i);
    Ok((back.into_iter().map(|(_, w)| w).collect(), all))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    // Nearest rank.
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Stats {
    n: usize,
    p50: Duration,
    p99: Duration,
    /// Each step's own (p50, p99).
    steps: BTreeMap<&'static str, (Duration, Duration)>,
}

impl Stats {
    fn step(&self, name: &str) -> (Duration, Duration) {
        self.steps.get(name).copied().unwrap_or_default()
    }
}

fn stats(samples: &[Sample]) -> Stats {
    let mut totals: Vec<Duration> = samples.iter().map(|s| s.total).collect();
    totals.sort();
    let mut by_step: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
    for s in samples {
        for (name, d) in &s.steps {
            by_step.entry(name).or_default().push(*d);
        }
    }
    Stats {
        n: totals.len(),
        p50: percentile(&totals, 0.50),
        p99: percentile(&totals, 0.99),
        steps: by_step
            .into_iter()
            .map(|(k, mut v)| {
                v.sort();
                (k, (percentile(&v, 0.50), percentile(&v, 0.99)))
            })
            .collect(),
    }
}

struct Cell {
    size: &'static str,
    concurrency: usize,
    coord: Stats,
    raw: Stats,
    floor: Stats,
    /// How many rounds the modes were interleaved in.
    rounds: usize,
    /// coordinator / floor of the whole operation's p50, in consecutive groups of rounds.
    group_ratios: Vec<f64>,
    /// The slowest 1% of the coordinator's and of the floor's operations.
    slowest: [String; 2],
    kms_per_op: f64,
    cache_unwraps_per_op: f64,
    wall: Duration,
}

/// `BENCH_ITERS`: "N" or "small,large"; measured operations per cell (spread over workers).
fn iterations() -> Result<[usize; 2]> {
    let Ok(raw) = std::env::var("BENCH_ITERS") else {
        return Ok([200, 50]);
    };
    let parts: Vec<usize> = raw
        .split(',')
        .map(|p| p.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("BENCH_ITERS={raw:?}: expected N or SMALL,LARGE"))?;
    match parts.as_slice() {
        [n] if *n > 0 => Ok([*n, *n]),
        [a, b] if *a > 0 && *b > 0 => Ok([*a, *b]),
        _ => bail!("BENCH_ITERS={raw:?}: expected N or SMALL,LARGE (positive)"),
    }
}

async fn run_cell(
    b: &Bench,
    size: usize,
    label: &'static str,
    concurrency: usize,
    total_iters: usize,
) -> Result<Cell> {
    let per_worker = total_iters.div_ceil(concurrency);
    let rounds = rounds_setting()?.unwrap_or(per_worker).clamp(1, per_worker);
    let warmup = if size > 100 * 1024 { 3 } else { 10 };
    let tag = format!("{}k-c{concurrency}", size / 1024);

    let mut coord = Vec::new();
    let mut raw = Vec::new();
    let mut floor = Vec::new();
    for i in 0..concurrency {
        let name = format!("bench-{tag}-{i}-{}", Uuid::new_v4().simple());
        coord.push(Worker::Coord(Box::new(
            CoordWorker::new(b, size, &name).await?,
        )));
        raw.push(Worker::Raw(Box::new(
            RawWorker::new(b, size, format!("raw/{tag}/{i}"), false).await?,
        )));
        floor.push(Worker::Raw(Box::new(
            RawWorker::new(b, size, format!("floor/{tag}/{i}"), true).await?,
        )));
    }
    let mut workers = BTreeMap::from([
        (Mode::Coordinator, coord),
        (Mode::RawS3, raw),
        (Mode::Floor, floor),
    ]);
    for mode in MODES {
        b.quiesce().await?;
        let ws = workers.remove(&mode).expect("every mode has workers");
        let (ws, _) = round(ws, warmup).await?;
        workers.insert(mode, ws);
    }

    let kms_before = b.keys.calls();
    let cache_before = b.app.server().app().key_cache.unwrap_calls();
    // Each mode's samples, round by round.
    let mut by_round: BTreeMap<Mode, Vec<Vec<Sample>>> = BTreeMap::new();
    let started = Instant::now();
    for r in 0..rounds {
        // Spread per_worker over the rounds; the first rounds take the remainder.
        let iters = per_worker / rounds + usize::from(r < per_worker % rounds);
        // The modes take turns at going first, so none always follows the same other one.
        for k in 0..MODES.len() {
            let mode = MODES[(r + k) % MODES.len()];
            b.quiesce().await?;
            let ws = workers.remove(&mode).expect("every mode has workers");
            let (ws, s) = round(ws, iters).await?;
            workers.insert(mode, ws);
            by_round.entry(mode).or_default().push(s);
        }
    }
    let wall = started.elapsed();
    let samples: BTreeMap<Mode, Vec<Sample>> = by_round
        .iter()
        .map(|(mode, rounds)| (*mode, rounds.concat()))
        .collect();
    let coord = stats(&samples[&Mode::Coordinator]);
    let ops = coord.n.max(1) as f64;
    Ok(Cell {
        size: label,
        concurrency,
        rounds,
        kms_per_op: (b.keys.calls() - kms_before) as f64 / ops,
        cache_unwraps_per_op: (b.app.server().app().key_cache.unwrap_calls() - cache_before) as f64
            / ops,
        group_ratios: group_ratios(&by_round[&Mode::Coordinator], &by_round[&Mode::Floor]),
        coord,
        raw: stats(&samples[&Mode::RawS3]),
        floor: stats(&samples[&Mode::Floor]),
        slowest: [
            slowest(&samples[&Mode::Coordinator]),
            slowest(&samples[&Mode::Floor]),
        ],
        wall,
    })
}

/// Coordinator / floor of the whole operation's p50 in each of `SPREAD_GROUPS` consecutive
/// groups of rounds (fewer when there are fewer rounds): how much the ratio moves within a run.
fn group_ratios(coord: &[Vec<Sample>], floor: &[Vec<Sample>]) -> Vec<f64> {
    let groups = SPREAD_GROUPS.min(coord.len()).max(1);
    let per_group = coord.len().div_ceil(groups);
    coord
        .chunks(per_group)
        .zip(floor.chunks(per_group))
        .map(|(c, f)| {
            let (c, f) = (stats(&c.concat()).p50, stats(&f.concat()).p50);
            c.as_secs_f64() / f.as_secs_f64().max(1e-9)
        })
        .collect()
}

/// `BENCH_ROUNDS`: how many rounds a cell's operations are split into (unset: as many as
/// each worker has operations, so the modes alternate operation by operation).
fn rounds_setting() -> Result<Option<usize>> {
    match std::env::var("BENCH_ROUNDS") {
        Err(_) => Ok(None),
        Ok(raw) => match raw.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => bail!("BENCH_ROUNDS={raw:?}: expected a positive number of rounds"),
        },
    }
}

/// The slowest 1% of `samples` (at least one), slowest first: each one's total, its place in
/// its worker's round (`@0`: the round's first operation) and its GET / POST split, in ms.
fn slowest(samples: &[Sample]) -> String {
    let mut sorted: Vec<&Sample> = samples.iter().collect();
    sorted.sort_by_key(|s| std::cmp::Reverse(s.total));
    let step = |s: &Sample, name: &str| {
        s.steps
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0.0, |(_, d)| ms(*d))
    };
    sorted
        .iter()
        .take(samples.len().div_ceil(100))
        .map(|s| {
            format!(
                "{:.1} @{} ({:.1} / {:.1})",
                ms(s.total),
                s.position,
                step(s, "get"),
                step(s, "post")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn verdict(ratio: f64, goal: f64) -> &'static str {
    if ratio <= goal { "PASS" } else { "MISS" }
}

fn print_tables(cells: &[Cell], out: &mut String) {
    use std::fmt::Write;
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    let pair = |(a, b): (Duration, Duration)| format!("{:.2} / {:.2}", ms(a), ms(b));
    writeln!(
        out,
        "Coordinator vs its floor, p50 / p99 in ms (goals: GET, POST ≤ {GOAL_STEP_RATIO}× their floor at p50; \
         whole operation ≤ {GOAL_RATIO}× at p50 and ≤ {GOAL_P99_RATIO}× the floor's p99):"
    )
    .ok();
    writeln!(out).ok();
    writeln!(
        out,
        "| size | conc | ops (rounds) | GET coord | GET floor | GET ratio | POST coord | POST floor | POST ratio | op coord | op floor | op ratio p50 / p99 | op ratio per fifth of the rounds (min–max) |"
    )
    .ok();
    writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    .ok();
    for c in cells {
        let (get_c, get_f) = (c.coord.step("get"), c.floor.step("get"));
        let (post_c, post_f) = (c.coord.step("post"), c.floor.step("post"));
        let get_r = ratio(get_c.0, get_f.0);
        let post_r = ratio(post_c.0, post_f.0);
        let op_r = ratio(c.coord.p50, c.floor.p50);
        let p99_r = ratio(c.coord.p99, c.floor.p99);
        let (lo, hi) = c
            .group_ratios
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(lo, hi), r| {
                (lo.min(*r), hi.max(*r))
            });
        writeln!(
            out,
            "| {} | {} | {} ({}) | {} | {} | {get_r:.2}× {} | {} | {} | {post_r:.2}× {} | {:.2} / {:.2} | {:.2} / {:.2} | {op_r:.2}× {} / {p99_r:.2}× {} | {lo:.2}–{hi:.2}× |",
            c.size,
            c.concurrency,
            c.coord.n,
            c.rounds,
            pair(get_c),
            pair(get_f),
            verdict(get_r, GOAL_STEP_RATIO),
            pair(post_c),
            pair(post_f),
            verdict(post_r, GOAL_STEP_RATIO),
            ms(c.coord.p50),
            ms(c.coord.p99),
            ms(c.floor.p50),
            ms(c.floor.p99),
            verdict(op_r, GOAL_RATIO),
            verdict(p99_r, GOAL_P99_RATIO),
        )
        .ok();
    }
    writeln!(out).ok();
    writeln!(
        out,
        "The floor's steps and raw S3 (p50 ms; each step's own p50, so they need not add up):"
    )
    .ok();
    writeln!(out).ok();
    writeln!(
        out,
        "| size | conc | floor GET: s3 / pg / decrypt | floor POST: kms / put / commit | raw S3 get / put | raw S3 op p50 / p99 | KMS calls/op | key-cache unwraps/op | cell wall s |"
    )
    .ok();
    writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|").ok();
    let p50 = |s: &Stats, k: &str| ms(s.step(k).0);
    for c in cells {
        writeln!(
            out,
            "| {} | {} | {:.2} / {:.2} / {:.2} | {:.2} / {:.2} / {:.2} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} | {:.2} | {:.1} |",
            c.size,
            c.concurrency,
            p50(&c.floor, "get.s3"),
            p50(&c.floor, "get.pg"),
            p50(&c.floor, "get.decrypt"),
            p50(&c.floor, "post.kms"),
            p50(&c.floor, "post.put"),
            p50(&c.floor, "post.commit"),
            p50(&c.raw, "get"),
            p50(&c.raw, "post"),
            ms(c.raw.p50),
            ms(c.raw.p99),
            c.kms_per_op,
            c.cache_unwraps_per_op,
            c.wall.as_secs_f64(),
        )
        .ok();
    }
    writeln!(
        out,
        "\nThe slowest 1% of the operations: total @ place in its round (GET / POST), ms"
    )
    .ok();
    for c in cells {
        writeln!(
            out,
            "- {} × {}: coordinator {}; floor {}",
            c.size, c.concurrency, c.slowest[0], c.slowest[1]
        )
        .ok();
    }
}

/// `BENCH_STATE_CACHE_BYTES`: the coordinator's `CAIRN_STATE_CACHE_BYTES` (default: its own
/// default; 0 measures every GET reading its object from S3).
fn state_cache_bytes() -> Result<usize> {
    match std::env::var("BENCH_STATE_CACHE_BYTES") {
        Err(_) => Ok(cairn_state_coordinator::app::sealed_cache::DEFAULT_BUDGET),
        Ok(raw) => raw
            .trim()
            .parse()
            .with_context(|| format!("BENCH_STATE_CACHE_BYTES={raw:?}: expected a byte count")),
    }
}

/// `BENCH_EVENT_RELAY_LINGER`: the coordinator's `CAIRN_EVENT_RELAY_LINGER` (unset: the
/// test configuration's; `0s` publishes each commit's event at once).
fn event_relay_linger() -> Result<Option<Duration>> {
    match std::env::var("BENCH_EVENT_RELAY_LINGER") {
        Err(_) => Ok(None),
        Ok(raw) => cairn_service::duration(raw.trim())
            .map(Some)
            .with_context(|| format!("BENCH_EVENT_RELAY_LINGER={raw:?}: expected a duration")),
    }
}

/// `/proc/loadavg`'s first three fields: the numbers mean little on a busy machine.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".to_owned(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// Removes every object version the run left in its bucket (moto keeps them in memory).
async fn empty_bucket(b: &Bench) -> Result<()> {
    let bucket = &b.app.aws.bucket;
    loop {
        let page = b.s3.list_object_versions().bucket(bucket).send().await?;
        let versions: Vec<_> = page
            .versions()
            .iter()
            .filter_map(|v| Some((v.key()?.to_owned(), v.version_id()?.to_owned())))
            .collect();
        if versions.is_empty() {
            return Ok(());
        }
        for (key, version) in versions {
            b.s3.delete_object()
                .bucket(bucket)
                .key(key)
                .version_id(version)
                .send()
                .await?;
        }
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let missing: Vec<&str> = VARS
        .into_iter()
        .filter(|v| std::env::var(v).map_or(true, |s| s.trim().is_empty()))
        .collect();
    if !missing.is_empty() {
        bail!(
            "{} not set: the benchmark needs the running PostgreSQL, NATS and moto; export \
             their addresses with `. /root/.cache/cairn/testenv.sh` or \
             `eval \"$(deploy/local/start.sh)\"` (from the repository root)",
            missing.join(", ")
        );
    }
    match std::env::var("BENCH_MODE").as_deref() {
        Err(_) | Ok("" | "floor") => {}
        Ok("scale") => return scale::run().await,
        Ok("large") => return large_state::run().await,
        Ok(other) => bail!("BENCH_MODE={other:?}: expected floor (default), scale or large"),
    }
    let iters = iterations()?;
    let load_before = load_average();
    let b = start().await?;
    let mut cells = Vec::new();
    for (i, (size, label)) in SIZES.into_iter().enumerate() {
        for concurrency in CONCURRENCY {
            eprintln!(
                "bench: {label} × concurrency {concurrency}, {} ops per mode …",
                iters[i]
            );
            cells.push(run_cell(&b, size, label, concurrency, iters[i]).await?);
        }
    }
    let mut out = String::new();
    print_tables(&cells, &mut out);
    println!("\n{out}");
    println!(
        "Machine load average (1/5/15 min) before: {load_before}, after: {}",
        load_average()
    );
    let cache_bytes = state_cache_bytes()?;
    println!(
        "Sealed cache (CAIRN_STATE_CACHE_BYTES): {cache_bytes} bytes{}",
        if cache_bytes == 0 {
            ": off, every GET reads its object from S3"
        } else {
            ": a GET of the generation the previous POST wrote asks S3 for a HEAD of it, not its bytes"
        }
    );
    println!(
        "Event relay linger (CAIRN_EVENT_RELAY_LINGER): {:?}",
        b.relay_linger
    );
    println!(
        "KMS calls/op counts every GenerateDataKey and Decrypt that reached the coordinator's \
         key manager during the measured operations."
    );
    if let Some(server) = b.app.server.as_ref() {
        cairn_service::Service::shutdown_token(server).cancel();
    }
    empty_bucket(&b).await?;
    Ok(())
}
