//! The `job_outbox` table: queue messages written in the transaction that makes them due,
//! published by [`crate::background::job_relay`].
use sqlx::PgConnection;
use uuid::Uuid;

/// The work queues a job can go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// `cairn.deployq`: deployment jobs.
    DeployQ,
}

impl Queue {
    pub fn as_str(self) -> &'static str {
        match self {
            Queue::DeployQ => "deployq",
        }
    }
}

/// An unsent job.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct JobRow {
    pub seq: i64,
    pub msg_id: Uuid,
    pub queue: String,
    pub queue_key: String,
    pub payload: Vec<u8>,
}

/// Writes a job to the outbox; returns its message id (its `Nats-Msg-Id`).
pub async fn job_enqueue(
    conn: &mut PgConnection,
    queue: Queue,
    key: &str,
    payload: &[u8],
) -> sqlx::Result<Uuid> {
    let msg_id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO job_outbox (msg_id, queue, queue_key, payload) VALUES ($1, $2, $3, $4)",
    )
    .bind(msg_id)
    .bind(queue.as_str())
    .bind(key)
    .bind(payload)
    .execute(conn)
    .await?;
    Ok(msg_id)
}

/// Up to `limit` unsent jobs, oldest first, locked (other relays skip them).
pub async fn jobs_unsent_locked(conn: &mut PgConnection, limit: i64) -> sqlx::Result<Vec<JobRow>> {
    sqlx::query_as(
        "SELECT seq, msg_id, queue, queue_key, payload FROM job_outbox
          WHERE sent_at IS NULL ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(limit)
    .fetch_all(conn)
    .await
}

pub async fn jobs_mark_sent(conn: &mut PgConnection, seqs: &[i64]) -> sqlx::Result<()> {
    sqlx::query("UPDATE job_outbox SET sent_at = now() WHERE seq = ANY($1)")
        .bind(seqs)
        .execute(conn)
        .await?;
    Ok(())
}

/// Deletes jobs sent more than `older_than_secs` ago; returns how many.
pub async fn jobs_prune_sent(conn: &mut PgConnection, older_than_secs: f64) -> sqlx::Result<u64> {
    Ok(sqlx::query(
        "DELETE FROM job_outbox WHERE sent_at IS NOT NULL
            AND sent_at < now() - make_interval(secs => $1)",
    )
    .bind(older_than_secs)
    .execute(conn)
    .await?
    .rows_affected())
}
