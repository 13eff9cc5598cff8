//! `BENCH_MODE=scale`: the coordinator's GET and POST as the platform grows. Two coordinators
//! run side by side in this process, each on a database of its own (same PostgreSQL, same
//! moto, same settings): (a) on one seeded with 1,000 states, (b) on one grown to 100,000
//! states holding 1,000,000 generations, and (c) on the grown one again, on states that
//! each hold 10,000 generations. The seed is bulk SQL straight into the coordinator's schema
//! (states, runs, attempts, generations; the rows point at objects that are never read), then
//! `ANALYZE`. The cells are measured in interleaved rounds (a, b, c, a, b, c, …) so that
//! drift hits each alike; before the growth, (a) and (b) are measured once at the same size
//! as a control. Each cell's GET, POST and whole-operation p50 is compared with (a)'s; the
//! goal is within 10% (PASS/MISS, never a failure). Last, the plans of the hot statements
//! (`EXPLAIN ANALYZE`) on the grown database, with every sequential scan flagged.
//!
//! Knobs: `BENCH_ITERS` (measured operations per cell and concurrency, default 400),
//! `BENCH_SCALE_STATES` / `BENCH_SCALE_GENERATIONS` (the grown database, default 100000 /
//! 1000000), `BENCH_SCALE_DEEP` (generations of a (c) state, default 10000),
//! `BENCH_SCALE_CONCURRENCY` (default `1,16`), `BENCH_KEEP_DB=1` (keep both databases).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use cairn_proto::state as pb;
use cairn_state_coordinator::testing::Fixtures;
use uuid::Uuid;

use super::{Bench, CoordWorker, Sample, Worker, empty_bucket, load_average, ms, padded_doc};

/// The document every worker writes: small, so that the database is what differs.
const DOC_BYTES: usize = 10 * 1024;
/// States of the small database (cell a), and of the big one before it grows.
const BASE_STATES: u64 = 1_000;
/// The goal: each cell's p50 at most this many times cell (a)'s.
const GOAL_RATIO: f64 = 1.10;
/// Interleaved rounds per measurement.
const ROUNDS: usize = 5;
/// Seeded states per transaction.
const SEED_BATCH: u64 = 10_000;
/// Seeded runs per state (each with one finished attempt that wrote a share of the
/// state's generations).
const RUNS_PER_STATE: u64 = 2;
/// A wrapped data key as long as the ones moto's KMS returns (the bytes are never opened).
const WRAPPED_KEY_BYTES: usize = 184;

struct Settings {
    states: u64,
    generations: u64,
    deep: u64,
    iters: usize,
    concurrency: Vec<usize>,
    keep_db: bool,
}

fn env_number(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(raw) => raw
            .trim()
            .replace('_', "")
            .parse::<u64>()
            .with_context(|| format!("{name}={raw:?}: expected a whole number")),
    }
}

impl Settings {
    fn from_env() -> Result<Self> {
        let states = env_number("BENCH_SCALE_STATES", 100_000)?;
        let generations = env_number("BENCH_SCALE_GENERATIONS", 1_000_000)?;
        let deep = env_number("BENCH_SCALE_DEEP", 10_000)?;
        let iters = usize::try_from(env_number("BENCH_ITERS", 400)?)?;
        let concurrency = match std::env::var("BENCH_SCALE_CONCURRENCY") {
            Err(_) => vec![1, 16],
            Ok(raw) => raw
                .split(',')
                .map(|p| p.trim().parse::<usize>())
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("BENCH_SCALE_CONCURRENCY={raw:?}: expected N[,M…]"))?,
        };
        ensure!(
            states > BASE_STATES,
            "BENCH_SCALE_STATES must exceed the {BASE_STATES} states of cell (a)"
        );
        ensure!(
            generations >= states,
            "BENCH_SCALE_GENERATIONS must be at least BENCH_SCALE_STATES (one per state)"
        );
        ensure!(deep >= 2, "BENCH_SCALE_DEEP must be at least 2");
        ensure!(iters > 0, "BENCH_ITERS must be positive");
        ensure!(
            !concurrency.is_empty() && concurrency.iter().all(|c| *c > 0),
            "BENCH_SCALE_CONCURRENCY must list positive numbers"
        );
        Ok(Self {
            states,
            generations,
            deep,
            iters,
            concurrency,
            keep_db: std::env::var("BENCH_KEEP_DB").is_ok_and(|v| v == "1"),
        })
    }

    /// Generations of each seeded state (the grown database's ratio, also used for the
    /// small one so that only the size differs).
    fn per_state(&self) -> u64 {
        (self.generations / self.states).max(1)
    }
}

/// Bulk inserts into one coordinator's schema, as its owner.
struct Seeder {
    pool: sqlx::PgPool,
    /// Seeded states so far (their indexes are `0..seeded`).
    seeded: u64,
    per_state: u64,
    key_id: String,
}

/// Row counts of the coordinator's tables.
struct Counts {
    states: i64,
    generations: i64,
    runs: i64,
    attempts: i64,
}

impl Seeder {
    fn new(b: &Bench, per_state: u64) -> Result<Self> {
        let pool = cairn_db::connect(&cairn_db::PoolSettings::new(
            b.app.db.migrate_url.clone(),
            "state",
        ))?;
        Ok(Self {
            pool,
            seeded: 0,
            per_state,
            key_id: format!(
                "arn:aws:kms:{}:123456789012:key/{}",
                b.app.aws.region, b.app.aws.kms_key_id
            ),
        })
    }

    /// Seeds states until there are `total`; returns how long it took.
    async fn grow_to(&mut self, total: u64) -> Result<Duration> {
        let started = Instant::now();
        while self.seeded < total {
            let lo = self.seeded;
            let hi = (lo + SEED_BATCH).min(total);
            self.seed_batch(lo, hi).await.with_context(|| {
                format!("seed states {lo}..{hi} of {total} into the coordinator's schema")
            })?;
            self.seeded = hi;
            if total - BASE_STATES > SEED_BATCH {
                eprintln!(
                    "bench: seeded {hi} states ({} generations) in {:.1} s",
                    hi * self.per_state,
                    started.elapsed().as_secs_f64()
                );
            }
        }
        self.analyze().await?;
        Ok(started.elapsed())
    }

    /// States `lo..hi`: 100 per tenant; each with `RUNS_PER_STATE` finished apply runs and
    /// their attempts, and `per_state` generations written by them. Ids are md5 of the
    /// index, so they are spread over the key space like random UUIDs.
    async fn seed_batch(&self, lo: u64, hi: u64) -> Result<()> {
        let (lo, hi) = (i64::try_from(lo)?, i64::try_from(hi)? - 1);
        let per_state = i64::try_from(self.per_state)?;
        let runs = i64::try_from(RUNS_PER_STATE.min(self.per_state))?;
        let per_run = (per_state + runs - 1) / runs;
        let wrapped = vec![0xa5_u8; WRAPPED_KEY_BYTES];
        let nonce = vec![0x5a_u8; 12];
        let config = vec![0x3c_u8; 96];
        let context = serde_json::json!({
            "tenant_id": Uuid::nil().to_string(), "target_id": "local-dev",
            "target_settings": {"base_dir": "/tmp/cairn-demo"}, "credential_ref": "local",
            "sensitive_variable_refs": {}
        });
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO states (state_id, tenant_id, instance_id, key, current_generation)
             SELECT md5('state-' || i)::uuid, md5('tenant-' || (i / 100))::uuid,
                    md5('instance-' || (i / 100))::uuid, 'cairn/seed-' || i || '.tfstate', $3
             FROM generate_series($1::bigint, $2::bigint) AS i",
        )
        .bind(lo)
        .bind(hi)
        .bind(per_state)
        .execute(&mut *tx)
        .await
        .context("insert states")?;
        sqlx::query(
            "INSERT INTO runs (run_id, state_id, tenant_id, kind, environment, config_hash,
                config_key_id, config_wrapped_key, config_nonce, config_ciphertext, context,
                status, current_attempt, created_by, finished_at)
             SELECT md5('run-' || i || '-' || r)::uuid, md5('state-' || i)::uuid,
                    md5('tenant-' || (i / 100))::uuid, 'apply', 'dev',
                    md5('config-' || i) || md5('config2-' || i), $4, $5, $6, $7, $8,
                    'succeeded', 1, 'seed', now()
             FROM generate_series($1::bigint, $2::bigint) AS i,
                  generate_series(1::bigint, $3::bigint) AS r",
        )
        .bind(lo)
        .bind(hi)
        .bind(runs)
        .bind(&self.key_id)
        .bind(&wrapped)
        .bind(&nonce)
        .bind(&config)
        .bind(&context)
        .execute(&mut *tx)
        .await
        .context("insert runs")?;
        sqlx::query(
            "INSERT INTO attempts (attempt_id, run_id, attempt, state_id, token_hash, read_only,
                base_generation, state_status_at_start, last_seen_generation,
                last_written_generation, lease_expires_at, finished_at, outcome,
                final_generation)
             SELECT md5('attempt-' || i || '-' || r)::uuid, md5('run-' || i || '-' || r)::uuid,
                    1, md5('state-' || i)::uuid,
                    md5('token-' || i || '-' || r) || md5('token2-' || i || '-' || r), false,
                    LEAST((r - 1) * $4, $5), 'healthy', LEAST(r * $4, $5), LEAST(r * $4, $5),
                    now() - interval '1 hour', now() - interval '1 hour', 'succeeded',
                    LEAST(r * $4, $5)
             FROM generate_series($1::bigint, $2::bigint) AS i,
                  generate_series(1::bigint, $3::bigint) AS r",
        )
        .bind(lo)
        .bind(hi)
        .bind(runs)
        .bind(per_run)
        .bind(per_state)
        .execute(&mut *tx)
        .await
        .context("insert attempts")?;
        sqlx::query(
            "INSERT INTO generations (state_id, generation, object_key, object_version,
                ciphertext_sha256, plaintext_sha256, size, key_id, wrapped_key, nonce,
                tofu_serial, lineage, run_id, attempt, is_final)
             SELECT md5('state-' || i)::uuid, g,
                    'cairn/seed-' || i || '.tfstate/g' || lpad(g::text, 12, '0') || '-'
                        || md5('pending-' || i || '-' || g),
                    md5('version-' || i || '-' || g),
                    md5('ct-' || i || '-' || g) || md5('ct2-' || i || '-' || g),
                    md5('pt-' || i || '-' || g) || md5('pt2-' || i || '-' || g),
                    10256 + g * 16, $4, $5, $6, g, md5('lineage-' || i)::uuid::text,
                    md5('run-' || i || '-' || ((g - 1) / $7 + 1))::uuid, 1,
                    g % $7 = 0 OR g = $3
             FROM generate_series($1::bigint, $2::bigint) AS i,
                  generate_series(1::bigint, $3::bigint) AS g",
        )
        .bind(lo)
        .bind(hi)
        .bind(per_state)
        .bind(&self.key_id)
        .bind(&wrapped)
        .bind(&nonce)
        .bind(per_run)
        .execute(&mut *tx)
        .await
        .context("insert generations")?;
        tx.commit().await?;
        Ok(())
    }

    /// Gives `state_id` (a fresh state without generations) generations `1..=below` of
    /// `lineage` (serial = generation) and points its current generation at the last, so
    /// that its first real write is generation `below + 1`.
    async fn deepen(&self, state_id: Uuid, lineage: &str, below: u64) -> Result<()> {
        let below = i64::try_from(below)?;
        let wrapped = vec![0xa5_u8; WRAPPED_KEY_BYTES];
        let nonce = vec![0x5a_u8; 12];
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO generations (state_id, generation, object_key, object_version,
                ciphertext_sha256, plaintext_sha256, size, key_id, wrapped_key, nonce,
                tofu_serial, lineage, is_final)
             SELECT s.state_id, g,
                    s.key || '/g' || lpad(g::text, 12, '0') || '-'
                        || md5('pending-' || s.state_id || '-' || g),
                    md5('version-' || s.state_id || '-' || g),
                    md5('ct-' || s.state_id || '-' || g) || md5('ct2-' || s.state_id || '-' || g),
                    md5('pt-' || s.state_id || '-' || g) || md5('pt2-' || s.state_id || '-' || g),
                    10256 + (g % 64) * 16, $3, $4, $5, g, $6, true
             FROM states s, generate_series(1::bigint, $2::bigint) AS g
             WHERE s.state_id = $1",
        )
        .bind(state_id)
        .bind(below)
        .bind(&self.key_id)
        .bind(&wrapped)
        .bind(&nonce)
        .bind(lineage)
        .execute(&mut *tx)
        .await
        .context("insert the generations of a deep state")?;
        let moved = sqlx::query(
            "UPDATE states SET current_generation = $2
             WHERE state_id = $1 AND current_generation = 0",
        )
        .bind(state_id)
        .bind(below)
        .execute(&mut *tx)
        .await?;
        ensure!(
            moved.rows_affected() == 1,
            "state {state_id} already had a generation"
        );
        tx.commit().await?;
        Ok(())
    }

    async fn analyze(&self) -> Result<()> {
        sqlx::query("ANALYZE states, runs, attempts, generations, locks, pending_objects")
            .execute(&self.pool)
            .await
            .context("ANALYZE the seeded tables")?;
        Ok(())
    }

    async fn counts(&self) -> Result<Counts> {
        let (states, generations, runs, attempts): (i64, i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM states), (SELECT count(*) FROM generations),
                    (SELECT count(*) FROM runs), (SELECT count(*) FROM attempts)",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(Counts {
            states,
            generations,
            runs,
            attempts,
        })
    }
}

/// Fresh fixtures for the bench's tenant (the service token they carry expires after five
/// minutes, and seeding can take longer than that).
fn refresh_fixtures(b: &mut Bench) {
    let mut fx = Fixtures::new(b.app.grpc.clone(), b.app.keys.service_token());
    fx.tenant = b.app.tenant;
    fx.instance = b.app.instance;
    b.app.fx = fx;
}

/// A worker on a new state that holds `deep - 1` seeded generations below its first real
/// one (generation `deep`, serial `deep`, written here).
async fn deep_worker(b: &Bench, seeder: &Seeder, deep: u64, name: &str) -> Result<CoordWorker> {
    let state_id = b.app.create_state(name).await;
    let lineage = Uuid::new_v4().to_string();
    seeder
        .deepen(Uuid::parse_str(&state_id)?, &lineage, deep - 1)
        .await?;
    let run = b.app.start_run(&state_id, pb::RunKind::Apply).await;
    ensure!(
        run.base_generation == deep - 1,
        "admitted at generation {}, expected {}",
        run.base_generation,
        deep - 1
    );
    let lock_id = Uuid::new_v4().to_string();
    let locked = b.app.lock(&run, &lock_id).await;
    ensure!(locked.status == 200, "LOCK: {}", locked.text());
    let current = padded_doc(deep, &lineage, DOC_BYTES);
    let first = b.app.post(&run, &lock_id, &current).await;
    ensure!(first.status == 200, "first POST: {}", first.text());
    Ok(CoordWorker {
        http: b.http.clone(),
        run,
        lock_id,
        lineage,
        size: DOC_BYTES,
        serial: deep,
        current,
    })
}

/// One measured cell: its workers and every sample so far.
struct Cell {
    name: &'static str,
    what: String,
    concurrency: usize,
    workers: Vec<Worker>,
    samples: Vec<Sample>,
    /// Whole-operation p50 of each round (the spread).
    round_p50: Vec<Duration>,
}

impl Cell {
    fn new(name: &'static str, what: String, concurrency: usize, workers: Vec<Worker>) -> Self {
        Self {
            name,
            what,
            concurrency,
            workers,
            samples: Vec::new(),
            round_p50: Vec::new(),
        }
    }
}

/// Runs `cells` in interleaved rounds: a warm-up round each, then `ROUNDS` rounds of
/// `iters / ROUNDS` operations per cell (spread over its workers), cell after cell.
async fn measure(cells: &mut [Cell], iters: usize) -> Result<()> {
    for cell in cells.iter_mut() {
        let workers = std::mem::take(&mut cell.workers);
        let (workers, _) = super::round(workers, 3).await?;
        cell.workers = workers;
    }
    for r in 0..ROUNDS {
        for cell in cells.iter_mut() {
            let per_worker = iters.div_ceil(cell.concurrency);
            let n = per_worker / ROUNDS + usize::from(r < per_worker % ROUNDS);
            if n == 0 {
                continue;
            }
            let workers = std::mem::take(&mut cell.workers);
            let (workers, samples) = super::round(workers, n).await?;
            cell.workers = workers;
            let mut totals: Vec<Duration> = samples.iter().map(|s| s.total).collect();
            totals.sort();
            cell.round_p50.push(super::percentile(&totals, 0.5));
            cell.samples.extend(samples);
        }
    }
    Ok(())
}

/// p50 and p99 of GET, POST and the whole operation.
#[derive(Clone, Copy)]
struct Latency {
    get: (Duration, Duration),
    post: (Duration, Duration),
    op: (Duration, Duration),
}

fn latency(samples: &[Sample]) -> Latency {
    let pick = |f: &dyn Fn(&Sample) -> Duration| {
        let mut v: Vec<Duration> = samples.iter().map(f).collect();
        v.sort();
        (super::percentile(&v, 0.5), super::percentile(&v, 0.99))
    };
    let step = |name: &'static str| {
        move |s: &Sample| {
            s.steps
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(Duration::ZERO, |(_, d)| *d)
        }
    };
    Latency {
        get: pick(&step("get")),
        post: pick(&step("post")),
        op: pick(&|s: &Sample| s.total),
    }
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

/// The table of `cells`, each compared with the cell named `base` of its concurrency.
fn table(cells: &[Cell], base: &str, out: &mut String) {
    writeln!(
        out,
        "| cell | database | conc | ops | GET p50 / p99 ms | POST p50 / p99 ms | op p50 / p99 ms | op p50 per round (min–max) ms | GET / POST / op p50 vs ({base}) | goal ≤ {GOAL_RATIO}× |"
    )
    .ok();
    writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|:---:|").ok();
    for c in cells {
        let l = latency(&c.samples);
        let reference = cells
            .iter()
            .find(|r| r.name == base && r.concurrency == c.concurrency)
            .map(|r| latency(&r.samples));
        let (vs, verdict) = match reference {
            Some(r) if c.name != base => {
                let rs = [
                    ratio(l.get.0, r.get.0),
                    ratio(l.post.0, r.post.0),
                    ratio(l.op.0, r.op.0),
                ];
                let pass = rs.iter().all(|x| *x <= GOAL_RATIO);
                (
                    format!("{:.2}× / {:.2}× / {:.2}×", rs[0], rs[1], rs[2]),
                    if pass { "PASS" } else { "MISS" },
                )
            }
            _ => ("(baseline)".to_owned(), ""),
        };
        let lo = c.round_p50.iter().min().copied().unwrap_or_default();
        let hi = c.round_p50.iter().max().copied().unwrap_or_default();
        writeln!(
            out,
            "| ({}) | {} | {} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2}–{:.2} | {vs} | {verdict} |",
            c.name,
            c.what,
            c.concurrency,
            c.samples.len(),
            ms(l.get.0),
            ms(l.get.1),
            ms(l.post.0),
            ms(l.post.1),
            ms(l.op.0),
            ms(l.op.1),
            ms(lo),
            ms(hi),
        )
        .ok();
    }
}

/// The attempt a worker's run token belongs to.
async fn attempt_of(pool: &sqlx::PgPool, w: &Worker) -> Result<Uuid> {
    let Worker::Coord(w) = w else {
        bail!("not a coordinator worker")
    };
    let hash = cairn_storage::sha256_hex(w.run.token.as_bytes());
    let id: Uuid = sqlx::query_scalar("SELECT attempt_id FROM attempts WHERE token_hash = $1")
        .bind(hash)
        .fetch_one(pool)
        .await
        .context("find the attempt of a worker's run token")?;
    Ok(id)
}

/// What [`explain_report`] found.
struct Explained {
    text: String,
    seq_scans: usize,
}

/// The plans (`EXPLAIN (ANALYZE)`, so the statements really run, in a transaction that is
/// rolled back) of the coordinator's own hot statements of GET and POST, as the run token
/// `token` would run them, on `pool` (the coordinator's pool: its runtime role, its schema).
async fn explain_report(pool: &sqlx::PgPool, token: &str) -> Result<Explained> {
    let text = cairn_state_coordinator::testing::explain_hot_statements(pool, token).await;
    let seq_scans = text
        .lines()
        .filter(|l| l.contains("Seq Scan") && !l.starts_with("SEQUENTIAL"))
        .count();
    Ok(Explained { text, seq_scans })
}

/// Drops a bench database (its size is the point of this mode; nothing else uses it).
async fn drop_database(name: &str) -> Result<()> {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(&cairn_testkit::env::database_url()).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await?;
    admin.close().await?;
    Ok(())
}

/// A worker per concurrency slot of every concurrency, on fresh states of `b`.
async fn workers(b: &Bench, cell: &str, concurrency: &[usize]) -> Result<Vec<Vec<Worker>>> {
    let mut out = Vec::new();
    for &c in concurrency {
        let mut ws = Vec::with_capacity(c);
        for i in 0..c {
            let name = format!("bench-{cell}-c{c}-{i}-{}", Uuid::new_v4().simple());
            ws.push(Worker::Coord(Box::new(
                CoordWorker::new(b, DOC_BYTES, &name).await?,
            )));
        }
        out.push(ws);
    }
    Ok(out)
}

pub async fn run() -> Result<()> {
    let s = Settings::from_env()?;
    let load_before = load_average();
    let per_state = s.per_state();
    eprintln!(
        "bench (scale): two coordinators; (a) on {BASE_STATES} states, (b) and (c) grown to {} \
         states × {per_state} generations, (c) on states of {} generations; {} ops per cell",
        s.states, s.deep, s.iters
    );

    let mut small = super::start().await?;
    let mut big = super::start().await?;
    let mut small_seed = Seeder::new(&small, per_state)?;
    let mut big_seed = Seeder::new(&big, per_state)?;
    small_seed.grow_to(BASE_STATES).await?;
    big_seed.grow_to(BASE_STATES).await?;

    let mut out = String::new();
    // Control: both coordinators at the same size, before (b)'s database grows.
    let a_workers = workers(&small, "a", &s.concurrency).await?;
    let b_workers = workers(&big, "b", &s.concurrency).await?;
    let mut cells = Vec::new();
    for ((&c, a), b) in s.concurrency.iter().zip(a_workers).zip(b_workers) {
        cells.push(Cell::new(
            "a",
            format!("{BASE_STATES} states"),
            c,
            a.into_iter().collect(),
        ));
        cells.push(Cell::new(
            "b0",
            format!("{BASE_STATES} states (b before it grows)"),
            c,
            b.into_iter().collect(),
        ));
    }
    eprintln!("bench (scale): control round, both databases at {BASE_STATES} states …");
    measure(&mut cells, s.iters).await?;
    writeln!(
        out,
        "Control: both coordinators before (b)'s database grows (the two should agree):\n"
    )
    .ok();
    table(&cells, "a", &mut out);

    eprintln!(
        "bench (scale): growing (b)'s database to {} states …",
        s.states
    );
    let grew = big_seed.grow_to(s.states).await?;
    refresh_fixtures(&mut big);
    refresh_fixtures(&mut small);
    let mut deep = Vec::new();
    let deep_started = Instant::now();
    for &c in &s.concurrency {
        let mut ws = Vec::with_capacity(c);
        for i in 0..c {
            let name = format!("bench-c-c{c}-{i}-{}", Uuid::new_v4().simple());
            ws.push(Worker::Coord(Box::new(
                deep_worker(&big, &big_seed, s.deep, &name).await?,
            )));
        }
        deep.push(ws);
    }
    big_seed.analyze().await?;
    let deep_took = deep_started.elapsed();
    let small_counts = small_seed.counts().await?;
    let big_counts = big_seed.counts().await?;

    // The measurement: a, b, c interleaved, per concurrency.
    let mut grown: Vec<Cell> = Vec::new();
    let mut previous = cells.into_iter();
    for (&c, d) in s.concurrency.iter().zip(deep) {
        let (Some(mut a), Some(mut b)) = (previous.next(), previous.next()) else {
            bail!("the control cells went missing");
        };
        a.samples.clear();
        a.round_p50.clear();
        b.samples.clear();
        b.round_p50.clear();
        b.name = "b";
        b.what = format!("{} states, {} generations", s.states, s.states * per_state);
        let mut set = vec![
            a,
            b,
            Cell::new(
                "c",
                format!("as (b), the state has {} generations", s.deep),
                c,
                d,
            ),
        ];
        eprintln!("bench (scale): cells a, b, c at concurrency {c} …");
        measure(&mut set, s.iters).await?;
        grown.extend(set);
    }
    writeln!(
        out,
        "\nAfter (b)'s database grew ({} states, {} generations, {} runs, {} attempts; seeded in {:.1} s, \
         the (c) states' {} generations each in {:.1} s); (a)'s has {} states, {} generations:\n",
        big_counts.states,
        big_counts.generations,
        big_counts.runs,
        big_counts.attempts,
        grew.as_secs_f64(),
        s.deep,
        deep_took.as_secs_f64(),
        small_counts.states,
        small_counts.generations,
    )
    .ok();
    table(&grown, "a", &mut out);

    // Plans on the grown database, for a worker of (b) and one of (c).
    let pool = big.app.core().pool.clone();
    let mut plans = String::new();
    let mut seq_scans = 0;
    for name in ["b", "c"] {
        let Some(w) = grown
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.workers.first())
        else {
            continue;
        };
        let attempt = attempt_of(&pool, w).await?;
        let Worker::Coord(coord) = w else {
            bail!("not a coordinator worker")
        };
        let explained = explain_report(&pool, &coord.run.token).await?;
        seq_scans += explained.seq_scans;
        writeln!(
            plans,
            "### Plans for the attempt of a ({name}) worker ({attempt})\n\n{}",
            explained.text
        )
        .ok();
    }

    println!("\n{out}");
    println!("{plans}");
    println!(
        "Hot statements: {}",
        if seq_scans == 0 {
            "index scans only (no Seq Scan in any plan)".to_owned()
        } else {
            format!("{seq_scans} Seq Scan line(s), flagged above")
        }
    );
    println!(
        "Machine load average (1/5/15 min) before: {load_before}, after: {}",
        load_average()
    );
    println!(
        "Documents of {} KB; GET and POST are each request's own p50/p99 within the operation \
         (GET then POST of the next serial, as tofu does during an apply).",
        DOC_BYTES / 1024
    );

    for b in [&small, &big] {
        if let Some(server) = b.app.server.as_ref() {
            cairn_service::Service::shutdown_token(server).cancel();
        }
        empty_bucket(b).await?;
    }
    small_seed.pool.close().await;
    big_seed.pool.close().await;
    if s.keep_db {
        println!(
            "Kept the databases {} (a) and {} (b) (BENCH_KEEP_DB=1).",
            small.app.db.name, big.app.db.name
        );
    } else {
        let names = [small.app.db.name.clone(), big.app.db.name.clone()];
        drop(small);
        drop(big);
        for name in names {
            drop_database(&name)
                .await
                .with_context(|| format!("drop the bench database {name}"))?;
        }
    }
    Ok(())
}
