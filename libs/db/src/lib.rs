//! PostgreSQL plumbing shared by every service: pools scoped to a service schema, embedded
//! migrations run with the migrator credentials, runtime-role grants, a retrying transaction
//! helper, a time limit for work that no caller's deadline bounds (`time_limit`) and
//! throwaway test databases.

mod error;
mod migrate;
mod pool;
pub mod test_database;
mod time_limit;
mod transaction;

pub use error::{
    DbError, DbFailure, IsRetryable, classify, is_retryable_sqlx, is_unique_violation,
};
pub use migrate::{Database, MigrationPlan, migrate_and_connect, run_migrations};
pub use pool::{PoolSettings, connect};
pub use sqlx;
pub use sqlx::migrate::Migrator;
pub use test_database::TestDatabase;
pub use time_limit::{BACKGROUND_LIMIT, finish_within, is_timed_out, timed_out};
pub use transaction::{MAX_ATTEMPTS, transaction, transaction_within};
