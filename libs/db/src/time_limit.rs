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
use std::future::Future;
use std::io;
use std::time::Duration;

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
