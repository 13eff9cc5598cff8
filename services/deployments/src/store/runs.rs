//! The `step_runs` table: each run a step registered, with the exact registration
//! (persisted before RegisterRun is sent, so a resumed worker re-sends identical bytes) and
//! the first result of the run.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct RunRow {
    pub run_id: Uuid,
    pub step_id: Uuid,
    pub deployment_id: Uuid,
    pub seq: i32,
    pub kind: String,
    pub state_id: Uuid,
    pub root_config: Vec<u8>,
    pub config_hash: String,
    pub context: Vec<u8>,
    pub plan_run_id: Option<Uuid>,
    pub status: String,
    pub requested_at: Option<DateTime<Utc>>,
    pub cancel_sent: bool,
    pub approved_hash: String,
    pub attempt: Option<i32>,
    pub outcome: Option<String>,
    pub error_class: Option<String>,
    pub message: Option<String>,
    pub summary: Option<Vec<u8>>,
    pub plan_sha256: Option<String>,
    pub base_generation: Option<i64>,
    pub final_generation: Option<i64>,
    pub result_at: Option<DateTime<Utc>>,
}

impl RunRow {
    pub fn finished(&self) -> bool {
        self.outcome.is_some()
    }
}

const COLS: &str = "run_id, step_id, deployment_id, seq, kind, state_id, root_config, \
    config_hash, context, plan_run_id, status, requested_at, cancel_sent, approved_hash, \
    attempt, outcome, error_class, message, summary, plan_sha256, base_generation, \
    final_generation, result_at";

/// A run as it is persisted before registration.
pub struct NewRun<'a> {
    pub run_id: Uuid,
    pub step_id: Uuid,
    pub deployment_id: Uuid,
    pub seq: i32,
    pub kind: &'a str,
    pub state_id: Uuid,
    pub root_config: &'a [u8],
    pub config_hash: &'a str,
    pub context: &'a [u8],
    pub plan_run_id: Option<Uuid>,
}

/// Inserts the run; `None` when the step already has a run with this sequence number
/// (another worker got there first).
pub async fn run_insert(conn: &mut PgConnection, r: &NewRun<'_>) -> sqlx::Result<Option<RunRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO step_runs (run_id, step_id, deployment_id, seq, kind, state_id, root_config,
                                config_hash, context, plan_run_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (step_id, seq) DO NOTHING RETURNING {COLS}"
    )))
    .bind(r.run_id)
    .bind(r.step_id)
    .bind(r.deployment_id)
    .bind(r.seq)
    .bind(r.kind)
    .bind(r.state_id)
    .bind(r.root_config)
    .bind(r.config_hash)
    .bind(r.context)
    .bind(r.plan_run_id)
    .fetch_optional(conn)
    .await
}

/// The runs of a deployment, by step and sequence.
pub async fn runs_of(conn: &mut PgConnection, deployment_id: Uuid) -> sqlx::Result<Vec<RunRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM step_runs WHERE deployment_id = $1 ORDER BY step_id, seq"
    )))
    .bind(deployment_id)
    .fetch_all(conn)
    .await
}

/// The runs of one step, by sequence.
pub async fn runs_of_step(conn: &mut PgConnection, step_id: Uuid) -> sqlx::Result<Vec<RunRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM step_runs WHERE step_id = $1 ORDER BY seq"
    )))
    .bind(step_id)
    .fetch_all(conn)
    .await
}

/// A run that is waited for, with its deployment's cancel request.
#[derive(Debug, Clone, FromRow)]
pub struct WaitedRun {
    #[sqlx(flatten)]
    pub run: RunRow,
    /// The deployment's cancel reason, once a cancel was asked for.
    pub cancel_reason: Option<String>,
}

/// The run and its deployment's cancel request, in one read.
pub async fn run_waited(conn: &mut PgConnection, run_id: Uuid) -> sqlx::Result<Option<WaitedRun>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS},
                (SELECT d.cancel_reason FROM deployments d
                  WHERE d.deployment_id = step_runs.deployment_id
                    AND d.cancel_requested_at IS NOT NULL) AS cancel_reason
           FROM step_runs WHERE run_id = $1"
    )))
    .bind(run_id)
    .fetch_optional(conn)
    .await
}

pub async fn run_get(conn: &mut PgConnection, run_id: Uuid) -> sqlx::Result<Option<RunRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM step_runs WHERE run_id = $1"
    )))
    .bind(run_id)
    .fetch_optional(conn)
    .await
}

/// What [`run_request`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// The run's request is to be sent now (it was `pending`).
    Now,
    /// It was requested before (nothing changed).
    Before,
    /// The deployment's cancel was asked for: nothing changed, nothing is to be sent.
    Cancelled,
    /// The step ended meanwhile: nothing changed.
    StepEnded,
}

/// Starts (or continues) the step with its current run — compare-and-set on the step
/// being pending or running and, while the run is still `pending`, its deployment having
/// no cancel request — and marks the run requested (compare-and-set on `pending`), in one
/// statement. A run another worker requested already is `Before` even after a cancel, so
/// its result is still awaited (and the cancel sent to it).
pub async fn run_request(
    conn: &mut PgConnection,
    step_id: Uuid,
    run_id: Uuid,
    tries: i32,
) -> sqlx::Result<Requested> {
    let (open, requested, cancelled): (bool, bool, bool) = sqlx::query_as(
        "WITH c AS (
             SELECT 1 FROM step_runs sr JOIN deployments d USING (deployment_id)
              WHERE sr.run_id = $2 AND sr.status = 'pending'
                AND d.cancel_requested_at IS NOT NULL
         ), s AS (
             UPDATE steps SET status = 'running', run_id = $2, tries = $3,
                              started_at = COALESCE(started_at, now())
              WHERE step_id = $1 AND status IN ('pending', 'running')
                AND NOT EXISTS (SELECT 1 FROM c)
             RETURNING step_id
         ), r AS (
             UPDATE step_runs SET status = 'requested', requested_at = now()
              WHERE run_id = $2 AND status = 'pending' AND EXISTS (SELECT 1 FROM s)
             RETURNING run_id
         )
         SELECT EXISTS (SELECT 1 FROM s), EXISTS (SELECT 1 FROM r), EXISTS (SELECT 1 FROM c)",
    )
    .bind(step_id)
    .bind(run_id)
    .bind(tries)
    .fetch_one(conn)
    .await?;
    Ok(match (open, requested, cancelled) {
        (_, _, true) => Requested::Cancelled,
        (false, _, _) => Requested::StepEnded,
        (true, true, _) => Requested::Now,
        (true, false, _) => Requested::Before,
    })
}

/// A run's result, as far as it is known.
#[derive(Debug, Clone, Default)]
pub struct RunResultRow {
    pub attempt: i32,
    pub outcome: String,
    pub error_class: String,
    pub message: String,
    pub summary: Option<Vec<u8>>,
    pub plan_sha256: String,
    pub base_generation: i64,
    pub final_generation: i64,
    /// The run's own start and end by the runner's clock (unset when no attempt ran, or
    /// when the result came from the coordinator).
    pub run_started_at: Option<DateTime<Utc>>,
    pub run_finished_at: Option<DateTime<Utc>>,
}

/// Writes the run's result if it has none yet (the first full result wins); false when the
/// run is not one of ours or already has a result.
pub async fn run_result(
    conn: &mut PgConnection,
    run_id: Uuid,
    r: &RunResultRow,
) -> sqlx::Result<bool> {
    Ok(sqlx::query(
        "UPDATE step_runs
            SET attempt = $2, outcome = $3, error_class = $4, message = $5, summary = $6,
                plan_sha256 = $7, base_generation = $8, final_generation = $9, result_at = now(),
                run_started_at = $10, run_finished_at = $11
          WHERE run_id = $1 AND outcome IS NULL",
    )
    .bind(run_id)
    .bind(r.attempt)
    .bind(&r.outcome)
    .bind(&r.error_class)
    .bind(&r.message)
    .bind(&r.summary)
    .bind(&r.plan_sha256)
    .bind(r.base_generation)
    .bind(r.final_generation)
    .bind(r.run_started_at)
    .bind(r.run_finished_at)
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// Records that a cancel was sent for the run; false when it already was.
pub async fn run_cancel_sent(conn: &mut PgConnection, run_id: Uuid) -> sqlx::Result<bool> {
    Ok(
        sqlx::query(
            "UPDATE step_runs SET cancel_sent = true WHERE run_id = $1 AND NOT cancel_sent",
        )
        .bind(run_id)
        .execute(conn)
        .await?
        .rows_affected()
            == 1,
    )
}

/// Binds these plan runs to the approval of `hash`.
pub async fn runs_approve(
    conn: &mut PgConnection,
    run_ids: &[Uuid],
    hash: &str,
) -> sqlx::Result<()> {
    sqlx::query("UPDATE step_runs SET approved_hash = $2 WHERE run_id = ANY($1)")
        .bind(run_ids)
        .bind(hash)
        .execute(conn)
        .await?;
    Ok(())
}

/// The runs of a deployment still in flight (requested, no result).
pub async fn runs_in_flight(
    conn: &mut PgConnection,
    deployment_id: Uuid,
) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar(
        "SELECT run_id FROM step_runs
          WHERE deployment_id = $1 AND status = 'requested' AND outcome IS NULL",
    )
    .bind(deployment_id)
    .fetch_all(conn)
    .await
}
