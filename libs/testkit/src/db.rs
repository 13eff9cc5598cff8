//! A fresh PostgreSQL database per test, with its own migrator and runtime roles.
use cairn_db::TestDatabase;

use crate::env;

/// Creates a database named after a UUID on the `CAIRN_TEST_DATABASE_URL` cluster. Panics
/// when the variable is unset or the cluster refuses.
pub async fn fresh_database() -> TestDatabase {
    let admin_url = env::database_url();
    match TestDatabase::create(&admin_url).await {
        Ok(db) => db,
        Err(err) => panic!(
            "create a test database on {} failed: {:#}",
            env::DATABASE_URL_VAR,
            anyhow::Error::from(err)
        ),
    }
}
