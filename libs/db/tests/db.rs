//! libs/db against a real PostgreSQL: test databases with their roles, migrations with
//! runtime grants and append-only tables, and the retrying transaction with its time limit.
#![allow(clippy::unwrap_used)]
use std::sync::atomic::{AtomicU32, Ordering};

use cairn_db::{MigrationPlan, PoolSettings, TestDatabase, connect, run_migrations};
use sqlx::migrate::Migrator;

fn admin_url() -> String {
    std::env::var("CAIRN_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!("CAIRN_TEST_DATABASE_URL is not set: run `eval \"$(deploy/local/start.sh)\"`")
    })
}

async fn migrated() -> (TestDatabase, sqlx::PgPool) {
    let db = TestDatabase::create(&admin_url()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0001_items.sql"),
        "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL);
         CREATE TABLE journal (id bigserial PRIMARY KEY, line text NOT NULL);",
    )
    .unwrap();
    let migrator = Migrator::new(dir.path()).await.unwrap();
    let plan = MigrationPlan {
        migrate_url: &db.migrate_url,
        schema: "svc",
        migrator: &migrator,
        runtime_role: Some(&db.runtime_role),
        append_only_tables: &["journal"],
    };
    run_migrations(&plan).await.unwrap();
    // Running again is a no-op.
    run_migrations(&plan).await.unwrap();
    let pool = connect(&PoolSettings::new(db.runtime_url.clone(), "svc")).unwrap();
    (db, pool)
}

#[tokio::test]
async fn runtime_role_gets_dml_but_not_ddl_and_append_only_tables_stay_append_only() {
    let (_db, pool) = migrated().await;
    sqlx::query("INSERT INTO items VALUES (1, 1)")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE items SET n = 2")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO journal (line) VALUES ('x')")
        .execute(&pool)
        .await
        .unwrap();
    let lines: i64 = sqlx::query_scalar("SELECT count(*) FROM journal")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(lines, 1);
    for refused in [
        "UPDATE journal SET line = 'y'",
        "DELETE FROM journal",
        "TRUNCATE journal",
        "CREATE TABLE svc.sneaky (id int)",
        "DELETE FROM _sqlx_migrations",
    ] {
        let err = sqlx::query(refused).execute(&pool).await.unwrap_err();
        let code = err
            .as_database_error()
            .and_then(|e| e.code())
            .map(|c| c.into_owned());
        assert_eq!(code.as_deref(), Some("42501"), "{refused}: {err}");
    }
}

#[tokio::test]
async fn test_databases_are_distinct() {
    let a = TestDatabase::create(&admin_url()).await.unwrap();
    let b = TestDatabase::create(&admin_url()).await.unwrap();
    assert_ne!(a.name, b.name);
    assert_ne!(a.runtime_role, b.runtime_role);
}

#[tokio::test]
async fn serialization_failures_are_retried_and_commit_once() {
    let (_db, pool) = migrated().await;
    let runs = AtomicU32::new(0);
    let result: Result<u32, sqlx::Error> = cairn_db::transaction!(&pool, |conn| {
        let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
        sqlx::query("INSERT INTO items VALUES ($1, $1)")
            .bind(i32::try_from(n).unwrap())
            .execute(&mut *conn)
            .await?;
        if n < 3 {
            // What PostgreSQL raises when a serializable transaction loses.
            sqlx::query("DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$")
                .execute(&mut *conn)
                .await?;
        }
        Ok(n)
    });
    assert_eq!(result.unwrap(), 3);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    let ids: Vec<i32> = sqlx::query_scalar("SELECT id FROM items ORDER BY id")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(ids, vec![3], "only the last attempt committed");
}

#[tokio::test]
async fn other_errors_are_not_retried_and_roll_back() {
    let (_db, pool) = migrated().await;
    let runs = AtomicU32::new(0);
    let result: Result<(), sqlx::Error> = cairn_db::transaction!(&pool, |conn| {
        runs.fetch_add(1, Ordering::SeqCst);
        sqlx::query("INSERT INTO items VALUES (7, 7)")
            .execute(&mut *conn)
            .await?;
        sqlx::query("INSERT INTO items VALUES (7, 8)")
            .execute(&mut *conn)
            .await?;
        Ok(())
    });
    let err = result.unwrap_err();
    assert!(cairn_db::is_unique_violation(&err, None), "{err}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM items")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 0);
}

#[tokio::test]
async fn the_closure_form_retries_too() {
    let (_db, pool) = migrated().await;
    let runs = AtomicU32::new(0);
    let result: Result<(), sqlx::Error> = cairn_db::transaction(&pool, async |conn| {
        if runs.fetch_add(1, Ordering::SeqCst) == 0 {
            sqlx::query("DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = '40P01'; END $$")
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    })
    .await;
    result.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn invalid_schema_names_are_refused() {
    let err = connect(&PoolSettings::new(admin_url(), "bad;name")).unwrap_err();
    assert!(err.to_string().contains("invalid identifier"), "{err}");
}

#[tokio::test]
async fn errors_are_classified_for_services() {
    let (_db, pool) = migrated().await;
    let conflict = sqlx::query("DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '40001'; END $$")
        .execute(&pool)
        .await
        .unwrap_err();
    assert!(
        matches!(cairn_db::classify(&conflict), cairn_db::DbFailure::Conflict(m) if m.starts_with("transaction conflict"))
    );
    let shutdown = sqlx::query("DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '57P01'; END $$")
        .execute(&pool)
        .await
        .unwrap_err();
    assert!(matches!(
        cairn_db::classify(&shutdown),
        cairn_db::DbFailure::Unavailable(_)
    ));
    let bug = sqlx::query("SELECT * FROM no_such_table")
        .execute(&pool)
        .await
        .unwrap_err();
    assert!(matches!(
        cairn_db::classify(&bug),
        cairn_db::DbFailure::Other(_)
    ));
    assert!(matches!(
        cairn_db::classify(&sqlx::Error::PoolTimedOut),
        cairn_db::DbFailure::Unavailable(m) if m.contains("PostgreSQL")
    ));
}

/// A transaction whose connection went silent (its server vanished without FIN or RST: no
/// error ever comes) is given up after its limit as PostgreSQL unavailable, in both forms,
/// and so is a statement outside a transaction (`bounded!`), having changed nothing; the
/// next one gets a new connection and commits; and the silent connections give their places
/// in the pool up (returned, sqlx would ping them for good).
#[tokio::test]
async fn a_transaction_on_a_connection_gone_silent_is_given_up_and_the_next_one_commits() {
    let (db, pool) = migrated().await;
    let proxy = cairn_testkit::FaultProxy::start_for_url(&db.runtime_url)
        .await
        .unwrap();
    let proxied = connect(&PoolSettings::new(proxy.url_for(&db.runtime_url), "svc")).unwrap();
    let limit = std::time::Duration::from_millis(300);
    let insert = async |conn: &mut sqlx::PgConnection, id: i32| {
        sqlx::query("INSERT INTO items VALUES ($1, $1)")
            .bind(id)
            .execute(conn)
            .await
            .map(|_| ())
    };
    let result: Result<(), sqlx::Error> =
        cairn_db::transaction!(&proxied, within limit, |conn| { insert(conn, 1).await });
    result.unwrap();
    let silent_once_idle = async || {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        while proxied.num_idle() != 1 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the connection never came back"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        proxy.stall_open_connections();
    };

    silent_once_idle().await;
    let given_up: Result<(), sqlx::Error> =
        cairn_db::transaction!(&proxied, within limit, |conn| { insert(conn, 2).await });
    let err = given_up.unwrap_err();
    assert!(cairn_db::is_timed_out(&err), "{err:?}");
    assert!(matches!(
        cairn_db::classify(&err),
        cairn_db::DbFailure::Unavailable(_)
    ));
    let committed: Result<(), sqlx::Error> =
        cairn_db::transaction!(&proxied, within limit, |conn| { insert(conn, 3).await });
    committed.unwrap();

    silent_once_idle().await;
    let given_up: Result<(), sqlx::Error> =
        cairn_db::transaction_within(&proxied, limit, async |conn| insert(conn, 4).await).await;
    assert!(cairn_db::is_timed_out(&given_up.unwrap_err()));
    let committed: Result<(), sqlx::Error> =
        cairn_db::transaction_within(&proxied, limit, async |conn| insert(conn, 5).await).await;
    committed.unwrap();

    // A statement outside a transaction, bounded the same way.
    silent_once_idle().await;
    let given_up: Result<(), sqlx::Error> =
        cairn_db::bounded!(&proxied, within limit, |conn| { insert(conn, 6).await });
    assert!(cairn_db::is_timed_out(&given_up.unwrap_err()));
    let done: Result<(), sqlx::Error> =
        cairn_db::bounded!(&proxied, within limit, |conn| { insert(conn, 7).await });
    done.unwrap();

    let ids: Vec<i32> = sqlx::query_scalar("SELECT id FROM items ORDER BY id")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(ids, vec![1, 3, 5, 7], "the given-up work changed nothing");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while proxied.size() != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pool still counts {} connections, the silent ones among them",
            proxied.size()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
