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
    plan.migrator
        .run(&mut conn)
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
