//! The HTTP backend's hot statements, one round trip each: what a GET reads, what a POST is
//! checked against, and a POST's commit. Every GET and POST of every tofu run goes through
//! these, so each is a single statement on primary-key or unique-index lookups (the bench's
//! scale mode prints their plans, see [`hot_statements`]).
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Arguments as _, FromRow, PgConnection, Row};
use uuid::Uuid;

use super::attempts::AttemptRow;
use super::generations::{GenerationRow, NewGeneration};
use super::states::StateRow;

/// The token's attempt, its run's kind, its state, the attempt holding the state's lock and
/// the state's current generation row (`None` when the state has none yet), from one
/// snapshot.
#[derive(Debug, Clone)]
pub struct ReadByToken {
    pub attempt: AttemptRow,
    pub run_kind: cairn_contract::RunKind,
    pub state: StateRow,
    pub lock_attempt_id: Option<Uuid>,
    pub current: Option<GenerationRow>,
}

const GENERATION_COLS: &str = "g.generation AS g_generation, g.object_key AS g_object_key,
    g.object_version AS g_object_version, g.ciphertext_sha256 AS g_ciphertext_sha256,
    g.plaintext_sha256 AS g_plaintext_sha256, g.size AS g_size, g.key_id AS g_key_id,
    g.wrapped_key AS g_wrapped_key, g.nonce AS g_nonce, g.tofu_serial AS g_tofu_serial,
    g.lineage AS g_lineage, g.run_id AS g_run_id, g.attempt AS g_attempt,
    g.is_final AS g_is_final, g.recovered_from AS g_recovered_from,
    g.created_at AS g_created_at";

/// The statement of [`read_by_token`] (also explained by the bench).
pub fn read_by_token_sql() -> String {
    format!(
        "SELECT a.*, s.*, r.kind AS run_kind, lk.attempt_id AS lock_attempt_id, {GENERATION_COLS}
         FROM (SELECT {attempt_cols} FROM attempts WHERE token_hash = $1) a
         JOIN (SELECT {state_cols} FROM states) s ON s.state_id = a.state_id
         JOIN runs r ON r.run_id = a.run_id
         LEFT JOIN locks lk ON lk.state_id = s.state_id
         LEFT JOIN generations g
           ON g.state_id = s.state_id AND g.generation = s.current_generation",
        attempt_cols = super::attempts::COLS,
        state_cols = super::states::COLS,
    )
}

impl<'r> FromRow<'r, PgRow> for ReadByToken {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        let attempt = AttemptRow::from_row(row)?;
        let state = StateRow::from_row(row)?;
        let current = match row.try_get::<Option<i64>, _>("g_generation")? {
            None => None,
            Some(generation) => Some(GenerationRow {
                state_id: state.state_id,
                generation,
                object_key: row.try_get("g_object_key")?,
                object_version: row.try_get("g_object_version")?,
                ciphertext_sha256: row.try_get("g_ciphertext_sha256")?,
                plaintext_sha256: row.try_get("g_plaintext_sha256")?,
                size: row.try_get("g_size")?,
                key_id: row.try_get("g_key_id")?,
                wrapped_key: row.try_get("g_wrapped_key")?,
                nonce: row.try_get("g_nonce")?,
                tofu_serial: row.try_get("g_tofu_serial")?,
                lineage: row.try_get("g_lineage")?,
                run_id: row.try_get("g_run_id")?,
                attempt: row.try_get("g_attempt")?,
                is_final: row.try_get("g_is_final")?,
                recovered_from: row.try_get("g_recovered_from")?,
                created_at: row.try_get("g_created_at")?,
            }),
        };
        Ok(Self {
            attempt,
            run_kind: row.try_get::<String, _>("run_kind")?.parse().map_err(|e| {
                sqlx::Error::ColumnDecode {
                    index: "run_kind".to_owned(),
                    source: Box::new(e),
                }
            })?,
            state,
            lock_attempt_id: row.try_get("lock_attempt_id")?,
            current,
        })
    }
}

/// A GET's one read: `None` when no attempt has this token hash.
pub async fn read_by_token(
    conn: &mut PgConnection,
    token_hash: &str,
) -> sqlx::Result<Option<ReadByToken>> {
    sqlx::query_as(sqlx::AssertSqlSafe(read_by_token_sql()))
        .bind(token_hash)
        .fetch_optional(conn)
        .await
}

/// Everything a state write is checked against, read by one statement (so from one
/// snapshot): the attempt, its state, the holder of the state's lock and the header of the
/// current generation (`None` when absent).
#[derive(Debug, Clone, FromRow)]
pub struct WriteChecks {
    #[sqlx(flatten)]
    pub attempt: AttemptRow,
    #[sqlx(flatten)]
    pub state: StateRow,
    pub lock_attempt_id: Option<Uuid>,
    pub lock_id: Option<String>,
    pub current_serial: Option<i64>,
    pub current_lineage: Option<String>,
    pub current_plaintext_sha256: Option<String>,
}

/// The statement of [`write_checks_by_token`]. Both row sets carry `state_id` (equal by the
/// join).
pub fn write_checks_by_token_sql() -> String {
    format!(
        "SELECT a.*, s.*, lk.lock_attempt_id, lk.lock_id,
            cur.current_serial, cur.current_lineage, cur.current_plaintext_sha256
         FROM (SELECT {attempt_cols} FROM attempts WHERE token_hash = $1) a
         JOIN (SELECT {state_cols} FROM states) s ON s.state_id = a.state_id
         LEFT JOIN LATERAL (
            SELECT l.attempt_id AS lock_attempt_id, l.lock_id FROM locks l
            WHERE l.state_id = s.state_id) lk ON true
         LEFT JOIN LATERAL (
            SELECT g.tofu_serial AS current_serial, g.lineage AS current_lineage,
                   g.plaintext_sha256 AS current_plaintext_sha256
            FROM generations g
            WHERE g.state_id = s.state_id AND g.generation = s.current_generation
         ) cur ON true",
        attempt_cols = super::attempts::COLS,
        state_cols = super::states::COLS,
    )
}

/// A POST's checks: `None` when no attempt has this token hash.
pub async fn write_checks_by_token(
    conn: &mut PgConnection,
    token_hash: &str,
) -> sqlx::Result<Option<WriteChecks>> {
    sqlx::query_as(sqlx::AssertSqlSafe(write_checks_by_token_sql()))
        .bind(token_hash)
        .fetch_optional(conn)
        .await
}

/// What the commit of a run's write found; the write happened only when `advanced`.
#[derive(Debug, Clone, Copy, FromRow, PartialEq, Eq)]
pub struct CommitOutcome {
    /// The attempt exists and is live (not revoked, finished or expired), row-locked.
    pub attempt_live: bool,
    /// ... and holds the state's lock.
    pub lock_held: bool,
    /// ... and the pending row was still there (not swept), row-locked.
    pub pending_found: bool,
    /// ... and the state was healthy at `generation - 1` and now is at `generation`: the
    /// generation row, the attempt's marks and the event were written, the pending row
    /// consumed.
    pub advanced: bool,
}

/// The commit of a run's write, as one statement (so one round trip and one implicit
/// transaction): row-lock the live attempt (admission of a newer attempt serialises with
/// this), check it holds the lock, row-lock the pending row (the sweeper skips it, or has
/// taken it first and then nothing is written), compare-and-set the state's pointer and,
/// only if that moved it, insert the generation, consume the pending row, move the
/// attempt's marks and append the outbox event. Every step after a failed one is skipped,
/// so a refused commit changes nothing.
pub const COMMIT_RUN_WRITE_SQL: &str = "
WITH a AS (
    SELECT attempt_id FROM attempts
    WHERE attempt_id = $1 AND revoked_at IS NULL AND finished_at IS NULL
      AND lease_expires_at > now()
    FOR UPDATE),
held AS (
    SELECT 1 FROM locks l JOIN a ON l.attempt_id = a.attempt_id WHERE l.state_id = $2),
p AS (
    SELECT pending_id FROM pending_objects
    WHERE pending_id = $3 AND EXISTS (SELECT 1 FROM held)
    FOR UPDATE),
s AS (
    UPDATE states SET current_generation = $4
    WHERE state_id = $2 AND current_generation = $4 - 1 AND status = 'healthy'
      AND EXISTS (SELECT 1 FROM p)
    RETURNING state_id),
consumed AS (
    DELETE FROM pending_objects WHERE pending_id = $3 AND EXISTS (SELECT 1 FROM s)
    RETURNING 1),
g AS (
    INSERT INTO generations (state_id, generation, object_key, object_version,
        ciphertext_sha256, plaintext_sha256, size, key_id, wrapped_key, nonce, tofu_serial,
        lineage, run_id, attempt, is_final, recovered_from)
    SELECT s.state_id, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, false, NULL
    FROM s
    RETURNING 1),
marks AS (
    UPDATE attempts SET last_seen_generation = GREATEST(last_seen_generation, $4),
        last_written_generation = GREATEST(last_written_generation, $4)
    WHERE attempt_id = $1 AND EXISTS (SELECT 1 FROM s)
    RETURNING 1),
event AS (
    INSERT INTO outbox (event_id, payload) SELECT $17, $18 FROM s
    RETURNING 1)
SELECT EXISTS (SELECT 1 FROM a) AS attempt_live,
       EXISTS (SELECT 1 FROM held) AS lock_held,
       EXISTS (SELECT 1 FROM p) AS pending_found,
       EXISTS (SELECT 1 FROM s) AS advanced";

/// The parameters of [`COMMIT_RUN_WRITE_SQL`] for `attempt_id`'s write of `g` (its
/// `run_id`/`attempt` are the attempt's), with the outbox row `event` (id and encoded
/// payload). The commit and its `EXPLAIN` bind exactly these.
pub fn commit_run_write_args(
    attempt_id: Uuid,
    pending_id: Uuid,
    g: &NewGeneration,
    event: (Uuid, Vec<u8>),
) -> sqlx::Result<PgArguments> {
    let mut args = PgArguments::default();
    let add = |r: Result<(), sqlx::error::BoxDynError>| r.map_err(sqlx::Error::Encode);
    add(args.add(attempt_id))?;
    add(args.add(g.state_id))?;
    add(args.add(pending_id))?;
    add(args.add(g.generation))?;
    add(args.add(g.object_key.clone()))?;
    add(args.add(g.object_version.clone()))?;
    add(args.add(g.ciphertext_sha256.clone()))?;
    add(args.add(g.plaintext_sha256.clone()))?;
    add(args.add(g.size))?;
    add(args.add(g.key_id.clone()))?;
    add(args.add(g.wrapped_key.clone()))?;
    add(args.add(g.nonce.clone()))?;
    add(args.add(g.tofu_serial))?;
    add(args.add(g.lineage.clone()))?;
    add(args.add(g.run_id))?;
    add(args.add(g.attempt))?;
    add(args.add(event.0))?;
    add(args.add(event.1))?;
    Ok(args)
}

/// Runs [`COMMIT_RUN_WRITE_SQL`] with [`commit_run_write_args`].
pub async fn commit_run_write(
    conn: &mut PgConnection,
    attempt_id: Uuid,
    pending_id: Uuid,
    g: &NewGeneration,
    event: (Uuid, Vec<u8>),
) -> sqlx::Result<CommitOutcome> {
    let args = commit_run_write_args(attempt_id, pending_id, g, event)?;
    sqlx::query_as_with(COMMIT_RUN_WRITE_SQL, args)
        .fetch_one(conn)
        .await
}

/// The hot statements by name, in the order a GET and a POST run them, for `EXPLAIN`.
pub fn hot_statements() -> Vec<(&'static str, String)> {
    vec![
        (
            "GET: attempt, state and current generation by token",
            read_by_token_sql(),
        ),
        ("POST: write checks by token", write_checks_by_token_sql()),
        (
            "POST: pending row",
            super::pending::PENDING_INSERT_SQL.to_owned(),
        ),
        ("POST: commit", COMMIT_RUN_WRITE_SQL.to_owned()),
    ]
}
