//! A serialization conflict is retried because of its type: two SERIALIZABLE transactions
//! of the coordinator's error type read the same row, then both write it; PostgreSQL fails
//! the loser with 40001, which becomes `BaseError::Conflict` on its way from sqlx, and
//! `cairn_db::transaction!` runs the loser again. No message text is looked at.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cairn_service::BaseError;
use cairn_state_coordinator::error::Error;
use tokio::sync::Barrier;

/// Reads the counter, waits (first attempts only) until the other transaction has read it
/// too, then writes it plus one.
async fn increment(
    pool: sqlx::PgPool,
    both_read: Arc<Barrier>,
    runs: Arc<AtomicU32>,
) -> Result<i32, Error> {
    cairn_db::transaction!(&pool, |conn| {
        let first_round = runs.fetch_add(1, Ordering::SeqCst) < 2;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            .execute(&mut *conn)
            .await?;
        let n: i32 = sqlx::query_scalar("SELECT n FROM counter WHERE id = 1")
            .fetch_one(&mut *conn)
            .await?;
        if first_round {
            both_read.wait().await;
        }
        sqlx::query("UPDATE counter SET n = $1 WHERE id = 1")
            .bind(n + 1)
            .execute(&mut *conn)
            .await?;
        Ok::<_, Error>(n + 1)
    })
}

#[tokio::test]
async fn a_serialization_conflict_is_retried_because_of_its_type() {
    cairn_testkit::init_tracing();
    let db = cairn_testkit::fresh_database().await;
    let pool = cairn_db::connect(&cairn_db::PoolSettings::new(
        db.migrate_url.clone(),
        "public",
    ))
    .unwrap();
    sqlx::query("CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO counter VALUES (1, 0)")
        .execute(&pool)
        .await
        .unwrap();

    let both_read = Arc::new(Barrier::new(2));
    let runs = Arc::new(AtomicU32::new(0));
    let a = tokio::spawn(increment(pool.clone(), both_read.clone(), runs.clone()));
    let b = tokio::spawn(increment(pool.clone(), both_read.clone(), runs.clone()));
    let mut results = vec![a.await.unwrap().unwrap(), b.await.unwrap().unwrap()];
    results.sort_unstable();

    assert_eq!(
        results,
        [1, 2],
        "both increments landed, one after the other"
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "the loser ran again after its serialization failure"
    );
    let n: i32 = sqlx::query_scalar("SELECT n FROM counter WHERE id = 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 2);
}

/// The same failure, looked at directly: what sqlx returns for 40001 is the typed conflict.
#[tokio::test]
async fn a_40001_from_postgres_is_the_typed_conflict() {
    let db = cairn_testkit::fresh_database().await;
    let pool = cairn_db::connect(&cairn_db::PoolSettings::new(
        db.migrate_url.clone(),
        "public",
    ))
    .unwrap();
    let raised = sqlx::query(
        "DO $$ BEGIN RAISE EXCEPTION 'made up' USING ERRCODE = 'serialization_failure'; END $$",
    )
    .execute(&pool)
    .await
    .unwrap_err();
    let err = Error::from(raised);
    assert!(
        matches!(err, Error::Base(BaseError::Conflict(_))),
        "{err:?}"
    );
    assert!(cairn_db::IsRetryable::is_retryable(&err));
}
