//! A bound on how long a unit of database work may take.
//!
//! sqlx (0.9) sets no TCP keepalive or user timeout on its sockets, so a query sent on a
//! connection whose server vanished without FIN or RST (a host that died, a failover behind
//! a dropped NAT entry or load balancer) waits for its answer for good: the request was
//! acknowledged, nothing is left to retransmit and no error ever comes. A request handler is
//! bounded by its caller's deadline; a background loop (an outbox relay, an event consumer, a
//! sweeper) is not, and would stop for good at its next statement. [`within`] gives such work
//! up after a limit, as an I/O time-out that every service reads as "PostgreSQL unavailable"
//! (retried later). The abandoned connection is not handed out again (sqlx takes a
//! connection back into its pool only once a ping over it is answered), so the next try
//! gets another one.
//!
//! That ping waits like any request, and the connection keeps its place in the pool while
//! it does: until the kernel gives the socket up (~15 min with Linux's default
//! `net.ipv4.tcp_retries2`), or for good. A pool whose every connection went silent at once
//! (PostgreSQL's host died) would stay full for that long. Work that holds its
//! [`PoolConnection`] outside the bounded future therefore ends with [`finish_within`],
//! which closes a given-up connection instead (sqlx bounds that close by 5 s) and so frees
//! its place; the transactions of [`crate::transaction`] do.
use std::future::Future;
use std::io;
use std::time::Duration;

use sqlx::Postgres;
use sqlx::pool::PoolConnection;
use tokio::time::error::Elapsed;

/// The bound for one unit of background database work when its settings name none (an
/// outbox relay's batch, a sweep, a scheduler tick, an expiry pass): far above what such work
/// takes on a healthy database, far below the ~15 minutes after which Linux itself gives up a
/// connection whose requests go unacknowledged (and the forever of one whose last request
/// was acknowledged).
pub const BACKGROUND_LIMIT: Duration = Duration::from_secs(30);

/// Runs `work` for at most `limit`; past it, `work` is dropped (its transaction, if any, is
/// never committed) and the answer is an I/O [`io::ErrorKind::TimedOut`] error.
pub async fn within<T, E, F>(limit: Duration, work: F) -> Result<T, E>
where
    F: Future<Output = Result<T, E>>,
    E: From<sqlx::Error>,
{
    match tokio::time::timeout(limit, work).await {
        Ok(done) => done,
        Err(_) => Err(E::from(timed_out(limit))),
    }
}

/// The answer of work on `conn` bounded by `limit` (`tokio::time::timeout(limit, work)`,
/// whose `outcome` this is). Past the limit `conn` is closed when dropped instead of going
/// back to its pool, so a connection gone silent gives its place in the pool up within
/// sqlx's close time-out, and the answer is the I/O [`io::ErrorKind::TimedOut`] error of
/// [`within`].
///
/// ```ignore
/// let mut conn = pool.acquire().await?;
/// let outcome = tokio::time::timeout(limit, work(&mut conn)).await;
/// cairn_db::finish_within(&mut conn, limit, outcome)
/// ```
pub fn finish_within<T, E>(
    conn: &mut PoolConnection<Postgres>,
    limit: Duration,
    outcome: Result<Result<T, E>, Elapsed>,
) -> Result<T, E>
where
    E: From<sqlx::Error>,
{
    match outcome {
        Ok(done) => done,
        Err(_) => {
            conn.close_on_drop();
            Err(E::from(timed_out(limit)))
        }
    }
}

/// Runs `body` on a connection of `pool` (bound to `conn`, a `&mut PgConnection`), given up
/// after [`BACKGROUND_LIMIT`] or `limit` as [`finish_within`] gives work up (the connection
/// closed). For the statements a background loop runs outside a transaction; the body is a
/// block returning `Result<T, E>` with `E: From<sqlx::Error>`.
///
/// ```ignore
/// let rows = cairn_db::bounded!(&pool, |conn| { store::rows_of(conn, id).await })?;
/// let n = cairn_db::bounded!(&pool, within limit, |conn| { store::count(conn).await })?;
/// ```
#[macro_export]
macro_rules! bounded {
    ($pool:expr, |$conn:ident| $body:block) => {
        $crate::bounded!($pool, within $crate::BACKGROUND_LIMIT, |$conn| $body)
    };
    ($pool:expr, within $limit:expr, |$conn:ident| $body:block) => {
        async {
            let __limit: ::std::time::Duration = $limit;
            let mut __pooled = match $pool.acquire().await {
                Ok(conn) => conn,
                Err(e) => return Err(e.into()),
            };
            let __outcome = ::tokio::time::timeout(__limit, async {
                let $conn: &mut $crate::sqlx::PgConnection = &mut *__pooled;
                $body
            })
            .await;
            $crate::finish_within(&mut __pooled, __limit, __outcome)
        }
        .await
    };
}

/// The error of database work given up after `limit`.
pub fn timed_out(limit: Duration) -> sqlx::Error {
    sqlx::Error::Io(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no answer from PostgreSQL within {limit:?}; the connection was given up"),
    ))
}

/// True for the error [`within`] returns.
pub fn is_timed_out(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Io(io) if io.kind() == io::ErrorKind::TimedOut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DbFailure, classify};

    #[tokio::test]
    async fn work_past_its_limit_is_an_unavailable_database_and_work_within_it_is_its_answer() {
        let limit = Duration::from_millis(20);
        let stuck: Result<u8, sqlx::Error> =
            within(limit, std::future::pending::<Result<u8, sqlx::Error>>()).await;
        let err = stuck.expect_err("pending work cannot answer");
        assert!(is_timed_out(&err), "{err:?}");
        assert!(
            matches!(classify(&err), DbFailure::Unavailable(_)),
            "{err:?}"
        );

        let answered: Result<u8, sqlx::Error> = within(limit, async { Ok(7) }).await;
        assert_eq!(answered.expect("answered"), 7);
        let failed: Result<u8, sqlx::Error> =
            within(limit, async { Err(sqlx::Error::RowNotFound) }).await;
        let err = failed.expect_err("its own error");
        assert!(!is_timed_out(&err) && matches!(err, sqlx::Error::RowNotFound));
    }
}
