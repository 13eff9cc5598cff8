//! Runs a service's embedded migrations in its own schema with the migrator credentials and
//! grants the runtime role what it needs.
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};

use crate::error::{DbError, check_identifier};
use crate::pool::connect_options;

/// What to migrate, where, and for whom.
pub struct MigrationPlan<'a> {
    /// `CAIRN_DATABASE_MIGRATE_URL` (falls back to `CAIRN_DATABASE_URL`).
    pub migrate_url: &'a str,
    pub schema: &'a str,
    pub migrator: &'a sqlx::migrate::Migrator,
    /// The role the service runs as; granted DML on the schema's tables (not DDL). `None`
    /// when the runtime and migrator credentials are the same.
    pub runtime_role: Option<&'a str>,
    /// Tables the runtime role may only INSERT into and SELECT from (append-only logs).
    pub append_only_tables: &'a [&'a str],
}

fn query_err(context: &str) -> impl FnOnce(sqlx::Error) -> DbError + '_ {
    move |source| DbError::Query {
        context: context.to_owned(),
        source,
    }
}

/// Creates the schema if needed, applies pending migrations (sqlx keeps its bookkeeping
/// table inside the schema) and grants the runtime role.
pub async fn run_migrations(plan: &MigrationPlan<'_>) -> Result<(), DbError> {
    let schema = check_identifier(plan.schema)?;
    let opts = connect_options(plan.migrate_url, schema)?;
    let mut conn = PgConnection::connect_with(&opts)
        .await
        .map_err(DbError::Connect)?;
    conn.execute(AssertSqlSafe(format!(
        "CREATE SCHEMA IF NOT EXISTS {schema}"
    )))
    .await
    .map_err(query_err("create schema"))?;
    // `run_direct` on the connection itself (what `run` does after acquiring): its future
    // is `Send`, so a service can migrate inside a spawned or `Send`-bound start-up.
    plan.migrator
        .run_direct(None, &mut conn, false)
        .await
        .map_err(|source| DbError::Migrate {
            schema: schema.to_owned(),
            source,
        })?;
    if let Some(role) = plan.runtime_role {
        grant_runtime(&mut conn, schema, role, plan.append_only_tables).await?;
    }
    conn.close().await.map_err(query_err("close"))?;
    Ok(())
}

async fn grant_runtime(
    conn: &mut PgConnection,
    schema: &str,
    role: &str,
    append_only: &[&str],
) -> Result<(), DbError> {
    let role = check_identifier(role)?;
    let mut stmts = vec![
        format!("GRANT USAGE ON SCHEMA {schema} TO {role}"),
        format!("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}"),
        format!("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"),
        format!("REVOKE ALL ON {schema}._sqlx_migrations FROM {role}"),
    ];
    for table in append_only {
        let table = check_identifier(table)?;
        stmts.push(format!(
            "REVOKE UPDATE, DELETE, TRUNCATE ON {schema}.{table} FROM {role}"
        ));
    }
    for stmt in stmts {
        conn.execute(AssertSqlSafe(stmt))
            .await
            .map_err(query_err("grant runtime role"))?;
    }
    Ok(())
}

/// Where a service's schema lives and with which credentials (what `CAIRN_DATABASE_URL`,
/// `CAIRN_DATABASE_MIGRATE_URL` and `CAIRN_DATABASE_SCHEMA` say).
#[derive(Debug, Clone, Copy)]
pub struct Database<'a> {
    /// The runtime role's URL.
    pub url: &'a str,
    /// The migrator's URL (owns the schema); the runtime URL when there is none.
    pub migrate_url: &'a str,
    pub schema: &'a str,
}

/// The user name a PostgreSQL URL connects as.
fn user_of(url: &str) -> Result<String, DbError> {
    let opts = <sqlx::postgres::PgConnectOptions as std::str::FromStr>::from_str(url)
        .map_err(DbError::InvalidUrl)?;
    Ok(opts.get_username().to_owned())
}

/// A service's start: runs its migrations as the migrator, grants the runtime role (when it
/// is another role) DML on the tables and INSERT/SELECT only on `append_only_tables`, and
/// returns a lazy pool of the runtime role.
pub async fn migrate_and_connect(
    db: Database<'_>,
    migrator: &sqlx::migrate::Migrator,
    append_only_tables: &[&str],
) -> Result<sqlx::PgPool, DbError> {
    let runtime = user_of(db.url)?;
    let runtime_role = (runtime != user_of(db.migrate_url)?).then_some(runtime);
    if runtime_role.is_none() && !append_only_tables.is_empty() {
        tracing::warn!(
            schema = db.schema,
            "CAIRN_DATABASE_URL and CAIRN_DATABASE_MIGRATE_URL use the same role: append-only \
             tables are protected by their triggers only, not by INSERT/SELECT-only grants"
        );
    }
    run_migrations(&MigrationPlan {
        migrate_url: db.migrate_url,
        schema: db.schema,
        migrator,
        runtime_role: runtime_role.as_deref(),
        append_only_tables,
    })
    .await?;
    crate::pool::connect(&crate::pool::PoolSettings::new(db.url, db.schema))
}
