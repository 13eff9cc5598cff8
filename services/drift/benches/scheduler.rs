//! Benchmark of the drift scheduler at scale (issue 14): N tracked resources (one target per
//! 20, at most 2 scans in flight each) on a 10-minute interval with a 10 s tick, stepped
//! through one interval of the scheduler's clock (`App::tick_at`, 60 ticks) as fast as the
//! machine goes. Each tick claims what is due and dispatches it (the applied config read back
//! and the scan registered at a stub coordinator, the request written to the message outbox),
//! then a stub runner answers every requested scan at once (`App::on_result`: the
//! coordinator's `GetRun`, the verdict, the slot freed), and the tick runs again until a pass
//! claims nothing (the batch, `CAIRN_DRIFT_BATCH`'s default 200, was full or scans waited for
//! a slot), as the scheduler does when scans end. Measured per interval:
//!
//! - drift's CPU: the process's user + system time (`/proc/self/stat`) around the ticks, less
//!   the stub coordinator's own thread (`/proc/self/task/<tid>/stat`; it serves on a thread
//!   and runtime of its own);
//! - PostgreSQL's CPU: the user + system time of the backends serving the bench's database
//!   (`/proc/<pid>/stat`, pids from `pg_stat_activity`; same machine);
//! - statements: every one sqlx sends (BEGIN and COMMIT included), counted from its
//!   `sqlx::query` tracing events;
//! - rows read and scans per table (`pg_stat_user_tables`: sequential scans and the rows they
//!   read, index scans and the rows they fetched), after the statistics were flushed;
//! - the plan of the due query (`EXPLAIN (ANALYZE, BUFFERS)`) at one tick;
//! - the spread: scans claimed per minute of the interval, max against the mean (goal ≤ 1.2).
//!
//! At 100,000 tracked only the first minute of the interval (6 ticks) is run and the
//! interval's numbers are that minute's × 10 (marked so); the spread is judged at 10,000.
//!
//! Run on demand, never in CI (needs the test PostgreSQL, `CAIRN_TEST_DATABASE_URL`):
//!
//! ```text
//! eval "$(deploy/local/start.sh)" && cargo bench -p cairn-drift --bench scheduler
//! ```
//!
//! `BENCH_SIZES=1000,10000` picks the sizes. The bench prints PASS/MISS for the spread and
//! never fails on it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use cairn_drift::app::{App, Settings};
use cairn_drift::domain::schedule::{Schedule, phase_of};
use cairn_proto::runner as rpb;
use cairn_proto::state as spb;
use chrono::{DateTime, Utc};
use sqlx::Connection;
use tokio::sync::Notify;
use tonic::{Request, Response, Status};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use uuid::Uuid;

const INTERVAL: Duration = Duration::from_secs(600);
const TICK: Duration = Duration::from_secs(10);
const TICKS: usize = 60;
/// The spread goal: the busiest minute at most this many times the mean minute.
const GOAL_SPREAD: f64 = 1.2;
const STUB_THREAD: &str = "stub-coord";
/// Sizes at or above this run one minute of the interval, not all ten.
const PARTIAL_FROM: usize = 50_000;
/// `sysconf(_SC_CLK_TCK)` on Linux x86_64.
const CLK_TCK: f64 = 100.0;

// ---- the stub coordinator: answers at once, on a thread of its own ----

struct Registered {
    runs: Mutex<Vec<String>>,
    state_id: String,
    tenant_id: String,
}

struct StubCoordinator(Arc<Registered>);

#[tonic::async_trait]
impl spb::runs_server::Runs for StubCoordinator {
    async fn register_run(
        &self,
        req: Request<spb::RegisterRunRequest>,
    ) -> Result<Response<spb::RegisterRunResponse>, Status> {
        let run_id = req.into_inner().run_id;
        self.0.runs.lock().unwrap().push(run_id.clone());
        Ok(Response::new(spb::RegisterRunResponse {
            run_id,
            created: true,
        }))
    }

    async fn get_registered_run_config(
        &self,
        req: Request<spb::GetRegisteredRunConfigRequest>,
    ) -> Result<Response<spb::GetRunConfigResponse>, Status> {
        Ok(Response::new(spb::GetRunConfigResponse {
            run_id: req.into_inner().run_id,
            state_id: self.0.state_id.clone(),
            kind: spb::RunKind::Apply as i32,
            environment: "staging".to_owned(),
            root_config: br#"{"terraform": {"backend": {"http": {}}}}"#.to_vec(),
            config_hash: "bench".to_owned(),
            context: Some(spb::ExecutionContext {
                tenant_id: self.0.tenant_id.clone(),
                target_id: "bench".to_owned(),
                credential_ref: "deploy".to_owned(),
                ..Default::default()
            }),
            plan_run_id: String::new(),
        }))
    }

    async fn get_run(
        &self,
        req: Request<spb::GetRunRequest>,
    ) -> Result<Response<spb::GetRunResponse>, Status> {
        Ok(Response::new(spb::GetRunResponse {
            run_id: req.into_inner().run_id,
            state_id: self.0.state_id.clone(),
            kind: spb::RunKind::Drift as i32,
            status: "succeeded".to_owned(),
            finished: true,
            state_changed_since_registered: false,
            ..Default::default()
        }))
    }

    async fn admit_run(
        &self,
        _: Request<spb::AdmitRunRequest>,
    ) -> Result<Response<spb::AdmitRunResponse>, Status> {
        Err(Status::unimplemented("stub"))
    }

    async fn renew_run(
        &self,
        _: Request<spb::RenewRunRequest>,
    ) -> Result<Response<spb::RenewRunResponse>, Status> {
        Err(Status::unimplemented("stub"))
    }

    async fn finish_run(
        &self,
        _: Request<spb::FinishRunRequest>,
    ) -> Result<Response<spb::FinishRunResponse>, Status> {
        Err(Status::unimplemented("stub"))
    }

    async fn get_run_config(
        &self,
        _: Request<spb::GetRunConfigRequest>,
    ) -> Result<Response<spb::GetRunConfigResponse>, Status> {
        Err(Status::unimplemented("stub"))
    }

    async fn put_plan(
        &self,
        _: Request<spb::PutPlanRequest>,
    ) -> Result<Response<spb::PutPlanResponse>, Status> {
        Err(Status::unimplemented("stub"))
    }

    async fn take_plan(
        &self,
        _: Request<spb::TakePlanRequest>,
    ) -> Result<Response<spb::TakePlanResponse>, Status> {
        Err(Status::unimplemented("stub"))
    }

    async fn quarantine(
        &self,
        _: Request<spb::QuarantineRequest>,
    ) -> Result<Response<spb::QuarantineResponse>, Status> {
        Err(Status::unimplemented("stub"))
    }

    async fn get_outputs(
        &self,
        _: Request<spb::GetOutputsRequest>,
    ) -> Result<Response<spb::GetOutputsResponse>, Status> {
        Err(Status::unimplemented("stub"))
    }

    async fn get_masked_plan(
        &self,
        _: Request<spb::GetMaskedPlanRequest>,
    ) -> Result<Response<spb::GetMaskedPlanResponse>, Status> {
        Err(Status::unimplemented("stub"))
    }
}

/// Serves the stub on its own thread (current-thread runtime), so its CPU can be told apart.
fn start_stub(registered: Arc<Registered>) -> Result<SocketAddr> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(STUB_THREAD.to_owned())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("stub runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind the stub");
                tx.send(listener.local_addr().expect("stub address"))
                    .expect("hand the address over");
                tonic::transport::Server::builder()
                    .add_service(spb::runs_server::RunsServer::new(StubCoordinator(
                        registered,
                    )))
                    .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                    .await
                    .expect("serve the stub");
            });
        })?;
    Ok(rx.recv()?)
}

// ---- counters ----

/// Counts the statements sqlx sends (its `sqlx::query` events).
struct CountStatements(Arc<AtomicU64>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for CountStatements {
    fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// User + system seconds from a `/proc/…/stat` line (fields 14 and 15).
fn stat_cpu(path: &str) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / CLK_TCK)
}

fn stub_thread_cpu() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    tasks
        .filter_map(|t| t.ok())
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == STUB_THREAD)
        })
        .filter_map(|t| stat_cpu(&t.path().join("stat").display().to_string()))
        .sum()
}

/// CPU seconds of every backend now serving `db` (but `monitor`'s own).
async fn backends_cpu(monitor: &mut sqlx::PgConnection, db: &str) -> Result<BTreeMap<i32, f64>> {
    let pids: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(db)
    .fetch_all(&mut *monitor)
    .await?;
    Ok(pids
        .into_iter()
        .filter_map(|pid| Some((pid, stat_cpu(&format!("/proc/{pid}/stat"))?)))
        .collect())
}

/// Per table: sequential scans, rows they read, index scans, rows they fetched.
type TableStats = BTreeMap<String, [i64; 4]>;

async fn table_stats(monitor: &mut sqlx::PgConnection) -> Result<TableStats> {
    let rows: Vec<(String, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT relname::text, coalesce(seq_scan, 0), coalesce(seq_tup_read, 0), \
           coalesce(idx_scan, 0), coalesce(idx_tup_fetch, 0) \
         FROM pg_stat_user_tables WHERE schemaname = 'drift'",
    )
    .fetch_all(&mut *monitor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(t, a, b, c, d)| (t, [a, b, c, d]))
        .collect())
}

/// Table statistics once every backend has flushed its counters (PostgreSQL 15 flushes an
/// idle backend's within 10 s; a fresh connection sees the shared numbers).
async fn flushed_table_stats(db: &cairn_db::TestDatabase) -> Result<TableStats> {
    tokio::time::sleep(Duration::from_secs(11)).await;
    let mut monitor = sqlx::PgConnection::connect(&db.admin_url).await?;
    table_stats(&mut monitor).await
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".to_owned(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

// ---- the scenario ----

async fn app(db: &cairn_db::TestDatabase, coordinator: SocketAddr) -> Result<App> {
    let args = cairn_service::DbArgs {
        database_url: db.runtime_url.clone(),
        database_migrate_url: Some(db.migrate_url.clone()),
        database_schema: Some("drift".to_owned()),
    };
    let pool = args
        .migrate_and_connect("drift", &cairn_drift::server::MIGRATOR, &[])
        .await
        .context("migrate the drift schema")?;
    let keys = cairn_testkit::TestKeys::new();
    let credential = cairn_sdk::Credential::parse(&keys.service_token())?;
    let tokens = cairn_sdk::TokenSource::new(credential, None);
    let url = format!("http://{coordinator}");
    let channel = tonic::transport::Endpoint::from_shared(url.clone())?
        .connect()
        .await
        .context("connect to the stub coordinator")?;
    Ok(App {
        pool,
        coord: cairn_drift::coordinator::CoordinatorClient::new(&url, channel, &tokens)?,
        events_notify: Arc::new(Notify::new()),
        messages_notify: Arc::new(Notify::new()),
        scheduler_notify: Arc::new(Notify::new()),
        settings: Arc::new(Settings {
            schedule: Schedule { interval: INTERVAL },
            max_per_target: 2,
            // CAIRN_DRIFT_BATCH's default.
            batch: 200,
            scan_timeout: Duration::from_secs(24 * 3600),
            replica: "bench".to_owned(),
            retry_after: TICK,
        }),
    })
}

/// N tracked resources on N/20 targets, 10 per instance, each at its first slot after
/// `start` (so over the next interval every one falls due once).
async fn populate(app: &App, tenant: Uuid, n: usize, start: DateTime<Utc>) -> Result<()> {
    let schedule = app.settings.schedule;
    let instance_ids: Vec<Uuid> = (0..n.div_ceil(10)).map(|_| Uuid::new_v4()).collect();
    let (mut ids, mut phases, mut due_at, mut targets, mut instances) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let id = Uuid::new_v4();
        let phase = phase_of(id);
        ids.push(id);
        phases.push(phase);
        due_at.push(schedule.next_slot(phase, start));
        targets.push(format!("t{}", i % n.div_ceil(20)));
        instances.push(instance_ids[i / 10]);
    }
    sqlx::query(
        "INSERT INTO instances (instance_id, tenant_id) SELECT i, $2 FROM unnest($1::uuid[]) i",
    )
    .bind(&instance_ids)
    .bind(tenant)
    .execute(&app.pool)
    .await?;
    sqlx::query(
        "INSERT INTO tracked_resources (resource_id, tenant_id, instance_id, resource, state_id, \
           applied_run_id, target_id, environment, phase, next_due_at) \
         SELECT r, $2, i, 'res-' || r::text, gen_random_uuid(), gen_random_uuid(), t, 'staging', p, d \
         FROM unnest($1::uuid[], $3::uuid[], $4::text[], $5::bigint[], $6::timestamptz[]) \
           AS x(r, i, t, p, d)",
    )
    .bind(&ids)
    .bind(tenant)
    .bind(&instances)
    .bind(&targets)
    .bind(&phases)
    .bind(&due_at)
    .execute(&app.pool)
    .await?;
    Ok(())
}

/// The due query's plan at `at`: its scan node, the rows it returned and the buffers it hit.
async fn due_query_plan(db: &cairn_db::TestDatabase, at: DateTime<Utc>) -> Result<String> {
    let mut conn = sqlx::PgConnection::connect(&db.admin_url).await?;
    sqlx::query("SET search_path = drift")
        .execute(&mut conn)
        .await?;
    sqlx::query("ANALYZE tracked_resources")
        .execute(&mut conn)
        .await?;
    let mut tx = conn.begin().await?;
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {}",
        cairn_drift::store::tracking::tracked_due_sql()
    )))
    .bind(at)
    .bind(200_i64)
    .fetch_one(&mut *tx)
    .await?;
    tx.rollback().await?;
    fn scan(node: &serde_json::Value) -> Option<String> {
        let kind = node["Node Type"].as_str()?;
        if kind.contains("Scan") {
            // A bitmap heap scan names its index on the child node.
            let index = node["Index Name"].as_str().or_else(|| {
                node["Plans"]
                    .as_array()?
                    .iter()
                    .find_map(|c| c["Index Name"].as_str())
            });
            return Some(format!(
                "{kind} on {}: {} rows, {} buffers",
                index.unwrap_or("no index"),
                node["Actual Rows"],
                node["Shared Hit Blocks"].as_i64().unwrap_or(0)
                    + node["Shared Read Blocks"].as_i64().unwrap_or(0)
            ));
        }
        node["Plans"].as_array()?.iter().find_map(scan)
    }
    Ok(scan(&plan[0]["Plan"]).unwrap_or_else(|| "no scan node".to_owned()))
}

struct Row {
    tracked: usize,
    ticks: usize,
    scans: u64,
    passes: usize,
    statements: u64,
    max_statements_tick: u64,
    drift_cpu: f64,
    stub_cpu: f64,
    pg_cpu: f64,
    wall: Duration,
    /// tracked_resources: rows read by sequential scans, rows fetched by index scans.
    tracked_seq_rows: i64,
    tracked_idx_rows: i64,
    /// All drift tables: sequential scans and the rows they read, rows fetched by index.
    seq_scans: i64,
    seq_rows: i64,
    idx_rows: i64,
    seq_tables: Vec<String>,
    plan: String,
    per_minute: Vec<u64>,
}

impl Row {
    /// Interval numbers from a partial run.
    fn scale(&self) -> f64 {
        TICKS as f64 / self.ticks as f64
    }
}

async fn run_size(n: usize, counter: &Arc<AtomicU64>) -> Result<Row> {
    let registered = Arc::new(Registered {
        runs: Mutex::new(Vec::new()),
        state_id: Uuid::new_v4().to_string(),
        tenant_id: Uuid::new_v4().to_string(),
    });
    let db = cairn_testkit::fresh_database().await;
    let app = app(&db, start_stub(registered.clone())?).await?;
    let start = Utc::now();
    populate(&app, registered.tenant_id.parse()?, n, start).await?;
    let ticks = if n >= PARTIAL_FROM { TICKS / 10 } else { TICKS };
    let plan = due_query_plan(&db, start + chrono::Duration::from_std(TICK)?).await?;
    // Warm the pool's connections, so the backends measured are the ones that do the work.
    app.tick_at(start).await?;
    let before_tables = flushed_table_stats(&db).await?;
    let mut monitor = sqlx::PgConnection::connect(&db.admin_url).await?;
    let pg_before = backends_cpu(&mut monitor, &db.name).await?;
    let (proc_before, stub_before) = (
        stat_cpu("/proc/self/stat").unwrap_or(0.0),
        stub_thread_cpu(),
    );
    let statements_before = counter.load(Ordering::Relaxed);

    let started = Instant::now();
    let (mut scans, mut passes, mut max_statements_tick) = (0u64, 0usize, 0u64);
    let mut per_minute = vec![0u64; ticks.div_ceil(6)];
    for k in 1..=ticks {
        let at = start + chrono::Duration::from_std(TICK * u32::try_from(k)?)?;
        let tick_statements = counter.load(Ordering::Relaxed);
        loop {
            let t = app.tick_at(at).await?;
            passes += 1;
            let requested: Vec<String> = std::mem::take(&mut *registered.runs.lock().unwrap());
            for run_id in &requested {
                // The stub runner: a clean plan, at once.
                let result = rpb::RunResult {
                    run_id: run_id.clone(),
                    outcome: spb::RunOutcome::Succeeded as i32,
                    ..Default::default()
                };
                app.on_result(&result).await?;
            }
            scans += requested.len() as u64;
            per_minute[(k - 1) / 6] += requested.len() as u64;
            // Ended scans wake the scheduler: it passes again until a pass claims nothing
            // (the batch was full, or scans waited for a slot their answers freed).
            if t.claimed == 0 {
                break;
            }
        }
        max_statements_tick =
            max_statements_tick.max(counter.load(Ordering::Relaxed) - tick_statements);
    }
    let wall = started.elapsed();
    let statements = counter.load(Ordering::Relaxed) - statements_before;
    let stub_cpu = stub_thread_cpu() - stub_before;
    let drift_cpu = stat_cpu("/proc/self/stat").unwrap_or(0.0) - proc_before - stub_cpu;
    let pg_after = backends_cpu(&mut monitor, &db.name).await?;
    let pg_cpu = pg_after
        .iter()
        .map(|(pid, cpu)| cpu - pg_before.get(pid).copied().unwrap_or(0.0))
        .sum();
    drop(monitor);
    let after_tables = flushed_table_stats(&db).await?;
    let delta = |t: &str, i: usize| {
        after_tables.get(t).map_or(0, |a| a[i]) - before_tables.get(t).map_or(0, |b| b[i])
    };
    let tables: Vec<&String> = after_tables.keys().collect();
    let sum = |i: usize| tables.iter().map(|t| delta(t, i)).sum::<i64>();
    let seq_tables = tables
        .iter()
        .filter(|t| delta(t, 0) > 0)
        .map(|t| format!("{t} ×{} ({} rows)", delta(t, 0), delta(t, 1)))
        .collect();
    app.pool.close().await;
    Ok(Row {
        tracked: n,
        ticks,
        scans,
        passes,
        statements,
        max_statements_tick,
        drift_cpu,
        stub_cpu,
        pg_cpu,
        wall,
        tracked_seq_rows: delta("tracked_resources", 1),
        tracked_idx_rows: delta("tracked_resources", 3),
        seq_scans: sum(0),
        seq_rows: sum(1),
        idx_rows: sum(3),
        seq_tables,
        plan,
        per_minute,
    })
}

fn print(rows: &[Row]) {
    println!(
        "\n| tracked | ticks run | scans | claim passes | statements / tick (mean, max) | \
         statements / scan | rows read / tick: tracked_resources (index, seq) | all tables \
         (index, seq) | drift CPU / interval | PostgreSQL CPU / interval | wall / interval |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let ticks = r.ticks as f64;
        let mark = if r.ticks < TICKS { " (×10)" } else { "" };
        println!(
            "| {} | {} | {} | {} | {:.0}, {} | {:.1} | {:.0}, {:.0} | {:.0}, {:.0} | {:.2} s{mark} | \
             {:.2} s{mark} | {:.1} s{mark} |",
            r.tracked,
            r.ticks,
            r.scans,
            r.passes,
            r.statements as f64 / ticks,
            r.max_statements_tick,
            r.statements as f64 / r.scans.max(1) as f64,
            r.tracked_idx_rows as f64 / ticks,
            r.tracked_seq_rows as f64 / ticks,
            r.idx_rows as f64 / ticks,
            r.seq_rows as f64 / ticks,
            r.drift_cpu * r.scale(),
            r.pg_cpu * r.scale(),
            r.wall.as_secs_f64() * r.scale(),
        );
    }
    println!();
    for r in rows {
        println!(
            "{} tracked: due query at one tick: {}; sequential scans: {} ({} rows; {}); \
             stub coordinator thread {:.2} s (not counted in drift's CPU)",
            r.tracked,
            r.plan,
            r.seq_scans,
            r.seq_rows,
            if r.seq_tables.is_empty() {
                "none".to_owned()
            } else {
                r.seq_tables.join(", ")
            },
            r.stub_cpu,
        );
    }
    println!();
    for r in rows.iter().filter(|r| r.ticks == TICKS) {
        let mean = r.scans as f64 / r.per_minute.len() as f64;
        let max = r.per_minute.iter().copied().max().unwrap_or(0) as f64;
        let spread = if mean > 0.0 { max / mean } else { 0.0 };
        println!(
            "{} tracked: scans per minute {:?}, max/mean {spread:.3} (goal ≤ {GOAL_SPREAD}): {}",
            r.tracked,
            r.per_minute,
            if spread <= GOAL_SPREAD {
                "PASS"
            } else {
                "MISS"
            },
        );
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    if std::env::var(cairn_testkit::env::DATABASE_URL_VAR).map_or(true, |s| s.trim().is_empty()) {
        bail!(
            "{} not set: the benchmark needs the test PostgreSQL; `source /tmp/env.sh` (or \
             `eval \"$(deploy/local/start.sh)\"`) first",
            cairn_testkit::env::DATABASE_URL_VAR
        );
    }
    let sizes: Vec<usize> = match std::env::var("BENCH_SIZES") {
        Ok(s) if !s.trim().is_empty() => s
            .split(',')
            .map(|n| n.trim().parse())
            .collect::<Result<_, _>>()
            .context("BENCH_SIZES: comma-separated numbers")?,
        _ => vec![1_000, 10_000, 100_000],
    };
    let counter = Arc::new(AtomicU64::new(0));
    tracing_subscriber::registry()
        .with(tracing_subscriber::Layer::with_filter(
            CountStatements(counter.clone()),
            tracing_subscriber::filter::filter_fn(|m| m.target() == "sqlx::query"),
        ))
        .init();
    let load_before = load_average();
    let mut rows = Vec::new();
    for n in sizes {
        eprintln!("bench: {n} tracked …");
        rows.push(run_size(n, &counter).await?);
    }
    print(&rows);
    println!(
        "\nMachine load average (1/5/15 min) before: {load_before}, after: {} (2 cores, shared \
         with other builds: CPU seconds are the bench's own, wall time is not)",
        load_average()
    );
    Ok(())
}
