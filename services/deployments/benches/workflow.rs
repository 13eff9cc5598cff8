//! The workflow's own cost on a wide, deep DAG: a generated 100-resource template (10 layers
//! of 10; each resource takes inputs from two of the layer before it) of the local module
//! family, deployed through the in-process rig of tests/workflow (real coordinator on
//! moto, tenancy, templates, the runner with the process executor running tofu-sim, the
//! deployments service with its worker), runner concurrency and CAIRN_DEPLOY_PARALLELISM 10.
//! Two instances of it are deployed one after the other and each deployment is reported: the
//! first on the freshly started platform, whose connection pools, gRPC channels and
//! prepared statements open as it goes, then the measured one, on a platform that has
//! deployed before (as every deployment of a running platform but its first is).
//!
//! It reports, from the step rows of each deployment:
//! - the deployment's wall time (request to finish) against its critical path: the longest
//!   chain of the runs' own durations (RunResult.started_at → finished_at) through the
//!   dependencies, a phase's runs after the previous phase's, and a run that waited for a
//!   free slot after the run that freed it (the executed schedule's chain, walked back from
//!   the last run to end); and, for the apply phase alone, the longest dependency chain;
//! - the workflow's cost per step: from the last upstream's result recorded to the
//!   dependent's run request (p50/p99), and the whole hop from the upstream run's end to the
//!   dependent run's start (NATS, the runner's pickup and the coordinator's admission too).
//!
//! Run: `source /tmp/cairn-env.sh`-style CAIRN_TEST_* variables for PostgreSQL, NATS and
//! moto, tofu-sim built (deploy/images/tofu-sim/build.sh), then
//! `cargo bench -p cairn-deployments --bench workflow`. `CAIRN_BENCH_RESOURCE_DELAY=1s`
//! makes every tofu-sim resource take that long (runs of real providers take seconds).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[allow(dead_code)]
#[path = "../tests/api/helpers.rs"]
mod helpers;
#[allow(dead_code)]
#[path = "../tests/workflow/rig.rs"]
mod rig;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

use cairn_proto::deployments as pb;
use chrono::{DateTime, Utc};
use sqlx::{Connection, Row};
use uuid::Uuid;

use rig::{Opts, rig, status};

const WIDTH: usize = 10;
const DEPTH: usize = 10;
/// `CAIRN_DEPLOY_PARALLELISM` and the runner's concurrency unless `BENCH_PARALLELISM` /
/// `BENCH_RUNNER_CONCURRENCY` say otherwise (the setting: both at least 10).
const PARALLELISM: usize = 10;

fn knob(name: &str) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(PARALLELISM)
}

fn name(layer: usize, i: usize) -> String {
    format!("l{layer}r{i}")
}

/// Layer 0: networks. Then even positions are networks taking their address range from
/// the network above them and their DNS domain from the next resource's name; odd ones are
/// queues on the network beside them in the layer above.
fn template() -> String {
    let mut y = String::from("name: grid\ndescription: generated, 10 layers of 10\nresources:\n");
    for layer in 0..DEPTH {
        for i in 0..WIDTH {
            let me = name(layer, i);
            if layer == 0 {
                writeln!(
                    y,
                    "  {me}:\n    module: local/network\n    inputs:\n      name: grid-{me}\n      cidr: 10.{i}.0.0/16\n      dns_domain: internal"
                )
                .unwrap();
            } else if i % 2 == 0 {
                let (a, b) = (name(layer - 1, i), name(layer - 1, (i + 1) % WIDTH));
                writeln!(
                    y,
                    "  {me}:\n    module: local/network\n    inputs:\n      name: grid-{me}\n      cidr: ${{resources.{a}.cidr}}\n      dns_domain: ${{resources.{b}.name}}"
                )
                .unwrap();
            } else {
                let up = name(layer - 1, i - 1);
                writeln!(
                    y,
                    "  {me}:\n    module: local/queue\n    inputs:\n      name: grid-{me}\n      network: ${{resources.{up}}}\n      topics: [t{layer}]"
                )
                .unwrap();
            }
        }
    }
    y
}

struct Run {
    run_id: Uuid,
    kind: String,
    resource: String,
    depends_on: Vec<String>,
    requested_at: DateTime<Utc>,
    result_at: DateTime<Utc>,
    /// The run persisted (its root config rendered), and its step's end.
    created_at: DateTime<Utc>,
    step_finished_at: DateTime<Utc>,
    started_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
}

impl Run {
    fn duration(&self) -> Duration {
        (self.finished_at - self.started_at)
            .to_std()
            .unwrap_or_default()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn since(a: DateTime<Utc>, b: DateTime<Utc>) -> Duration {
    (b - a).to_std().unwrap_or_default()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64)).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The executed schedule's chain: from the run that ended last, back through the run that
/// ended last before it was requested, and so on; first run first.
fn executed_chain(runs: &[Run]) -> Vec<&Run> {
    let Some(mut at) = runs.iter().max_by_key(|r| r.finished_at) else {
        return Vec::new();
    };
    let mut chain = vec![at];
    while let Some(before) = runs
        .iter()
        .filter(|r| r.finished_at <= at.requested_at)
        .max_by_key(|r| r.finished_at)
    {
        chain.push(before);
        at = before;
    }
    chain.reverse();
    chain
}

/// The longest dependency chain of the apply runs (their own durations).
fn dependency_chain(applies: &[&Run]) -> Duration {
    let by_name: HashMap<&str, &Run> = applies.iter().map(|r| (r.resource.as_str(), *r)).collect();
    let mut memo: HashMap<&str, Duration> = HashMap::new();
    fn longest<'a>(
        r: &'a Run,
        by_name: &HashMap<&str, &'a Run>,
        memo: &mut HashMap<&'a str, Duration>,
    ) -> Duration {
        if let Some(d) = memo.get(r.resource.as_str()) {
            return *d;
        }
        let up = r
            .depends_on
            .iter()
            .filter_map(|d| by_name.get(d.as_str()))
            .map(|u| longest(u, by_name, memo))
            .max()
            .unwrap_or_default();
        let d = up + r.duration();
        memo.insert(r.resource.as_str(), d);
        d
    }
    applies
        .iter()
        .map(|r| longest(r, &by_name, &mut memo))
        .max()
        .unwrap_or_default()
}

/// What the coordinator's database recorded of each run: when `RegisterRun` inserted it, and
/// of its latest attempt when `AdmitRun` and `FinishRun` began (their transactions' start).
struct Coordinator {
    registered: HashMap<Uuid, DateTime<Utc>>,
    admitting: HashMap<Uuid, DateTime<Utc>>,
    finishing: HashMap<Uuid, DateTime<Utc>>,
}

impl Coordinator {
    async fn read(url: &str) -> Self {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query("SET search_path = state")
            .execute(&mut conn)
            .await
            .unwrap();
        type Times = (
            Uuid,
            DateTime<Utc>,
            Option<DateTime<Utc>>,
            Option<DateTime<Utc>>,
        );
        let rows: Vec<Times> = sqlx::query_as(
            "SELECT r.run_id, r.created_at, a.created_at, a.finished_at
                   FROM runs r LEFT JOIN attempts a
                     ON a.run_id = r.run_id AND a.attempt = r.current_attempt",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap();
        let mut c = Coordinator {
            registered: HashMap::new(),
            admitting: HashMap::new(),
            finishing: HashMap::new(),
        };
        for (run, registered, admitting, finishing) in rows {
            c.registered.insert(run, registered);
            c.admitting.extend(admitting.map(|t| (run, t)));
            c.finishing.extend(finishing.map(|t| (run, t)));
        }
        c
    }
}

/// The machine's CPU time so far (all cores, from /proc/stat): busy and total jiffies.
fn machine_cpu() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal …: idle and iowait are not busy.
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// CPU seconds (user + system, clock ticks) used so far by the processes of this machine
/// the deployment runs on: this bench (every service is in it), the tofu-sim runs it
/// waited for, moto, PostgreSQL and NATS.
fn cpu_by_process() -> Vec<(&'static str, u64)> {
    let mut by: Vec<(&'static str, u64)> = vec![
        ("services (this process)", 0),
        ("tofu-sim runs (its children)", 0),
        ("moto (S3, KMS)", 0),
        ("PostgreSQL", 0),
        ("NATS", 0),
    ];
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return by;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state is field 3, utime 14 … cstime 17.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<u64> = rest
            .split_whitespace()
            .skip(11)
            .take(4)
            .filter_map(|x| x.parse().ok())
            .collect();
        if f.len() < 4 {
            continue;
        }
        let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if pid == me {
            by[0].1 += f[0] + f[1];
            by[1].1 += f[2] + f[3];
        } else if cmdline.contains("moto_server") {
            by[2].1 += f[0] + f[1];
        } else if cmdline.starts_with("postgres") || cmdline.contains("bin/postgres") {
            by[3].1 += f[0] + f[1];
        } else if cmdline.starts_with("nats-server") {
            by[4].1 += f[0] + f[1];
        }
    }
    by
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let delay = std::env::var("CAIRN_BENCH_RESOURCE_DELAY")
        .ok()
        .filter(|d| !d.is_empty())
        .map(|d| &*Box::leak(d.into_boxed_str()));
    let (parallelism, runner_concurrency) =
        (knob("BENCH_PARALLELISM"), knob("BENCH_RUNNER_CONCURRENCY"));
    let rig = rig(Opts {
        runner_concurrency,
        parallelism,
        resource_delay: delay,
        admit_timeout: Duration::from_secs(300),
        templates: vec![("grid".to_owned(), template())],
        ..Opts::default()
    })
    .await;
    let knobs = Knobs {
        delay,
        parallelism,
        runner_concurrency,
    };
    // The same deployment twice, each of an instance of its own: the first on the freshly
    // started platform (every pool, channel and consumer still opening), then the measured
    // one, on a platform that has deployed before, as a running platform's deployments are.
    println!("first deployment (a fresh platform's pools and channels opening as it goes):");
    deploy_and_report(&rig, "warmup", knobs).await;
    println!();
    println!("measured deployment (the platform has deployed once before):");
    deploy_and_report(&rig, "grid", knobs).await;
}

/// The bench's settings, printed with each report.
#[derive(Clone, Copy)]
struct Knobs {
    delay: Option<&'static str>,
    parallelism: usize,
    runner_concurrency: usize,
}

/// Creates an instance `name` of the grid template, deploys it, and reports the deployment.
async fn deploy_and_report(rig: &rig::Rig, name: &str, knobs: Knobs) {
    let Knobs {
        delay,
        parallelism,
        runner_concurrency,
    } = knobs;
    let (mut instances, mut deployments) = rig.clients();
    instances
        .create_instance(pb::CreateInstanceRequest {
            tenant_id: rig.tenant.to_string(),
            name: name.into(),
            template_ref: "grid".into(),
            target_ref: "local".into(),
            environment: "staging".into(),
            parameters_json: "{}".into(),
            ..Default::default()
        })
        .await
        .expect("create the instance");
    let cpu_before = machine_cpu();
    let procs_before = cpu_by_process();
    let id = deployments
        .create_deployment(pb::CreateDeploymentRequest {
            tenant_id: rig.tenant.to_string(),
            instance_ref: name.into(),
            kind: pb::DeploymentKind::Deploy as i32,
            ..Default::default()
        })
        .await
        .expect("create deployment")
        .into_inner()
        .deployment
        .unwrap()
        .deployment_id;
    let d = rig.settled(&id).await;
    let cpu_after = machine_cpu();
    let procs_after = cpu_by_process();
    assert_eq!(
        status(&d),
        pb::DeploymentStatus::Succeeded,
        "the grid did not deploy: {d:#?}"
    );

    let mut conn = sqlx::PgConnection::connect(&rig.db.admin_url)
        .await
        .unwrap();
    sqlx::query("SET search_path = deployments")
        .execute(&mut conn)
        .await
        .unwrap();
    let deployment_id = Uuid::parse_str(&id).unwrap();
    type Times = (DateTime<Utc>, DateTime<Utc>, Option<DateTime<Utc>>);
    let (created_at, finished_at, job_started_at): Times = sqlx::query_as(
        "SELECT created_at, finished_at, started_at FROM deployments WHERE deployment_id = $1",
    )
    .bind(deployment_id)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    // The deployment's job left the message outbox (the bench's deployments follow each
    // other, so its job is the first one written at or after its request).
    let job_relayed: Option<DateTime<Utc>> = sqlx::query_scalar(
        "SELECT min(sent_at) FROM message_outbox WHERE subject LIKE '%deployq' AND created_at >= $1",
    )
    .bind(created_at)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let runs: Vec<Run> = sqlx::query(
        "SELECT r.kind, s.resource, s.depends_on, r.requested_at, r.result_at, r.run_started_at,
                r.run_finished_at, r.created_at, s.finished_at, r.run_id
           FROM step_runs r JOIN steps s ON s.step_id = r.step_id
          WHERE r.deployment_id = $1 AND r.outcome = 'succeeded'",
    )
    .bind(deployment_id)
    .fetch_all(&mut conn)
    .await
    .unwrap()
    .iter()
    .map(|row| Run {
        kind: row.get(0),
        resource: row.get(1),
        depends_on: row.get(2),
        requested_at: row.get(3),
        result_at: row.get(4),
        started_at: row.get(5),
        finished_at: row.get(6),
        created_at: row.get(7),
        step_finished_at: row.get(8),
        run_id: row.get(9),
    })
    .collect();
    let applies: Vec<&Run> = runs.iter().filter(|r| r.kind == "apply").collect();
    assert_eq!(applies.len(), WIDTH * DEPTH, "one apply run per resource");
    // When each run request left the message outbox (the relay's transaction start).
    let sent: HashMap<Uuid, DateTime<Utc>> = sqlx::query_as::<_, (String, DateTime<Utc>)>(
        "SELECT msg_id, sent_at FROM message_outbox WHERE sent_at IS NOT NULL",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap()
    .into_iter()
    .filter_map(|(id, at)| Some((Uuid::parse_str(&id).ok()?, at)))
    .collect();
    let coordinator = Coordinator::read(&rig.coord_db.admin_url).await;

    let wall = since(created_at, finished_at);
    let chain_runs = executed_chain(&runs);
    let chain: Duration = chain_runs.iter().map(|r| r.duration()).sum();
    let chain_len = chain_runs.len();
    let apply_start = applies.iter().map(|r| r.requested_at).min().unwrap();
    let apply_end = applies.iter().map(|r| r.result_at).max().unwrap();
    let apply_wall = since(apply_start, apply_end);
    let apply_chain = dependency_chain(&applies);

    // Per dependent apply: its last upstream's result → its request, and the upstream
    // run's end → its own start.
    let by_name: HashMap<&str, &Run> = applies.iter().map(|r| (r.resource.as_str(), *r)).collect();
    let mut cost = Vec::new();
    let mut hop = Vec::new();
    // The cost's parts: result recorded → the upstream's step ended (applied, its event);
    // → the dependent's run persisted (outputs read, root config rendered); → requested
    // (RegisterRun at the coordinator, the step's transaction with the run request).
    let (mut ended, mut rendered, mut registered) = (Vec::new(), Vec::new(), Vec::new());
    let mut segments: Vec<Vec<Duration>> = vec![Vec::new(); HOP_SEGMENTS.len()];
    let (mut finish_to_end, mut relay) = (Vec::new(), Vec::new());
    for r in &applies {
        let ups: Vec<&Run> = r
            .depends_on
            .iter()
            .filter_map(|d| by_name.get(d.as_str()).copied())
            .collect();
        let Some(last) = ups.iter().max_by_key(|u| u.result_at) else {
            continue;
        };
        cost.push(since(last.result_at, r.requested_at));
        let last_step = ups.iter().map(|u| u.step_finished_at).max().unwrap();
        ended.push(since(last.result_at, last_step));
        rendered.push(since(last_step, r.created_at));
        registered.push(since(r.created_at, r.requested_at));
        let last_end = ups.iter().map(|u| u.finished_at).max().unwrap();
        hop.push(since(last_end, r.started_at));
        // The hop from the gating upstream's run end, boundary by boundary.
        let gate = ups.iter().max_by_key(|u| u.finished_at).unwrap();
        let id = r.run_id;
        let marks = [
            Some(gate.finished_at),
            Some(gate.result_at),
            Some(last_step),
            Some(r.created_at),
            coordinator.registered.get(&id).copied(),
            Some(r.requested_at),
            coordinator.admitting.get(&id).copied(),
            Some(r.started_at),
        ];
        for (i, pair) in marks.windows(2).enumerate() {
            if let [Some(a), Some(b)] = pair {
                segments[i].push(since(*a, *b));
            }
        }
        if let Some(relayed) = sent.get(&id) {
            relay.push(since(r.requested_at, *relayed));
        }
        if let Some(finishing) = coordinator.finishing.get(&gate.run_id) {
            finish_to_end.push(since(*finishing, gate.finished_at));
        }
    }
    for v in &mut segments {
        v.sort();
    }
    finish_to_end.sort();
    relay.sort();
    for v in [
        &mut cost,
        &mut hop,
        &mut ended,
        &mut rendered,
        &mut registered,
    ] {
        v.sort();
    }
    let durations: Vec<Duration> = {
        let mut d: Vec<Duration> = runs.iter().map(Run::duration).collect();
        d.sort();
        d
    };

    let verifies = runs
        .iter()
        .filter(|r| r.kind == "verify" || r.kind == "preview")
        .count();
    println!(
        "workflow bench: {WIDTH}x{DEPTH} resources, parallelism {parallelism}, runner concurrency {runner_concurrency}, tofu-sim resource delay {}",
        delay.unwrap_or("none")
    );
    println!(
        "  runs: {} applies, {verifies} verify plans; run duration p50 {} p99 {}",
        applies.len(),
        ms(percentile(&durations, 50.0)),
        ms(percentile(&durations, 99.0))
    );
    if let (Some((b0, t0)), Some((b1, t1))) = (cpu_before, cpu_after) {
        // Near 100%, the deployment waited for CPU (the services, tofu-sim, moto and
        // PostgreSQL share this machine's cores), not for the workflow.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        println!(
            "  machine CPU busy while deploying: {:.0}% of {cores} cores",
            100.0 * (b1 - b0) as f64 / (t1 - t0).max(1) as f64
        );
    }
    // Clock ticks are 1/100 s on Linux.
    let parts: Vec<String> = procs_before
        .iter()
        .zip(&procs_after)
        .map(|((what, a), (_, b))| format!("{what} {:.1}", (b - a) as f64 / 100.0))
        .collect();
    println!("  CPU seconds while deploying: {}", parts.join(", "));
    println!(
        "  deployment wall {} vs critical path {} ({chain_len} runs): {:.3}x",
        ms(wall),
        ms(chain),
        wall.as_secs_f64() / chain.as_secs_f64()
    );
    // Where the wall time outside the chain's own runs went: before its first run, between
    // consecutive runs of the chain (by the kinds they join), after its last.
    if let (Some(first), Some(last)) = (chain_runs.first(), chain_runs.last()) {
        let mut gaps: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
        for pair in chain_runs.windows(2) {
            gaps.entry(format!("{} -> {}", pair[0].kind, pair[1].kind))
                .or_default()
                .push(since(pair[0].finished_at, pair[1].started_at));
        }
        let outside = wall.saturating_sub(chain);
        println!(
            "    outside the chain's runs {}: request -> first run started {}; last run finished -> deployment ended {}",
            ms(outside),
            ms(since(created_at, first.started_at)),
            ms(since(last.finished_at, finished_at))
        );
        // The first run's way from the request, at the same stored timestamps as the hops.
        let marks = [
            Some(created_at),
            job_relayed,
            job_started_at,
            Some(first.created_at),
            coordinator.registered.get(&first.run_id).copied(),
            Some(first.requested_at),
            sent.get(&first.run_id).copied(),
            coordinator.admitting.get(&first.run_id).copied(),
            Some(first.started_at),
        ];
        let parts: Vec<String> = FIRST_RUN_SEGMENTS
            .iter()
            .zip(marks.windows(2))
            .map(|(what, pair)| match pair {
                [Some(a), Some(b)] => format!("{what} {}", ms(since(*a, *b))),
                _ => format!("{what} ?"),
            })
            .collect();
        println!("      request -> first run: {}", parts.join(", "));
        // A gap of the chain cut at the stored timestamps: the earlier run's end, its result
        // recorded, the later run requested, relayed, its AdmitRun begun, started.
        let mut cuts: BTreeMap<String, Vec<Vec<Duration>>> = BTreeMap::new();
        for pair in chain_runs.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let marks = [
                Some(a.finished_at),
                Some(a.result_at),
                Some(b.requested_at.max(a.result_at)),
                sent.get(&b.run_id).copied(),
                coordinator.admitting.get(&b.run_id).copied(),
                Some(b.started_at),
            ];
            let v = cuts
                .entry(format!("{} -> {}", a.kind, b.kind))
                .or_insert_with(|| vec![Vec::new(); GAP_SEGMENTS.len()]);
            for (i, w) in marks.windows(2).enumerate() {
                if let [Some(x), Some(y)] = w {
                    v[i].push(since(*x, *y));
                }
            }
        }
        for (kinds, mut v) in gaps {
            v.sort();
            let total: Duration = v.iter().sum();
            println!(
                "      {kinds}: {} gaps, {} in all, p50 {} max {}",
                v.len(),
                ms(total),
                ms(percentile(&v, 50.0)),
                ms(*v.last().unwrap())
            );
            if let Some(parts) = cuts.get_mut(&kinds) {
                let text: Vec<String> = GAP_SEGMENTS
                    .iter()
                    .zip(parts.iter_mut())
                    .map(|(what, d)| {
                        d.sort();
                        format!("{what} {}", ms(percentile(d, 50.0)))
                    })
                    .collect();
                println!("        p50 by segment: {}", text.join(", "));
            }
        }
    }
    println!(
        "  apply phase wall {} vs dependency critical path {}: {:.3}x",
        ms(apply_wall),
        ms(apply_chain),
        apply_wall.as_secs_f64() / apply_chain.as_secs_f64()
    );
    println!(
        "  workflow cost per step (upstream result recorded -> dependent run requested, n={}): p50 {} p99 {}",
        cost.len(),
        ms(percentile(&cost, 50.0)),
        ms(percentile(&cost, 99.0))
    );
    let p = |v: &[Duration]| {
        format!(
            "p50 {} p99 {}",
            ms(percentile(v, 50.0)),
            ms(percentile(v, 99.0))
        )
    };
    println!(
        "    of which: upstream step ended {}; dependent run rendered and persisted {}; registered and requested {}",
        p(&ended),
        p(&rendered),
        p(&registered)
    );
    println!(
        "  whole hop (upstream run finished -> dependent run started): p50 {} p99 {}",
        ms(percentile(&hop, 50.0)),
        ms(percentile(&hop, 99.0))
    );
    println!("    boundary by boundary (p50 / p99; the p50s need not add up to the hop's):");
    for (what, v) in HOP_SEGMENTS.iter().zip(&segments) {
        println!(
            "      {what:<58} {:>7} / {:>7}",
            ms(percentile(v, 50.0)),
            ms(percentile(v, 99.0))
        );
    }
    println!(
        "    (of the next, the message relay's transaction began {} / {} after the request's)",
        ms(percentile(&relay, 50.0)),
        ms(percentile(&relay, 99.0))
    );
    println!(
        "    (inside the upstream's own run: its FinishRun began -> its run end {} / {})",
        ms(percentile(&finish_to_end, 50.0)),
        ms(percentile(&finish_to_end, 99.0))
    );
}

/// The way from the deployment's request to its first run's start, cut at the stored
/// timestamps (one clock: one machine).
const FIRST_RUN_SEGMENTS: [&str; 8] = [
    "job relayed",
    "-> taken by the worker",
    "-> its run rendered and persisted",
    "-> RegisterRun inserted",
    "-> requested (its step started)",
    "-> relayed",
    "-> AdmitRun's transaction began",
    "-> run started",
];

/// A gap between consecutive runs of the executed chain, cut at the stored timestamps.
const GAP_SEGMENTS: [&str; 5] = [
    "result recorded",
    "-> next requested",
    "-> relayed",
    "-> AdmitRun began",
    "-> started",
];

/// The hop between the gating upstream's run end and the dependent run's start, cut at
/// the timestamps the three services store (one clock: one machine).
const HOP_SEGMENTS: [&str; 7] = [
    "result published -> recorded in the step run (NATS, runres)",
    "-> upstream step ended",
    "-> dependent run rendered and persisted",
    "-> RegisterRun inserted the run (coordinator)",
    "-> request transaction began",
    "-> AdmitRun's transaction began (commit, NATS, pickup)",
    "-> AdmitRun answered at the runner (run started)",
];
