//! The one way to run a transaction: serialization failures and deadlocks are retried.
use std::time::Duration;

use sqlx::{PgConnection, PgPool};

use crate::error::IsRetryable;

/// How often a transaction runs before its retryable error is returned.
pub const MAX_ATTEMPTS: u32 = 5;

/// Runs `work` inside a transaction and commits it; on a retryable failure (40001, 40P01,
/// at any point including COMMIT) the transaction is rolled back and run again with a small
/// backoff. `work` must therefore be free of side effects outside the database.
///
/// Each attempt is given up after [`crate::BACKGROUND_LIMIT`] ([`crate::bounded!`]):
/// a connection whose server vanished without a word then fails the transaction as
/// PostgreSQL unavailable (not retried here) and is closed, instead of holding its caller
/// and its place in the pool for good, whether that caller is a request (bounded by its
/// deadline anyway) or a background loop (bounded by nothing else).
pub async fn transaction<T, E, F>(pool: &PgPool, work: F) -> Result<T, E>
where
    F: AsyncFnMut(&mut PgConnection) -> Result<T, E>,
    E: From<sqlx::Error> + IsRetryable,
{
    transaction_within(pool, crate::BACKGROUND_LIMIT, work).await
}

/// [`transaction`] with each attempt given up after `limit` instead.
pub async fn transaction_within<T, E, F>(
    pool: &PgPool,
    limit: Duration,
    mut work: F,
) -> Result<T, E>
where
    F: AsyncFnMut(&mut PgConnection) -> Result<T, E>,
    E: From<sqlx::Error> + IsRetryable,
{
    let mut attempt = 1;
    loop {
        let result = crate::bounded!(pool, within limit, |conn| {
            let mut tx = sqlx::Connection::begin(conn).await?;
            let value = work(&mut tx).await?;
            tx.commit().await?;
            Ok::<T, E>(value)
        });
        match result {
            Err(err) if err.is_retryable() && attempt < MAX_ATTEMPTS => {
                tracing::debug!(attempt, "retrying transaction after serialization failure");
                tokio::time::sleep(Duration::from_millis(5 << attempt)).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// The same retrying transaction as [`transaction`], written inline so the body's future
/// stays an ordinary `async` block. Use it in `Send` contexts (gRPC handlers, spawned
/// tasks): the closure form's higher-ranked future trips rustc's "Send is not general
/// enough". The body is a block that returns `Result<T, E>` (it may use `?` and
/// `return`); `$conn` is bound to `&mut PgConnection`. Each attempt is bounded as in
/// [`transaction`], or by `limit` in the form `transaction!(&pool, within limit, |conn| …)`.
///
/// ```ignore
/// let n = cairn_db::transaction!(&pool, |conn| {
///     sqlx::query("...").execute(&mut *conn).await?;
///     Ok::<_, MyError>(1)
/// })?;
/// ```
#[macro_export]
macro_rules! transaction {
    ($pool:expr, |$conn:ident| $body:block) => {
        $crate::transaction!($pool, within $crate::BACKGROUND_LIMIT, |$conn| $body)
    };
    ($pool:expr, within $limit:expr, |$conn:ident| $body:block) => {{
        let __limit: ::std::time::Duration = $limit;
        let mut __attempt: u32 = 1;
        loop {
            let __result = $crate::bounded!($pool, within __limit, |__conn| {
                let mut __tx = match $crate::sqlx::Connection::begin(__conn).await {
                    Ok(tx) => tx,
                    Err(e) => return Err(e.into()),
                };
                let __value = {
                    let $conn: &mut $crate::sqlx::PgConnection = &mut *__tx;
                    match (async { $body }).await {
                        Ok(v) => v,
                        Err(e) => return Err(e),
                    }
                };
                match __tx.commit().await {
                    Ok(()) => Ok(__value),
                    Err(e) => Err(e.into()),
                }
            });
            match __result {
                Err(e)
                    if $crate::IsRetryable::is_retryable(&e)
                        && __attempt < $crate::MAX_ATTEMPTS =>
                {
                    ::tokio::time::sleep(::std::time::Duration::from_millis(5u64 << __attempt))
                        .await;
                    __attempt += 1;
                }
                other => break other,
            }
        }
    }};
}
