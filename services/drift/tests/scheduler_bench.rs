//! The scheduler at scale (a benchmark, not a timed test; run it with
//! `cargo test -p cairn-drift --release --test scheduler_bench -- --ignored --nocapture`):
//! 1k, 10k and 100k tracked resources on a 10-minute interval with a 10 s tick. Per tick it
//! measures the claim of what is due (rows the due query reads, its plan, wall time) and a
//! stub runner that answers every claimed scan at once (the result path); per interval the
//! spread of slots (max per minute against the mean).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_drift::app::{App, Settings};
use cairn_drift::domain::schedule::{Schedule, phase_of};
use cairn_proto::runner as rpb;
use cairn_proto::state as spb;
use chrono::Utc;
use sqlx::Connection;
use tokio::sync::Notify;
use uuid::Uuid;

const INTERVAL: Duration = Duration::from_secs(600);
const TICK: Duration = Duration::from_secs(10);

async fn app(db: &cairn_db::TestDatabase) -> App {
    let args = cairn_service::DbArgs {
        database_url: db.runtime_url.clone(),
        database_migrate_url: Some(db.migrate_url.clone()),
        database_schema: Some("drift".to_owned()),
    };
    let pool = args
        .migrate_and_connect("drift", &cairn_drift::server::MIGRATOR, &[])
        .await
        .unwrap();
    let keys = cairn_testkit::TestKeys::new();
    let credential = cairn_sdk::Credential::parse(&keys.service_token()).unwrap();
    let tokens = cairn_sdk::TokenSource::new(credential, None);
    let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:9").connect_lazy();
    App {
        pool,
        coord: cairn_drift::coordinator::CoordinatorClient::new(channel, &tokens),
        events_notify: Arc::new(Notify::new()),
        messages_notify: Arc::new(Notify::new()),
        scheduler_notify: Arc::new(Notify::new()),
        settings: Arc::new(Settings {
            schedule: Schedule { interval: INTERVAL },
            max_per_target: 2,
            batch: 10_000,
            scan_timeout: Duration::from_secs(3600),
            replica: "bench".to_owned(),
            retry_after: Duration::from_secs(10),
        }),
    }
}

/// N tracked resources on N/20 targets, their slots placed as if the last tick was 10 s
/// ago: those whose phase falls in the last 10 s of the interval are due now.
async fn populate(app: &App, n: usize) -> usize {
    let now = Utc::now();
    let interval_ms = INTERVAL.as_millis() as i64;
    let tick_start = now - chrono::Duration::from_std(TICK).unwrap();
    let (mut ids, mut phases, mut due_at, mut targets, mut instances) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut due = 0;
    let instance_ids: Vec<Uuid> = (0..n.div_ceil(10)).map(|_| Uuid::new_v4()).collect();
    for i in 0..n {
        let id = Uuid::new_v4();
        let phase = phase_of(id);
        // This cycle's slot, the cycle starting at the last tick: those whose offset is
        // within one tick are due now, the others later in the interval.
        let at = tick_start + chrono::Duration::milliseconds(phase.rem_euclid(interval_ms));
        if at <= now {
            due += 1;
        }
        ids.push(id);
        phases.push(phase);
        due_at.push(at);
        targets.push(format!("t{}", i % n.div_ceil(20)));
        instances.push(instance_ids[i / 10]);
    }
    let tenant = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO instances (instance_id, tenant_id) SELECT i, $2 FROM unnest($1::uuid[]) i",
    )
    .bind(&instance_ids)
    .bind(tenant)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO tracked_resources (resource_id, tenant_id, instance_id, resource, state_id, \
           applied_run_id, target_id, environment, phase, next_due_at) \
         SELECT r, $2, i, 'res-' || r::text, gen_random_uuid(), gen_random_uuid(), t, 'staging', p, d \
         FROM unnest($1::uuid[], $3::uuid[], $4::text[], $5::bigint[], $6::timestamptz[]) AS x(r, i, t, p, d)",
    )
    .bind(&ids)
    .bind(tenant)
    .bind(&instances)
    .bind(&targets)
    .bind(&phases)
    .bind(&due_at)
    .execute(&app.pool)
    .await
    .unwrap();
    due
}

async fn due_query_plan(db: &cairn_db::TestDatabase) -> String {
    let mut conn = sqlx::PgConnection::connect(&db.admin_url).await.unwrap();
    sqlx::query("SET search_path = drift")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("ANALYZE tracked_resources")
        .execute(&mut conn)
        .await
        .unwrap();
    let plan: serde_json::Value = sqlx::query_scalar(
        "EXPLAIN (ANALYZE, FORMAT JSON) SELECT resource_id FROM tracked_resources \
         WHERE scan_id IS NULL AND next_due_at <= now() ORDER BY next_due_at LIMIT 10000",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
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
                "{kind} on {}, {} rows",
                index.unwrap_or("no index"),
                node["Actual Rows"]
            ));
        }
        node["Plans"].as_array()?.iter().find_map(scan)
    }
    scan(&plan[0]["Plan"]).unwrap_or_default()
}

#[tokio::test]
#[ignore = "benchmark: run with --ignored --nocapture"]
async fn scheduler_cost_is_proportional_to_what_is_due() {
    println!("| tracked | due this tick | the due query | claim (ms) | stub results (ms) |");
    println!("|---|---|---|---|---|");
    for n in [1_000usize, 10_000, 100_000] {
        let db = cairn_testkit::fresh_database().await;
        let app = app(&db).await;
        let written_due = populate(&app, n).await;
        let plan = due_query_plan(&db).await;
        let started = Instant::now();
        let (claimed, skipped, waiting) = app.claim_due().await.unwrap();
        let claim = started.elapsed();
        assert_eq!(skipped, 0);
        // (a few more may have become due since the rows were written)
        let due = claimed.len() + waiting;
        assert!(
            due >= written_due && due < n / 30,
            "{due} of {n} due: not one tick's worth"
        );
        let started = Instant::now();
        for scan in &claimed {
            let result = rpb::RunResult {
                run_id: scan.scan_id.to_string(),
                outcome: spb::RunOutcome::Succeeded as i32,
                ..Default::default()
            };
            app.on_result(&result).await.unwrap();
        }
        let results = started.elapsed();
        println!(
            "| {n} | {due} | {plan} | {:.1} | {:.1} ({} results) |",
            claim.as_secs_f64() * 1e3,
            results.as_secs_f64() * 1e3,
            claimed.len(),
        );
    }
    // The spread of 10,000 resources' slots over one interval, per minute.
    let schedule = Schedule { interval: INTERVAL };
    let start = Utc::now();
    let mut per_minute = [0u32; 10];
    for _ in 0..10_000 {
        let slot = schedule.next_slot(phase_of(Uuid::new_v4()), start);
        let minute = ((slot - start).num_seconds() / 60).clamp(0, 9) as usize;
        per_minute[minute] += 1;
    }
    let max = *per_minute.iter().max().unwrap();
    println!(
        "scans per minute over a 10-minute interval (10k resources): {per_minute:?}, max/mean = {:.3}",
        f64::from(max) / 1000.0
    );
    assert!(f64::from(max) <= 1.2 * 1000.0);
}
