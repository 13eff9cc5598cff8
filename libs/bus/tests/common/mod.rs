//! Shared test harness: real NATS and PostgreSQL from the CAIRN_TEST_* variables, a NATS
//! namespace and a database of its own per test.
#![allow(dead_code, clippy::unwrap_used)]

use std::future::Future;
use std::time::Duration;

use async_nats::jetstream;
use cairn_bus::{
    MESSAGE_OUTBOX_MIGRATION_SQL, Namespace, OUTBOX_MIGRATION_SQL, StreamKind, StreamSettings,
    setup_streams,
};
use cairn_db::{MigrationPlan, Migrator, PoolSettings, TestDatabase};
use cairn_proto::events::{Event, RunFinished, event::Payload};
use cairn_testkit::FaultProxy;
use sqlx::PgPool;

pub const SCHEMA: &str = "svc";

pub fn env(var: &str) -> String {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => value,
        _ => panic!("set {var} to run this test (see libs/bus/tests)"),
    }
}

/// A connected JetStream context and a fresh namespace whose streams exist.
pub struct Bus {
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    pub ns: Namespace,
}

impl Bus {
    pub async fn new() -> Self {
        let bus = Self::without_streams().await;
        setup_streams(&bus.js, &bus.ns, &StreamSettings::default())
            .await
            .unwrap();
        bus
    }

    pub async fn without_streams() -> Self {
        let client = async_nats::connect(env("CAIRN_TEST_NATS_URL"))
            .await
            .unwrap();
        let js = jetstream::new(client.clone());
        Self {
            client,
            js,
            ns: Namespace::random(),
        }
    }

    /// Messages currently stored in a stream.
    pub async fn count(&self, kind: StreamKind) -> u64 {
        let mut stream = self.js.get_stream(self.ns.stream_name(kind)).await.unwrap();
        stream.info().await.unwrap().state.messages
    }

    /// Deletes this namespace's streams (the server is shared by every test run).
    pub async fn cleanup(self) {
        for kind in StreamKind::ALL {
            let _ = self.js.delete_stream(self.ns.stream_name(kind)).await;
        }
    }
}

/// A fresh database whose `svc` schema holds the outbox tables, migrated exactly as a
/// service would (migration file, migrator role) and used through the runtime role.
pub async fn database() -> PgPool {
    database_and_url().await.0
}

/// [`database`] and the URL its pool connects with (the runtime role's), for a second pool
/// that reaches the same database another way (through a fault proxy).
pub async fn database_and_url() -> (PgPool, String) {
    let db = TestDatabase::create(&env("CAIRN_TEST_DATABASE_URL"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("0001_outbox.sql"), OUTBOX_MIGRATION_SQL).unwrap();
    std::fs::write(
        dir.path().join("0002_message_outbox.sql"),
        MESSAGE_OUTBOX_MIGRATION_SQL,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("0003_message_outbox_trace.sql"),
        cairn_bus::MESSAGE_OUTBOX_TRACE_MIGRATION_SQL,
    )
    .unwrap();
    let migrator = Migrator::new(dir.path()).await.unwrap();
    cairn_db::run_migrations(&MigrationPlan {
        migrate_url: &db.migrate_url,
        schema: SCHEMA,
        migrator: &migrator,
        runtime_role: Some(&db.runtime_role),
        append_only_tables: &[],
    })
    .await
    .unwrap();
    let pool = cairn_db::connect(&PoolSettings::new(db.runtime_url.clone(), SCHEMA)).unwrap();
    // Tables written by test handlers.
    let admin = cairn_db::connect(&PoolSettings::new(db.migrate_url.clone(), SCHEMA)).unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE handled (event_id uuid NOT NULL, note text NOT NULL);
         GRANT SELECT, INSERT ON handled TO {}",
        db.runtime_role
    )))
    .execute(&admin)
    .await
    .unwrap();
    admin.close().await;
    (pool, db.runtime_url.clone())
}

/// A pool of `url`'s database that connects through a fault proxy of its own.
pub async fn proxied_pool(url: &str) -> (FaultProxy, PgPool) {
    let proxy = FaultProxy::start_for_url(url).await.unwrap();
    let pool = cairn_db::connect(&PoolSettings::new(proxy.url_for(url), SCHEMA)).unwrap();
    (proxy, pool)
}

/// Once the connection `pool` used last is back in it (sqlx returns it after a ping), makes
/// it go silent: its server no longer answers and never closes it. New connections get
/// through.
pub async fn stall_once_idle(proxy: &FaultProxy, pool: &PgPool) {
    eventually("the connection is back in the pool", async || {
        pool.num_idle() == 1
    })
    .await;
    proxy.stall_open_connections();
}

pub fn event(tenant: &str) -> Event {
    let id = uuid::Uuid::now_v7();
    Event {
        event_id: id.to_string(),
        tenant_id: tenant.to_owned(),
        aggregate: "state".to_owned(),
        aggregate_id: "s-1".to_owned(),
        event_type: "run_finished".to_owned(),
        actor: "svc:test".to_owned(),
        occurred_at: Some(prost_types::Timestamp {
            seconds: 1_700_000_000,
            nanos: 0,
        }),
        payload: Some(Payload::RunFinished(RunFinished {
            state_id: "s-1".to_owned(),
            run_id: "r-1".to_owned(),
            attempt: 1,
            outcome: "succeeded".to_owned(),
            final_generation: 3,
        })),
    }
}

/// Waits until `check` returns true, failing the test after 20 s.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
