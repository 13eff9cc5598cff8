//! Throwaway databases for tests: one per test, named after a UUID, with their own migrator
//! and runtime roles, so tests share no rows and need no ordering.
use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};

use crate::error::DbError;

/// A fresh database on the test cluster.
#[derive(Debug, Clone)]
pub struct TestDatabase {
    pub name: String,
    /// Owner of the database; runs migrations.
    pub migrate_url: String,
    /// The runtime role the service serves with.
    pub runtime_url: String,
    pub runtime_role: String,
    pub admin_url: String,
}

impl TestDatabase {
    /// Creates `cairn_t_<unix seconds>_<random>` plus roles `<name>_migrator` and `<name>_runtime` using the
    /// superuser URL (`CAIRN_TEST_DATABASE_URL`).
    pub async fn create(admin_url: &str) -> Result<Self, DbError> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        // The creation time in the name lets a cleanup drop only old leftovers, never the
        // databases of tests that are running right now.
        let born = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let name = format!("cairn_t_{born}_{}", &id[..12]);
        let migrator = format!("{name}_migrator");
        let runtime = format!("{name}_runtime");
        let password = uuid::Uuid::new_v4().simple().to_string();
        let opts = PgConnectOptions::from_str(admin_url).map_err(DbError::InvalidUrl)?;
        let mut conn = PgConnection::connect_with(&opts)
            .await
            .map_err(DbError::Connect)?;
        let stmts = [
            format!("CREATE ROLE {migrator} LOGIN PASSWORD '{password}'"),
            format!("CREATE ROLE {runtime} LOGIN PASSWORD '{password}'"),
            format!("CREATE DATABASE {name} OWNER {migrator}"),
            format!("REVOKE ALL ON DATABASE {name} FROM PUBLIC"),
            format!("GRANT CONNECT ON DATABASE {name} TO {runtime}"),
        ];
        for stmt in stmts {
            conn.execute(AssertSqlSafe(stmt))
                .await
                .map_err(|source| DbError::Query {
                    context: format!("create test database {name}"),
                    source,
                })?;
        }
        let _ = conn.close().await;
        let (host, port) = (opts.get_host(), opts.get_port());
        let url_for = |user: &str| format!("postgres://{user}:{password}@{host}:{port}/{name}");
        Ok(Self {
            migrate_url: url_for(&migrator),
            runtime_url: url_for(&runtime),
            runtime_role: runtime,
            admin_url: replace_database(admin_url, &name),
            name,
        })
    }
}

/// The admin URL pointed at another database (keeps credentials and query parameters).
fn replace_database(url: &str, database: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{database}", &base[..path_start]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}
