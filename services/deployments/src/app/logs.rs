//! Log lines of the steps' runs: ingestion (one line per transaction: stored for its step,
//! bounded, and an event of the deployment) and `GetLogs`.
//!
//! The bound (`CAIRN_STEP_LOG_LINES` = N): of a step's received lines the first ceil(N/2)
//! and the last floor(N/2) are kept; a line in between is stored while it is among the last
//! ones and dropped when newer lines push it out. Every received line stays an event of the
//! deployment (a small row, which is also what makes a redelivered line a duplicate), so
//! positions stay gapless: `WatchDeployment` shows a dropped line's event as a `runner`
//! line saying so.
use cairn_auth::{Principal, Role};
use cairn_contract::{DeploymentId, RunId, TenantId};
use cairn_service::access::require;
use uuid::Uuid;

use super::App;
use crate::error::{Error, Result};
use crate::store::deployments as deployments_store;
use crate::store::events;
use crate::store::logs::{self as store, LineKey, LogRow};
use crate::store::steps;

/// A line as the runner publishes it (already redacted).
#[derive(Debug, Clone)]
pub struct IncomingLine {
    pub run_id: RunId,
    pub attempt: u32,
    pub seq: u64,
    pub stream: String,
    pub text: String,
}

/// What became of an incoming line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingested {
    /// Stored (or counted and dropped by the bound) at this position of its deployment.
    Event { position: i64, stored: bool },
    /// Received before: nothing changed.
    Duplicate,
    /// No step has this run: dropped.
    UnknownRun,
}

/// How many of a step's lines are kept: the first `head` and the last `tail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBound {
    pub head: i64,
    pub tail: i64,
}

impl LogBound {
    /// ceil(N/2) first lines and floor(N/2) last ones.
    pub fn new(lines: usize) -> Self {
        let n = i64::try_from(lines).unwrap_or(i64::MAX);
        LogBound {
            head: n - n / 2,
            tail: n / 2,
        }
    }

    /// For the `n`-th received line: whether it is stored, and the places of the tail it
    /// pushes out (`from..=to`; `None` when none).
    pub fn place(self, n: i64) -> (bool, Option<(i64, i64)>) {
        if n <= self.head {
            return (true, None);
        }
        if self.tail == 0 {
            return (false, None);
        }
        let to = n - self.tail;
        (true, (to > self.head).then_some((self.head + 1, to)))
    }
}

/// The text a watcher sees for a line the bound dropped.
pub const DROPPED_TEXT: &str =
    "(line dropped: a step keeps its first and last CAIRN_STEP_LOG_LINES/2 lines)";

/// A line's attempt and sequence number as stored.
fn key_parts(line: &IncomingLine) -> Result<(i32, i64)> {
    let attempt = i32::try_from(line.attempt)
        .map_err(|_| Error::invalid_argument(format!("attempt {} is too large", line.attempt)))?;
    let seq = i64::try_from(line.seq)
        .map_err(|_| Error::invalid_argument(format!("seq {} is too large", line.seq)))?;
    Ok((attempt, seq))
}

impl App {
    /// Stores one log line for the step whose run it is, as an event of its deployment, in
    /// one transaction; idempotent on (run, attempt, seq).
    #[tracing::instrument(skip_all, fields(run_id = %line.run_id, attempt = line.attempt, seq = line.seq))]
    pub async fn log_line_ingest(&self, line: &IncomingLine, bound: LogBound) -> Result<Ingested> {
        let (attempt, seq) = key_parts(line)?;
        let run_id = line.run_id.uuid();
        let outcome = cairn_db::transaction!(&self.pool, |conn| {
            let Some((step_id, deployment_id)) = store::step_of_run(conn, run_id).await? else {
                return Ok(Ingested::UnknownRun);
            };
            // The writers of this deployment's events queue here, so the check below sees
            // a concurrent copy of this line once it committed.
            if events::event_counter_lock(conn, deployment_id)
                .await?
                .is_none()
            {
                return Ok(Ingested::UnknownRun);
            }
            if store::line_seen(conn, run_id, attempt, seq).await? {
                return Ok(Ingested::Duplicate);
            }
            let key = LineKey {
                step_id,
                run_id,
                attempt,
                seq,
            };
            let position = events::event_next(conn, deployment_id).await?;
            events::event_log_insert(conn, deployment_id, position, &key).await?;
            let n = store::line_count_next(conn, step_id).await?;
            let (stored, push_out) = bound.place(n);
            if stored {
                store::line_insert(conn, &key, n, &line.stream, &line.text).await?;
            }
            if let Some((from, to)) = push_out {
                store::lines_drop(conn, step_id, from, to).await?;
            }
            Ok::<_, Error>(Ingested::Event { position, stored })
        })?;
        Ok(outcome)
    }

    /// A step's stored lines in order, and whether some were dropped by the bound.
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, deployment_id = %deployment_id, step_id = %step_id))]
    pub async fn get_logs(
        &self,
        who: &Principal,
        tenant: TenantId,
        deployment_id: DeploymentId,
        step_id: Uuid,
    ) -> Result<(Vec<LogRow>, bool)> {
        let what = format!("deployment {deployment_id}");
        require(who, tenant, Role::Viewer, &what)?;
        let mut conn = self.pool.acquire().await?;
        deployments_store::deployment_get(&mut conn, tenant.uuid(), deployment_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(what))?;
        let step_known = steps::steps_of(&mut conn, deployment_id.uuid())
            .await?
            .iter()
            .any(|s| s.step_id == step_id);
        if !step_known {
            return Err(Error::not_found(format!(
                "step {step_id} of deployment {deployment_id}"
            )));
        }
        let lines = store::lines_of(&mut conn, step_id).await?;
        let received = store::lines_received(&mut conn, step_id).await?;
        let truncated = received > i64::try_from(lines.len()).unwrap_or(i64::MAX);
        Ok((lines, truncated))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_keeps_the_first_and_the_last_lines() {
        let b = LogBound::new(4);
        assert_eq!(b, LogBound { head: 2, tail: 2 });
        assert_eq!(b.place(1), (true, None));
        assert_eq!(b.place(2), (true, None));
        // Lines 3 and 4 fill the tail; 5 pushes 3 out, 6 pushes 4 out (and 3 again).
        assert_eq!(b.place(3), (true, None));
        assert_eq!(b.place(4), (true, None));
        assert_eq!(b.place(5), (true, Some((3, 3))));
        assert_eq!(b.place(6), (true, Some((3, 4))));

        let odd = LogBound::new(5);
        assert_eq!(odd, LogBound { head: 3, tail: 2 });
        let one = LogBound::new(1);
        assert_eq!(one.place(1), (true, None));
        assert_eq!(one.place(2), (false, None));
        let none = LogBound::new(0);
        assert_eq!(none.place(1), (false, None));
    }
}
