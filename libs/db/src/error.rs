//! Database errors and their classification (retryable, unique violation).

/// Errors of the db library itself.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("invalid database url")]
    InvalidUrl(#[source] sqlx::Error),
    #[error("connect to PostgreSQL")]
    Connect(#[source] sqlx::Error),
    #[error("run migrations for schema {schema}")]
    Migrate {
        schema: String,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    #[error("{context}")]
    Query {
        context: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("invalid identifier {0:?}: use [a-z0-9_] only")]
    InvalidIdentifier(String),
}

/// Whether an error is worth retrying the whole transaction for.
pub trait IsRetryable {
    fn is_retryable(&self) -> bool;
}

impl IsRetryable for sqlx::Error {
    fn is_retryable(&self) -> bool {
        is_retryable_sqlx(self)
    }
}

/// Serialization failure (40001) or deadlock (40P01): the transaction can simply run again.
pub fn is_retryable_sqlx(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("40001" | "40P01")),
        _ => false,
    }
}

/// A unique constraint refused the row (23505), optionally a named constraint.
pub fn is_unique_violation(err: &sqlx::Error, constraint: Option<&str>) -> bool {
    match err {
        sqlx::Error::Database(db) if db.code().as_deref() == Some("23505") => {
            constraint.is_none_or(|c| db.constraint() == Some(c))
        }
        _ => false,
    }
}

/// Identifiers we splice into DDL (schema and role names) must be plain.
pub(crate) fn check_identifier(name: &str) -> Result<&str, DbError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(name)
    } else {
        Err(DbError::InvalidIdentifier(name.to_owned()))
    }
}

/// What a service should make of a database error (each service maps these once onto its
/// own error type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbFailure {
    /// PostgreSQL could not be reached or is shutting down: UNAVAILABLE, worth retrying.
    Unavailable(String),
    /// A serialization failure or deadlock: the transaction lost a race (retryable).
    Conflict(String),
    /// Anything else: a bug or a broken invariant.
    Other(String),
}

/// Classifies a sqlx error; the message names PostgreSQL and carries the error text.
pub fn classify(err: &sqlx::Error) -> DbFailure {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => {
            DbFailure::Unavailable(format!("PostgreSQL unavailable: {err}"))
        }
        sqlx::Error::Database(_) if is_retryable_sqlx(err) => {
            DbFailure::Conflict(format!("transaction conflict: {err}"))
        }
        sqlx::Error::Database(db)
            if db
                .code()
                .as_deref()
                .is_some_and(|c| c.starts_with("08") || c.starts_with("57")) =>
        {
            DbFailure::Unavailable(format!("PostgreSQL unavailable: {err}"))
        }
        _ => DbFailure::Other(format!("database: {err}")),
    }
}
