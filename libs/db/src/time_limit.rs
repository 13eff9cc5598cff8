//! A bound on how long a unit of database work may take.
//!
//! sqlx (0.9) sets no TCP keepalive or user timeout on its sockets, so a query sent on a
//! connection whose server vanished without FIN or RST (a host that died, a failover behind
//! a dropped NAT entry or load balancer) waits for its answer for good: the request was
//! acknowledged, nothing is left to retransmit and no error ever comes. A request handler is
//! bounded by its caller's deadline; a background loop (an outbox relay, an event consumer, a
//! sweeper) is not, and would stop for good at its next statement. [`bounded!`] (and every
//! transaction of [`crate::transaction`], which uses it) gives such work up after a limit,
//! as an I/O time-out that every service reads as "PostgreSQL unavailable" (retried later).
//!
//! The given-up connection is closed, not returned ([`finish_within`]): sqlx takes a
//! returned connection back only once a ping over it is answered, and on a silent one that
//! ping waits, holding the connection's place in the pool, until the kernel gives the socket
//! up (~15 min with Linux's default `net.ipv4.tcp_retries2`), or for good. A pool whose every
//! connection went silent at once (PostgreSQL's host died) would stay full for that long;
//! closed (sqlx bounds a close by 5 s), each gives its place up and the next try connects
//! anew.
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

/// The answer of work on `conn` bounded by `limit` (`tokio::time::timeout(limit, work)`,
/// whose `outcome` this is). Past the limit `conn` is closed when dropped instead of going
/// back to its pool, so a connection gone silent gives its place in the pool up within
/// sqlx's close time-out, and the answer is the I/O [`io::ErrorKind::TimedOut`] error of
/// [`timed_out`].
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

/// True for the error of work given up ([`timed_out`]).
pub fn is_timed_out(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Io(io) if io.kind() == io::ErrorKind::TimedOut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DbFailure, classify};

    #[test]
    fn work_past_its_limit_is_an_unavailable_database() {
        let err = timed_out(Duration::from_millis(20));
        assert!(is_timed_out(&err), "{err:?}");
        assert!(
            matches!(classify(&err), DbFailure::Unavailable(_)),
            "{err:?}"
        );
        assert!(!is_timed_out(&sqlx::Error::RowNotFound));
    }
}
