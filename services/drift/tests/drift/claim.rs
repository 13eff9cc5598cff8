//! The scheduler's claim on its own (PostgreSQL only, no runner): a tick claims exactly the
//! resources due by its time, at most `max_per_target` per target, leaves the rest due, and
//! finds them through the partial index on `next_due_at` (never a sequential scan). The
//! scale numbers are the benchmark's (`benches/scheduler.rs`).
use std::sync::Arc;
use std::time::Duration;

use cairn_drift::app::{App, Settings};
use cairn_drift::domain::schedule::{Schedule, phase_of};
use chrono::Utc;
use sqlx::Connection;
use tokio::sync::Notify;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_claims_what_is_due_by_its_time_within_the_target_bound() {
    let db = cairn_testkit::fresh_database().await;
    let pool = cairn_service::DbArgs {
        database_url: db.runtime_url.clone(),
        database_migrate_url: Some(db.migrate_url.clone()),
        database_schema: Some("drift".to_owned()),
    }
    .migrate_and_connect("drift", &cairn_drift::server::MIGRATOR, &[])
    .await
    .unwrap();
    let keys = cairn_testkit::TestKeys::new();
    let tokens = cairn_sdk::TokenSource::new(
        cairn_sdk::Credential::parse(&keys.service_token()).unwrap(),
        None,
    );
    // No coordinator: every claimed scan is postponed at dispatch, which frees its slot.
    let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:9").connect_lazy();
    let schedule = Schedule {
        interval: Duration::from_secs(600),
    };
    let app = App {
        pool: pool.clone(),
        coord: cairn_drift::coordinator::CoordinatorClient::new(
            "http://127.0.0.1:9",
            channel,
            &tokens,
        )
        .unwrap(),
        events_notify: Arc::new(Notify::new()),
        messages_notify: Arc::new(Notify::new()),
        scheduler_notify: Arc::new(Notify::new()),
        settings: Arc::new(Settings {
            schedule,
            max_per_target: 2,
            batch: 10_000,
            scan_timeout: Duration::from_secs(3600),
            replica: "claim-test".to_owned(),
            retry_after: Duration::from_secs(3600),
        }),
    };

    // 2,000 resources on 10 targets, each at its first slot after `start`.
    let start = Utc::now();
    let tenant = Uuid::new_v4();
    let instance = Uuid::new_v4();
    let ids: Vec<Uuid> = (0..2_000).map(|_| Uuid::new_v4()).collect();
    let phases: Vec<i64> = ids.iter().map(|id| phase_of(*id)).collect();
    let due: Vec<_> = phases
        .iter()
        .map(|p| schedule.next_slot(*p, start))
        .collect();
    let targets: Vec<String> = (0..ids.len()).map(|i| format!("t{}", i % 10)).collect();
    sqlx::query("INSERT INTO instances (instance_id, tenant_id) VALUES ($1, $2)")
        .bind(instance)
        .bind(tenant)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO tracked_resources (resource_id, tenant_id, instance_id, resource, state_id, \
           applied_run_id, target_id, environment, phase, next_due_at) \
         SELECT r, $2, $3, 'res-' || r::text, gen_random_uuid(), gen_random_uuid(), t, 'staging', p, d \
         FROM unnest($1::uuid[], $4::text[], $5::bigint[], $6::timestamptz[]) AS x(r, t, p, d)",
    )
    .bind(&ids)
    .bind(tenant)
    .bind(instance)
    .bind(&targets)
    .bind(&phases)
    .bind(&due)
    .execute(&pool)
    .await
    .unwrap();

    // A tick one minute in: due are those whose slot fell in that minute.
    let at = start + chrono::Duration::seconds(60);
    let mut per_target = std::collections::HashMap::<&str, usize>::new();
    for (d, t) in due.iter().zip(&targets) {
        if *d <= at {
            *per_target.entry(t.as_str()).or_default() += 1;
        }
    }
    let due_now: usize = per_target.values().sum();
    let bounded: usize = per_target.values().map(|n| (*n).min(2)).sum();
    assert!(due_now > bounded, "the bound must bite: {per_target:?}");
    let tick = app.tick_at(at).await.unwrap();
    assert_eq!(tick.claimed, bounded, "{tick:?}");
    assert_eq!(tick.waiting, due_now - bounded, "{tick:?}");
    assert_eq!(tick.skipped, 0);

    let scans: i64 = sqlx::query_scalar("SELECT count(*) FROM scans")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(scans, bounded as i64);
    let claimed_late: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM scans s JOIN tracked_resources r USING (resource_id) \
         WHERE s.slot_at > $1",
    )
    .bind(at)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(claimed_late, 0, "nothing due later was claimed");

    // The due query reads the partial index, not the table.
    let mut conn = sqlx::PgConnection::connect(&db.admin_url).await.unwrap();
    sqlx::query("SET search_path = drift")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("ANALYZE tracked_resources")
        .execute(&mut conn)
        .await
        .unwrap();
    let mut tx = conn.begin().await.unwrap();
    let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN {}",
        cairn_drift::store::tracking::tracked_due_sql()
    )))
    .bind(at)
    .bind(200_i64)
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    let plan = plan.join("\n");
    assert!(plan.contains("tracked_resources_due_idx"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
}
