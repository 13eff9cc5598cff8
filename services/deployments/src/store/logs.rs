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

/// The steps whose runs these are, with their deployments, as (run, step, deployment): for
/// each run the first step by position that names it.
pub async fn steps_of_runs(
    conn: &mut PgConnection,
    run_ids: &[Uuid],
) -> sqlx::Result<Vec<(Uuid, Uuid, Uuid)>> {
    sqlx::query_as(
        "SELECT DISTINCT ON (run_id) run_id, step_id, deployment_id FROM steps
          WHERE run_id = ANY($1) ORDER BY run_id, position",
    )
    .bind(run_ids)
    .fetch_all(conn)
    .await
}

/// Which of these lines (run, attempt, seq) were received before.
pub async fn lines_seen(
    conn: &mut PgConnection,
    keys: &[(Uuid, i32, i64)],
) -> sqlx::Result<Vec<(Uuid, i32, i64)>> {
    let (runs, attempts, seqs) = unzip3(keys.iter().copied());
    sqlx::query_as(
        "SELECT e.run_id, e.attempt, e.seq
           FROM unnest($1::uuid[], $2::int[], $3::bigint[]) AS k(run_id, attempt, seq)
           JOIN deployment_events e
             ON e.kind = 'log' AND e.run_id = k.run_id AND e.attempt = k.attempt
            AND e.seq = k.seq",
    )
    .bind(runs)
    .bind(attempts)
    .bind(seqs)
    .fetch_all(conn)
    .await
}

fn unzip3<A, B, C>(items: impl Iterator<Item = (A, B, C)>) -> (Vec<A>, Vec<B>, Vec<C>) {
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for (x, y, z) in items {
        a.push(x);
        b.push(y);
        c.push(z);
    }
    (a, b, c)
}

/// Locks the line counters of these steps (created when missing), in one order, so two
/// writers of several steps' lines never wait for each other in a circle; returns the
/// steps that exist.
pub async fn line_counts_lock(
    conn: &mut PgConnection,
    step_ids: &[Uuid],
) -> sqlx::Result<Vec<Uuid>> {
    if step_ids.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_scalar(
        "INSERT INTO step_log_counts (step_id)
         SELECT step_id FROM steps WHERE step_id = ANY($1) ORDER BY step_id
         ON CONFLICT (step_id) DO UPDATE SET received = step_log_counts.received
         RETURNING step_id",
    )
    .bind(step_ids)
    .fetch_all(conn)
    .await
}

/// Counts `k` more received lines of the step; returns the place of the last (the
/// first of them is at that minus k-1).
pub async fn line_count_add(conn: &mut PgConnection, step_id: Uuid, k: i64) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "INSERT INTO step_log_counts (step_id, received) VALUES ($1, $2)
         ON CONFLICT (step_id) DO UPDATE SET received = step_log_counts.received + EXCLUDED.received
         RETURNING received",
    )
    .bind(step_id)
    .bind(k)
    .fetch_one(conn)
    .await
}

/// A line to store at place `n` of its step.
pub struct NewLine<'a> {
    pub key: LineKey,
    pub n: i64,
    pub stream: &'a str,
    pub text: &'a str,
}

/// Stores lines (one statement).
pub async fn lines_insert(conn: &mut PgConnection, lines: &[NewLine<'_>]) -> sqlx::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let steps: Vec<Uuid> = lines.iter().map(|l| l.key.step_id).collect();
    let ns: Vec<i64> = lines.iter().map(|l| l.n).collect();
    let runs: Vec<Uuid> = lines.iter().map(|l| l.key.run_id).collect();
    let attempts: Vec<i32> = lines.iter().map(|l| l.key.attempt).collect();
    let seqs: Vec<i64> = lines.iter().map(|l| l.key.seq).collect();
    let streams: Vec<&str> = lines.iter().map(|l| l.stream).collect();
    let texts: Vec<&str> = lines.iter().map(|l| l.text).collect();
    sqlx::query(
        "INSERT INTO step_logs (step_id, n, run_id, attempt, seq, stream, text)
         SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::uuid[], $4::int[], $5::bigint[],
                              $6::text[], $7::text[])",
    )
    .bind(steps)
    .bind(ns)
    .bind(runs)
    .bind(attempts)
    .bind(seqs)
    .bind(streams)
    .bind(texts)
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
