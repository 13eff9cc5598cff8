//! Connection pools whose sessions run inside one service schema.
use std::str::FromStr;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::error::{DbError, check_identifier};

/// How a service connects to its schema.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub url: String,
    /// The service schema; becomes the session's `search_path`.
    pub schema: String,
    pub max_connections: u32,
    pub acquire_timeout: Duration,
}

impl PoolSettings {
    pub fn new(url: impl Into<String>, schema: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: schema.into(),
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
        }
    }
}

pub(crate) fn connect_options(url: &str, schema: &str) -> Result<PgConnectOptions, DbError> {
    let schema = check_identifier(schema)?;
    let opts = PgConnectOptions::from_str(url).map_err(DbError::InvalidUrl)?;
    Ok(opts.options([("search_path", schema)]))
}

/// Opens a pool whose every session has `search_path = <schema>`. Lazy: the first query
/// connects, so a service can start its listeners and report UNAVAILABLE while PostgreSQL is
/// down instead of refusing to start.
pub fn connect(settings: &PoolSettings) -> Result<PgPool, DbError> {
    let opts = connect_options(&settings.url, &settings.schema)?;
    Ok(PgPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout)
        // No ping before every acquire: it costs a round trip per use, and a connection that
        // died is reported by its first query anyway (services map that to UNAVAILABLE).
        .test_before_acquire(false)
        .connect_lazy_with(opts))
}
