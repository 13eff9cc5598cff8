//! Benchmark of the coordinator's HTTP backend (GET + POST of a state, as tofu does during an
//! apply) against (a) raw S3 get + put of the same bytes and (b) the floor: raw S3 get + put
//! plus one KMS GenerateDataKey plus one PostgreSQL commit, all in one run against the same
//! moto bucket, KMS key and database. Run on demand, never in CI:
//!
//! ```text
//! . /root/.cache/cairn/testenv.sh && cargo bench -p cairn-state-coordinator --bench backend
//! ```
//!
//! `BENCH_ITERS` sets the measured operations per cell: one number for both sizes, or
//! `small,large` (default `200,50`). The goal of the issue is coordinator p50 ≤ 1.25× floor p50;
//! the bench prints PASS/MISS and never fails on it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../tests/common/mod.rs"]
mod common;

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

/// The issue's goal: coordinator p50 at most this many times the floor's p50.
const GOAL_RATIO: f64 = 1.25;
const SIZES: [(usize, &str); 2] = [(10 * 1024, "10 KB"), (1024 * 1024, "1 MB")];
const CONCURRENCY: [usize; 2] = [1, 16];
/// Modes are interleaved in rounds so that drift (machine load, store growth) hits each alike.
const ROUNDS: usize = 5;
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
    http: reqwest::Client,
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
    let config = Config {
        object_store: format!("s3://{}/cairn-bench", aws.bucket),
        run_lease: Duration::from_secs(3600),
        ..cairn_state_coordinator::testing::test_config(&db, &nats, &aws, &test_keys)
    };
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
        store: Store::S3,
        objects_dir: None,
        tenant: fx.tenant,
        instance: fx.instance,
        fx,
        http: http.clone(),
    };
    Ok(Bench {
        app,
        keys,
        s3,
        kms,
        floor_db,
        http,
    })
}

/// A v4 state document of exactly `size` bytes: the padding is one output's string value.
fn padded_doc(serial: u64, lineage: &str, size: usize) -> Bytes {
    const MARK: &[u8] = b"@PAD@";
    let mut skeleton = serde_json::to_vec(&serde_json::json!({
        "version": 4, "terraform_version": "1.12.6", "serial": serial, "lineage": lineage,
        "outputs": {"blob": {"value": "@PAD@", "type": "string"}},
        "resources": [], "check_results": null
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

    fn done(self) -> Sample {
        Sample {
            total: self.last - self.start,
            steps: self.steps,
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
            bucket: b.app.aws.bucket.clone(),
            prefix,
            lineage,
            size,
            serial: 1,
            current_key: String::new(),
        };
        w.current_key = w.key(1);
        let first = padded_doc(1, &w.lineage, size);
        w.s3.put_object()
            .bucket(&w.bucket)
            .key(&w.current_key)
            .body(ByteStream::from(first))
            .send()
            .await?;
        Ok(w)
    }

    fn key(&self, serial: u64) -> String {
        format!("{}/g{serial:012}-{}", self.prefix, Uuid::now_v7().simple())
    }

    fn prepare(&self, n: usize) -> Vec<Prepared> {
        (1..=n as u64)
            .map(|i| Prepared {
                doc: padded_doc(self.serial + i, &self.lineage, self.size),
                md5: String::new(),
                key: self.key(self.serial + i),
            })
            .collect()
    }

    /// Raw: get + put. Floor: get, GenerateDataKey, put, commit — sequential, in the order
    /// the coordinator does them.
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
        t.step("get");
        if let Some((kms, key_id, ctx)) = &self.kms {
            let dk = kms
                .generate_data_key()
                .key_id(key_id)
                .key_spec(DataKeySpec::Aes256)
                .set_encryption_context(Some(ctx.to_map().into_iter().collect()))
                .send()
                .await?;
            ensure!(dk.plaintext().is_some(), "GenerateDataKey without a key");
            t.step("kms");
        }
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(&next.key)
            .body(ByteStream::from(next.doc))
            .send()
            .await?;
        t.step("put");
        if let Some(db) = &self.db {
            let mut tx = db.begin().await?;
            sqlx::query("INSERT INTO scratch (op_id, size) VALUES ($1, $2)")
                .bind(op_id)
                .bind(size)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            t.step("commit");
        }
        let sample = t.done();

        ensure!(
            read.len() >= self.size,
            "raw GET returned {} bytes",
            read.len()
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
            for next in inputs {
                samples.push(w.op(next).await?);
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
    steps: BTreeMap<&'static str, Duration>,
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
                (k, percentile(&v, 0.50))
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
    let rounds = ROUNDS.min(per_worker);
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
    for mode in [Mode::Coordinator, Mode::RawS3, Mode::Floor] {
        let ws = workers.remove(&mode).expect("every mode has workers");
        let (ws, _) = round(ws, warmup).await?;
        workers.insert(mode, ws);
    }

    let kms_before = b.keys.calls();
    let cache_before = b.app.server().app().key_cache.unwrap_calls();
    let mut samples: BTreeMap<Mode, Vec<Sample>> = BTreeMap::new();
    let started = Instant::now();
    for r in 0..rounds {
        // Spread per_worker over the rounds; the first rounds take the remainder.
        let iters = per_worker / rounds + usize::from(r < per_worker % rounds);
        for mode in [Mode::Coordinator, Mode::RawS3, Mode::Floor] {
            let ws = workers.remove(&mode).expect("every mode has workers");
            let (ws, s) = round(ws, iters).await?;
            workers.insert(mode, ws);
            samples.entry(mode).or_default().extend(s);
        }
    }
    let wall = started.elapsed();
    let coord = stats(&samples[&Mode::Coordinator]);
    let ops = coord.n.max(1) as f64;
    Ok(Cell {
        size: label,
        concurrency,
        kms_per_op: (b.keys.calls() - kms_before) as f64 / ops,
        cache_unwraps_per_op: (b.app.server().app().key_cache.unwrap_calls() - cache_before) as f64
            / ops,
        coord,
        raw: stats(&samples[&Mode::RawS3]),
        floor: stats(&samples[&Mode::Floor]),
        wall,
    })
}

fn print_tables(cells: &[Cell], out: &mut String) {
    use std::fmt::Write;
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    writeln!(
        out,
        "| size | conc | ops | coordinator p50 / p99 ms | raw S3 p50 / p99 ms | floor p50 / p99 ms | KMS calls/op | coord/raw S3 p50 | coord/floor p50 | goal ≤ {GOAL_RATIO}× floor |"
    )
    .ok();
    writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|").ok();
    for c in cells {
        let vs_floor = ratio(c.coord.p50, c.floor.p50);
        writeln!(
            out,
            "| {} | {} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} | {:.2}× | {:.2}× | {} |",
            c.size,
            c.concurrency,
            c.coord.n,
            ms(c.coord.p50),
            ms(c.coord.p99),
            ms(c.raw.p50),
            ms(c.raw.p99),
            ms(c.floor.p50),
            ms(c.floor.p99),
            c.kms_per_op,
            ratio(c.coord.p50, c.raw.p50),
            vs_floor,
            if vs_floor <= GOAL_RATIO { "PASS" } else { "MISS" },
        )
        .ok();
    }
    writeln!(out).ok();
    writeln!(
        out,
        "Step medians (ms; each step's own p50, so they need not add up to the total):"
    )
    .ok();
    writeln!(out).ok();
    writeln!(
        out,
        "| size | conc | coordinator GET / POST | raw S3 get / put | floor get / kms / put / commit | key-cache unwraps/op | cell wall s |"
    )
    .ok();
    writeln!(out, "|---|---:|---:|---:|---:|---:|---:|").ok();
    let step = |s: &Stats, k: &str| s.steps.get(k).map_or(0.0, |d| ms(*d));
    for c in cells {
        writeln!(
            out,
            "| {} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} / {:.2} / {:.2} / {:.2} | {:.2} | {:.1} |",
            c.size,
            c.concurrency,
            step(&c.coord, "get"),
            step(&c.coord, "post"),
            step(&c.raw, "get"),
            step(&c.raw, "put"),
            step(&c.floor, "get"),
            step(&c.floor, "kms"),
            step(&c.floor, "put"),
            step(&c.floor, "commit"),
            c.cache_unwraps_per_op,
            c.wall.as_secs_f64(),
        )
        .ok();
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
