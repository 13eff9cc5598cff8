//! The `deployment_events` table (filled at commit by the triggers of migrations 0010 and
//! 0016, and by the log ingestion, see [`super::logs`]) and the PostgreSQL channel its
//! inserts notify.
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgListener, PgPoolOptions};
use sqlx::{FromRow, PgConnection, PgPool};
use uuid::Uuid;

/// The channel every insert into `deployment_events` notifies (payload: the deployment id).
pub const EVENTS_CHANNEL: &str = "cairn_deployment_events";

/// One event with what its kind needs: the step's view (joined with the step's fixed
/// columns) or the log line (joined with its stored text, `None` once it was dropped).
#[derive(Debug, Clone, FromRow)]
pub struct EventRow {
    pub position: i64,
    pub at: DateTime<Utc>,
    pub kind: String,
    pub status: Option<String>,
    pub step_id: Option<Uuid>,
    pub step_position: Option<i32>,
    pub step_kind: Option<String>,
    pub resource: Option<String>,
    pub depends_on: Option<Vec<String>>,
    pub step_status: Option<String>,
    pub reason: Option<String>,
    pub run_id: Option<Uuid>,
    pub tries: Option<i32>,
    pub error_class: Option<String>,
    pub plan_add: Option<i32>,
    pub plan_change: Option<i32>,
    pub plan_destroy: Option<i32>,
    pub plan_replaced: Option<Vec<String>>,
    pub plan_risk: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub attempt: Option<i32>,
    pub seq: Option<i64>,
    pub stream: Option<String>,
    pub text: Option<String>,
}

/// Up to `limit` events of a deployment after position `after`, in order.
pub async fn events_after(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    after: i64,
    limit: i64,
) -> sqlx::Result<Vec<EventRow>> {
    sqlx::query_as(
        "SELECT e.position, e.at, e.kind, e.status, e.step_id, s.position AS step_position,
                s.kind AS step_kind, s.resource, s.depends_on, e.step_status, e.reason,
                e.run_id, e.tries, e.error_class, e.plan_add, e.plan_change, e.plan_destroy,
                e.plan_replaced, e.plan_risk, e.started_at, e.finished_at, e.attempt, e.seq,
                l.stream, l.text
           FROM deployment_events e
           LEFT JOIN steps s ON s.step_id = e.step_id
           LEFT JOIN step_logs l
                  ON e.kind = 'log' AND l.run_id = e.run_id AND l.attempt = e.attempt
                 AND l.seq = e.seq
          WHERE e.deployment_id = $1 AND e.position > $2
          ORDER BY e.position
          LIMIT $3",
    )
    .bind(deployment_id)
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// The deployment's status (`None` once it is gone).
pub async fn deployment_status(
    conn: &mut PgConnection,
    deployment_id: Uuid,
) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar("SELECT status FROM deployments WHERE deployment_id = $1")
        .bind(deployment_id)
        .fetch_optional(conn)
        .await
}

/// Takes the deployment's next `k` positions (in the caller's transaction, which holds the
/// deployment's row lock until it ends); returns the last of them.
pub async fn events_reserve(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    k: i64,
) -> sqlx::Result<i64> {
    sqlx::query_scalar::<_, Option<i64>>("SELECT deployment_events_reserve($1, $2)")
        .bind(deployment_id)
        .bind(k)
        .fetch_one(conn)
        .await?
        .ok_or(sqlx::Error::RowNotFound)
}

/// Log lines' events of one deployment at `positions` (one statement).
pub async fn event_logs_insert(
    conn: &mut PgConnection,
    deployment_id: Uuid,
    lines: &[(i64, &super::logs::LineKey)],
) -> sqlx::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let positions: Vec<i64> = lines.iter().map(|(p, _)| *p).collect();
    let steps: Vec<Uuid> = lines.iter().map(|(_, l)| l.step_id).collect();
    let runs: Vec<Uuid> = lines.iter().map(|(_, l)| l.run_id).collect();
    let attempts: Vec<i32> = lines.iter().map(|(_, l)| l.attempt).collect();
    let seqs: Vec<i64> = lines.iter().map(|(_, l)| l.seq).collect();
    sqlx::query(
        "INSERT INTO deployment_events (deployment_id, position, kind, step_id, run_id, attempt, seq)
         SELECT $1, p, 'log', s, r, a, q
           FROM unnest($2::bigint[], $3::uuid[], $4::uuid[], $5::int[], $6::bigint[])
             AS t(p, s, r, a, q)",
    )
    .bind(deployment_id)
    .bind(positions)
    .bind(steps)
    .bind(runs)
    .bind(attempts)
    .bind(seqs)
    .execute(conn)
    .await?;
    Ok(())
}

/// The channel a watch hub notifies itself on to learn that its listening connection still
/// delivers ([`heartbeat`]).
pub const HEARTBEAT_CHANNEL: &str = "cairn_deployment_events_heartbeat";

/// A listener on [`EVENTS_CHANNEL`] and [`HEARTBEAT_CHANNEL`], on a connection of a pool of
/// its own (same connect options as `pool`): a listener given up on a connection gone
/// silent keeps that connection until its `UNLISTEN` fails (the kernel's timeout), and must
/// not hold a place in the service's pool meanwhile.
pub async fn events_listen(pool: &PgPool) -> sqlx::Result<PgListener> {
    let own = PgPoolOptions::new()
        .max_connections(1)
        .connect_with((*pool.connect_options()).clone())
        .await?;
    let mut listener = PgListener::connect_with(&own).await?;
    listener
        .listen_all([EVENTS_CHANNEL, HEARTBEAT_CHANNEL])
        .await?;
    Ok(listener)
}

/// Notifies [`HEARTBEAT_CHANNEL`] (every listener on it, this process's among them).
pub async fn heartbeat(conn: &mut PgConnection) -> sqlx::Result<()> {
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(HEARTBEAT_CHANNEL)
        .execute(conn)
        .await?;
    Ok(())
}
