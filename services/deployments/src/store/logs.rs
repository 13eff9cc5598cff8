//! The `step_logs` and `step_log_counts` tables: the stored log lines of a step's runs,
//! bounded per step (migration 0011).
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

/// Which line: its step, run, attempt and sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineKey {
    pub step_id: Uuid,
    pub run_id: Uuid,
    pub attempt: i32,
    pub seq: i64,
}

/// A stored line.
#[derive(Debug, Clone, FromRow)]
pub struct LogRow {
    pub step_id: Uuid,
    pub attempt: i32,
    pub seq: i64,
    pub stream: String,
    pub text: String,
}

/// The step whose run `run_id` is, and its deployment (the first step by position when
/// several name it).
pub async fn step_of_run(
    conn: &mut PgConnection,
    run_id: Uuid,
) -> sqlx::Result<Option<(Uuid, Uuid)>> {
    sqlx::query_as(
        "SELECT step_id, deployment_id FROM steps WHERE run_id = $1 ORDER BY position LIMIT 1",
    )
    .bind(run_id)
    .fetch_optional(conn)
    .await
}

/// Whether this line was received before (its event exists even once its text was dropped).
pub async fn line_seen(
    conn: &mut PgConnection,
    run_id: Uuid,
    attempt: i32,
    seq: i64,
) -> sqlx::Result<bool> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM deployment_events
                         WHERE kind = 'log' AND run_id = $1 AND attempt = $2 AND seq = $3)",
    )
    .bind(run_id)
    .bind(attempt)
    .bind(seq)
    .fetch_one(conn)
    .await
}

/// Counts one more received line of the step; returns its place (1, 2, …).
pub async fn line_count_next(conn: &mut PgConnection, step_id: Uuid) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "INSERT INTO step_log_counts (step_id, received) VALUES ($1, 1)
         ON CONFLICT (step_id) DO UPDATE SET received = step_log_counts.received + 1
         RETURNING received",
    )
    .bind(step_id)
    .fetch_one(conn)
    .await
}

/// Stores a line at place `n` of its step.
pub async fn line_insert(
    conn: &mut PgConnection,
    line: &LineKey,
    n: i64,
    stream: &str,
    text: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO step_logs (step_id, n, run_id, attempt, seq, stream, text)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(line.step_id)
    .bind(n)
    .bind(line.run_id)
    .bind(line.attempt)
    .bind(line.seq)
    .bind(stream)
    .bind(text)
    .execute(conn)
    .await?;
    Ok(())
}

/// Drops the step's stored lines at places `from..=to`.
pub async fn lines_drop(
    conn: &mut PgConnection,
    step_id: Uuid,
    from: i64,
    to: i64,
) -> sqlx::Result<u64> {
    Ok(
        sqlx::query("DELETE FROM step_logs WHERE step_id = $1 AND n BETWEEN $2 AND $3")
            .bind(step_id)
            .bind(from)
            .bind(to)
            .execute(conn)
            .await?
            .rows_affected(),
    )
}

/// A step's stored lines: run by run (in the order their first line arrived), each by
/// attempt and sequence number.
pub async fn lines_of(conn: &mut PgConnection, step_id: Uuid) -> sqlx::Result<Vec<LogRow>> {
    sqlx::query_as(
        "SELECT step_id, attempt, seq, stream, text FROM step_logs WHERE step_id = $1
          ORDER BY min(n) OVER (PARTITION BY run_id), attempt, seq",
    )
    .bind(step_id)
    .fetch_all(conn)
    .await
}

/// How many lines the step received in all (stored or not).
pub async fn lines_received(conn: &mut PgConnection, step_id: Uuid) -> sqlx::Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT received FROM step_log_counts WHERE step_id = $1")
            .bind(step_id)
            .fetch_optional(conn)
            .await?
            .unwrap_or(0),
    )
}
