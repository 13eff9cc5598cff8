//! `BENCH_MODE=large`: a 100 MiB state round-trips through a coordinator started as a child
//! process (the real binary, as in production: PostgreSQL, NATS, S3 and KMS in moto), with
//! `CAIRN_MAX_STATE_BYTES` raised above the state. After a small warm-up write and read,
//! every round POSTs a new serial and GETs it back (compared byte for byte). The child's
//! resident set is read from `/proc/<pid>/status`: `VmRSS` before, and the peak (`VmHWM`)
//! of each request, reset in between through `/proc/<pid>/clear_refs` where the kernel
//! allows it. The goal is a peak RSS of at most 3× the state size (PASS/MISS, never a
//! failure). The child is killed on every way out.
//!
//! Knobs: `BENCH_LARGE_MB` (state size in MiB, default 100), `BENCH_LARGE_ROUNDS` (default
//! 3), `BENCH_LARGE_SHAPE`: `resources` (default: ~4.5 KB resources, each with one long
//! attribute, as a large real state is) or `output` (one output holding the whole padding,
//! the main mode's document), `BENCH_COORDINATOR_BIN` (another coordinator binary than the
//! one cargo built with the bench), `BENCH_LARGE_PROFILE=1` (the child's RSS sampled every
//! 2 ms during each request, printed where it moves). `MALLOC_*` and `GLIBC_TUNABLES` are
//! passed on to the child.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use cairn_proto::state as pb;
use cairn_state_coordinator::testing::Fixtures;
use cairn_testkit::{TestAws, TestKeys, TestNats};
use uuid::Uuid;

use super::common::{lock_info, md5_b64};
use super::{load_average, ms, padded_doc};

const MIB: usize = 1024 * 1024;
/// The goal: the coordinator's peak RSS at most this many times the state size.
const GOAL_FACTOR: f64 = 3.0;
/// The attribute that carries most of a resource's bytes in the `resources` shape.
const CONTENT_BYTES: usize = 4000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shape {
    Resources,
    Output,
}

struct Settings {
    bytes: usize,
    rounds: usize,
    shape: Shape,
    profile: bool,
}

impl Settings {
    fn from_env() -> Result<Self> {
        let number = |name: &str, default: usize| -> Result<usize> {
            match std::env::var(name) {
                Err(_) => Ok(default),
                Ok(raw) => raw
                    .trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .with_context(|| format!("{name}={raw:?}: expected a positive number")),
            }
        };
        let shape = match std::env::var("BENCH_LARGE_SHAPE").as_deref() {
            Err(_) | Ok("resources") => Shape::Resources,
            Ok("output") => Shape::Output,
            Ok(other) => bail!("BENCH_LARGE_SHAPE={other:?}: expected resources or output"),
        };
        Ok(Self {
            bytes: number("BENCH_LARGE_MB", 100)? * MIB,
            rounds: number("BENCH_LARGE_ROUNDS", 3)?,
            shape,
            profile: std::env::var("BENCH_LARGE_PROFILE").is_ok_and(|v| v == "1"),
        })
    }

    /// `CAIRN_MAX_STATE_BYTES` for the child: 128 MiB, or more for a larger state.
    fn max_state_bytes(&self) -> usize {
        (128 * MIB).max(self.bytes + self.bytes / 4)
    }
}

/// A v4 state of exactly `size` bytes made of managed resources (an `aws_s3_object` each,
/// ~4.5 KB, most of it its `content` attribute); the last resource's content takes up the
/// rest. Distinct per serial.
fn resources_doc(serial: u64, lineage: &str, size: usize) -> Bytes {
    let head = format!(
        r#"{{"version":4,"terraform_version":"1.12.6","serial":{serial},"lineage":"{lineage}","outputs":{{"bucket":{{"value":"cairn-bench","type":"string"}}}},"resources":["#
    );
    let tail = "],\"check_results\":null}\n";
    let prefix = |i: usize| {
        format!(
            r#"{sep}{{"mode":"managed","type":"aws_s3_object","name":"object_{i:06}","provider":"provider[\"registry.opentofu.org/hashicorp/aws\"]","instances":[{{"schema_version":0,"attributes":{{"bucket":"cairn-bench","content_type":"text/plain","etag":"{etag:032x}","id":"objects/{i:06}","key":"objects/{i:06}","tags":{{"serial":"{serial}","team":"platform"}},"content":""#,
            sep = if i == 0 { "" } else { "," },
            etag = (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u128::from(serial),
        )
    };
    const SUFFIX: &str = r#""},"sensitive_attributes":[],"private":"eyJzY2hlbWFfdmVyc2lvbiI6IjAifQ==","dependencies":["aws_s3_bucket.main"]}]}"#;
    let mut doc = Vec::with_capacity(size);
    doc.extend_from_slice(head.as_bytes());
    let shift = usize::try_from(serial % 26).unwrap_or(0);
    let mut i = 0;
    loop {
        let p = prefix(i);
        let fixed = p.len() + SUFFIX.len();
        let remaining = size.saturating_sub(doc.len() + tail.len());
        let last = remaining < fixed + 2 * CONTENT_BYTES;
        let content = if last {
            remaining.saturating_sub(fixed)
        } else {
            CONTENT_BYTES
        };
        doc.extend_from_slice(p.as_bytes());
        doc.extend((0..content).map(|j| b"abcdefghijklmnopqrstuvwxyz"[(i * 7 + j + shift) % 26]));
        doc.extend_from_slice(SUFFIX.as_bytes());
        if last {
            break;
        }
        i += 1;
    }
    doc.extend_from_slice(tail.as_bytes());
    Bytes::from(doc)
}

fn document(shape: Shape, serial: u64, lineage: &str, size: usize) -> Bytes {
    match shape {
        Shape::Resources => resources_doc(serial, lineage, size),
        Shape::Output => padded_doc(serial, lineage, size),
    }
}

/// Resident set of a process: now and its peak since start (or the last reset).
#[derive(Clone, Copy, Debug)]
struct Memory {
    rss: u64,
    peak: u64,
}

fn memory(pid: u32) -> Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .with_context(|| format!("no {name} in /proc/{pid}/status"))?;
        let kb: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .with_context(|| format!("parse {line:?}"))?;
        Ok(kb * 1024)
    };
    Ok(Memory {
        rss: field("VmRSS:")?,
        peak: field("VmHWM:")?,
    })
}

/// Resets the peak (`VmHWM`) to the current RSS; false when the kernel refuses.
fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

fn free_addr() -> Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// The coordinator binary as a child process; killed when dropped.
struct Coordinator {
    child: tokio::process::Child,
    pid: u32,
    log: PathBuf,
    grpc: SocketAddr,
}

impl Coordinator {
    async fn start(
        db: &cairn_db::TestDatabase,
        nats: &TestNats,
        aws: &TestAws,
        keys: &TestKeys,
        dir: &Path,
        max_state_bytes: usize,
    ) -> Result<(Self, SocketAddr)> {
        let (grpc, http) = (free_addr()?, free_addr()?);
        let log = dir.join("coordinator.log");
        let out = std::fs::File::create(&log)?;
        let env_or = |name: &str, default: &str| std::env::var(name).unwrap_or(default.to_owned());
        let bin = std::env::var_os("BENCH_COORDINATOR_BIN").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_cairn-state-coordinator")),
            PathBuf::from,
        );
        let mut cmd = tokio::process::Command::new(&bin);
        cmd.env_clear()
            .env("PATH", env_or("PATH", "/usr/bin:/bin"))
            .env("RUST_LOG", env_or("RUST_LOG", "info"))
            .env("CAIRN_DATABASE_URL", &db.runtime_url)
            .env("CAIRN_DATABASE_MIGRATE_URL", &db.migrate_url)
            .env("CAIRN_NATS_URL", &nats.url)
            .env("CAIRN_NATS_PREFIX", &nats.prefix)
            .env("CAIRN_GRPC_ADDR", grpc.to_string())
            .env("CAIRN_HTTP_ADDR", http.to_string())
            .env(
                "CAIRN_OBJECT_STORE",
                format!("s3://{}/cairn-large", aws.bucket),
            )
            .env("CAIRN_S3_ENDPOINT", &aws.endpoint)
            .env("CAIRN_KMS_KEY", &aws.kms_key_id)
            .env("CAIRN_KMS_ENDPOINT", &aws.endpoint)
            .env("CAIRN_JWT_PUBLIC_KEYS_FILE", keys.jwks_path())
            .env("CAIRN_MAX_STATE_BYTES", max_state_bytes.to_string())
            .env("CAIRN_RUN_LEASE", "1h")
            .env("CAIRN_SWEEP_INTERVAL", "1h")
            .env("AWS_ACCESS_KEY_ID", cairn_testkit::aws::ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", cairn_testkit::aws::SECRET_KEY)
            .env("AWS_REGION", &aws.region)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .envs(std::env::vars().filter(|(k, _)| {
                // Allocator settings, to compare (e.g. GLIBC_TUNABLES=glibc.malloc.…).
                k.starts_with("MALLOC_") || k == "GLIBC_TUNABLES"
            }))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out))
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("spawn {}", bin.display()))?;
        let pid = child.id().context("the child has no pid")?;
        // Ready once both listeners accept connections (the HTTP backend binds last).
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if tokio::net::TcpStream::connect(http).await.is_ok()
                && tokio::net::TcpStream::connect(grpc).await.is_ok()
            {
                break;
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "the coordinator exited during start-up ({status}):\n{}",
                    tail(&log)
                );
            }
            ensure!(
                Instant::now() < deadline,
                "the coordinator did not start within 60 s:\n{}",
                tail(&log)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok((
            Self {
                child,
                pid,
                log,
                grpc,
            },
            http,
        ))
    }

    /// The child's memory; fails (with its log) when it has exited.
    fn memory(&mut self) -> Result<Memory> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the coordinator exited ({status}):\n{}", tail(&self.log));
        }
        memory(self.pid)
    }

    async fn stop(mut self) -> Result<()> {
        self.child.start_kill().ok();
        self.child.wait().await?;
        Ok(())
    }
}

/// The last lines of the child's log.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// One round: the POST and the GET of one serial.
struct Round {
    serial: u64,
    post: Duration,
    get: Duration,
    before: Memory,
    post_peak: u64,
    get_peak: u64,
    after: Memory,
    post_profile: Option<String>,
    get_profile: Option<String>,
}

/// Samples the child's RSS every 2 ms while one request runs (`BENCH_LARGE_PROFILE=1`).
struct Sampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<Vec<(Duration, u64)>>,
}

impl Sampler {
    fn start(pid: u32) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut samples = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(m) = memory(pid) {
                    samples.push((started.elapsed(), m.rss));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            samples
        });
        Self { stop, task }
    }

    /// The RSS over time as `ms:MiB` points, one wherever it moved by 8 MiB or more.
    async fn finish(self) -> Result<String> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let samples = self.task.await?;
        let mut points: Vec<String> = Vec::new();
        let mut last: Option<u64> = None;
        for (i, (t, rss)) in samples.iter().enumerate() {
            let moved = last.is_none_or(|l| rss.abs_diff(l) >= 8 * MIB as u64);
            if moved || i + 1 == samples.len() {
                points.push(format!("{:.0}:{:.0}", ms(*t), mib(*rss)));
                last = Some(*rss);
            }
        }
        Ok(points.join(" "))
    }
}

/// What tofu holds: the backend addresses and the run token of an admitted apply.
struct Tofu {
    http: reqwest::Client,
    address: String,
    lock_address: String,
    token: String,
    lock_id: String,
}

impl Tofu {
    async fn lock(&self) -> Result<()> {
        let info = lock_info(&self.lock_id, "OperationTypeApply");
        let resp = self
            .http
            .request(reqwest::Method::from_bytes(b"LOCK")?, &self.lock_address)
            .basic_auth("run", Some(&self.token))
            .header("content-type", "application/json")
            .header("content-md5", md5_b64(info.as_bytes()))
            .body(info)
            .send()
            .await?;
        let status = resp.status();
        ensure!(status == 200, "LOCK {status}: {}", resp.text().await?);
        Ok(())
    }

    async fn post(&self, doc: &Bytes) -> Result<Duration> {
        let md5 = md5_b64(doc);
        let started = Instant::now();
        let resp = self
            .http
            .post(format!("{}?ID={}", self.address, self.lock_id))
            .basic_auth("run", Some(&self.token))
            .header("content-type", "application/json")
            .header("content-md5", md5)
            .body(doc.clone())
            .send()
            .await?;
        let status = resp.status();
        let text = resp.text().await?;
        let took = started.elapsed();
        ensure!(status == 200, "POST {status}: {text}");
        Ok(took)
    }

    async fn get(&self, expected: &Bytes) -> Result<Duration> {
        let started = Instant::now();
        let resp = self
            .http
            .get(&self.address)
            .basic_auth("run", Some(&self.token))
            .send()
            .await?;
        let status = resp.status();
        let body = resp.bytes().await?;
        let took = started.elapsed();
        ensure!(
            status == 200,
            "GET {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        );
        ensure!(
            body.len() == expected.len() && body == *expected,
            "GET returned {} bytes that differ from the {} bytes written",
            body.len(),
            expected.len()
        );
        Ok(took)
    }
}

async fn admit(c: &Coordinator, http_addr: SocketAddr, keys: &TestKeys) -> Result<Tofu> {
    let channel = cairn_testkit::connect_grpc(c.grpc).await;
    let fx = Fixtures::new(channel, keys.service_token());
    let state_id = fx
        .create_state(&format!("large-{}", Uuid::new_v4().simple()))
        .await;
    let run_id = fx.register(&state_id, pb::RunKind::Apply, "dev").await;
    let admitted = fx.admit(&run_id).await.context("AdmitRun")?;
    let backend = admitted
        .backend
        .context("AdmitRun without backend addresses")?;
    ensure!(
        backend.address.contains(&http_addr.port().to_string()),
        "the backend address {} is not the child's HTTP listener {http_addr}",
        backend.address
    );
    Ok(Tofu {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(600))
            .build()?,
        address: backend.address,
        lock_address: backend.lock_address,
        token: admitted.run_token,
        lock_id: Uuid::new_v4().to_string(),
    })
}

async fn round_trips(c: &mut Coordinator, tofu: &Tofu, s: &Settings) -> Result<Report> {
    let lineage = Uuid::new_v4().to_string();
    // Warm-up: pools, clients and the data-key cache, with a small state.
    let small = document(s.shape, 1, &lineage, 64 * 1024);
    tofu.post(&small).await.context("warm-up POST")?;
    tofu.get(&small).await.context("warm-up GET")?;
    drop(small);
    let baseline = c.memory()?;
    let resettable = reset_peak(c.pid);

    let mut rounds = Vec::with_capacity(s.rounds);
    for r in 0..s.rounds {
        let serial = 2 + r as u64;
        let built = Instant::now();
        let doc = document(s.shape, serial, &lineage, s.bytes);
        ensure!(doc.len() == s.bytes, "built {} bytes", doc.len());
        eprintln!(
            "bench (large): round {}: {} bytes built in {:.1} s; POST …",
            r + 1,
            doc.len(),
            built.elapsed().as_secs_f64()
        );
        if resettable {
            reset_peak(c.pid);
        }
        let before = c.memory()?;
        let sampler = s.profile.then(|| Sampler::start(c.pid));
        let post = tofu
            .post(&doc)
            .await
            .with_context(|| format!("POST serial {serial}"))?;
        let post_profile = match sampler {
            Some(sampler) => Some(sampler.finish().await?),
            None => None,
        };
        let post_peak = c.memory()?.peak;
        if resettable {
            reset_peak(c.pid);
        }
        let sampler = s.profile.then(|| Sampler::start(c.pid));
        let get = tofu
            .get(&doc)
            .await
            .with_context(|| format!("GET serial {serial}"))?;
        let get_profile = match sampler {
            Some(sampler) => Some(sampler.finish().await?),
            None => None,
        };
        let after = c.memory()?;
        rounds.push(Round {
            serial,
            post,
            get,
            before,
            post_peak,
            get_peak: after.peak,
            after,
            post_profile,
            get_profile,
        });
    }
    Ok(Report {
        baseline,
        resettable,
        rounds,
    })
}

struct Report {
    baseline: Memory,
    resettable: bool,
    rounds: Vec<Round>,
}

fn print(report: &Report, s: &Settings, load_before: &str) {
    let mut out = String::new();
    let size = s.bytes as u64;
    writeln!(
        out,
        "State: {} bytes ({:.0} MiB), shape `{}`; CAIRN_MAX_STATE_BYTES={}; coordinator as a child process (S3 and KMS in moto).\n",
        s.bytes,
        mib(size),
        match s.shape {
            Shape::Resources => "resources",
            Shape::Output => "output",
        },
        s.max_state_bytes()
    )
    .ok();
    writeln!(
        out,
        "| round | serial | POST ms | GET ms | RSS before MiB | peak during POST MiB | peak during GET MiB | RSS after MiB |"
    )
    .ok();
    writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|").ok();
    for (i, r) in report.rounds.iter().enumerate() {
        writeln!(
            out,
            "| {} | {} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} |",
            i + 1,
            r.serial,
            ms(r.post),
            ms(r.get),
            mib(r.before.rss),
            mib(r.post_peak),
            mib(r.get_peak),
            mib(r.after.rss),
        )
        .ok();
    }
    let peak = report
        .rounds
        .iter()
        .flat_map(|r| [r.post_peak, r.get_peak])
        .max()
        .unwrap_or(0)
        .max(if report.resettable {
            0
        } else {
            report.baseline.peak
        });
    let base = report.baseline.rss;
    let factor = peak as f64 / size as f64;
    let growth = peak.saturating_sub(base) as f64 / size as f64;
    writeln!(out).ok();
    writeln!(
        out,
        "Coordinator RSS after warm-up (baseline): {:.1} MiB; peak RSS: {:.1} MiB = {factor:.2}× the state; peak − baseline: {:.1} MiB = {growth:.2}× the state. Goal: peak ≤ {GOAL_FACTOR}× the state ({:.0} MiB): {}",
        mib(base),
        mib(peak),
        mib(peak.saturating_sub(base)),
        GOAL_FACTOR * mib(size),
        if factor <= GOAL_FACTOR { "PASS" } else { "MISS" },
    )
    .ok();
    for (i, r) in report.rounds.iter().enumerate() {
        if let (Some(post), Some(get)) = (&r.post_profile, &r.get_profile) {
            writeln!(
                out,
                "RSS over time (ms:MiB), round {}: POST {post} | GET {get}",
                i + 1
            )
            .ok();
        }
    }
    if !report.resettable {
        writeln!(
            out,
            "(/proc/<pid>/clear_refs refused a reset: the peaks are the process's peak since it started.)"
        )
        .ok();
    }
    writeln!(
        out,
        "Machine load average (1/5/15 min) before: {load_before}, after: {}",
        load_average()
    )
    .ok();
    println!("\n{out}");
}

/// Removes every object version in the bucket (moto keeps them in memory).
async fn empty(aws: &TestAws) -> Result<()> {
    loop {
        let page = aws
            .s3
            .list_object_versions()
            .bucket(&aws.bucket)
            .send()
            .await?;
        let versions: Vec<_> = page
            .versions()
            .iter()
            .filter_map(|v| Some((v.key()?.to_owned(), v.version_id()?.to_owned())))
            .collect();
        if versions.is_empty() {
            return Ok(());
        }
        for (key, version) in versions {
            aws.s3
                .delete_object()
                .bucket(&aws.bucket)
                .key(key)
                .version_id(version)
                .send()
                .await?;
        }
    }
}

pub async fn run() -> Result<()> {
    let s = Settings::from_env()?;
    let load_before = load_average();
    let db = cairn_testkit::fresh_database().await;
    let nats = cairn_testkit::connect_nats().await;
    let aws = TestAws::create().await;
    let keys = TestKeys::new();
    let dir = cairn_testkit::temp_dir();
    eprintln!(
        "bench (large): starting the coordinator binary; {} rounds of {} MiB …",
        s.rounds,
        s.bytes / MIB
    );
    let (mut coordinator, http) =
        Coordinator::start(&db, &nats, &aws, &keys, dir.path(), s.max_state_bytes()).await?;
    let measured = async {
        let tofu = admit(&coordinator, http, &keys).await?;
        tofu.lock().await?;
        round_trips(&mut coordinator, &tofu, &s).await
    }
    .await;
    let log = coordinator.log.clone();
    coordinator.stop().await?;
    let emptied = empty(&aws).await;
    let report =
        measured.with_context(|| format!("large-state round trips (log: {})", tail(&log)))?;
    emptied.context("empty the bench bucket")?;
    print(&report, &s, &load_before);
    Ok(())
}
