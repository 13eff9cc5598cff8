//! Log lines of the steps' runs: ingestion (the lines that arrive together in one
//! transaction: each stored for its step, bounded, and an event of its deployment) and
//! `GetLogs`.
//!
//! The bound (`CAIRN_STEP_LOG_LINES` = N): of a step's received lines the first ceil(N/2)
//! and the last floor(N/2) are kept; a line in between is stored while it is among the last
//! ones and dropped when newer lines push it out. Every received line stays an event of the
//! deployment (a small row, which is also what makes a redelivered line a duplicate), so
//! positions stay gapless: `WatchDeployment` shows a dropped line's event as a `runner`
//! line saying so.
use std::collections::{HashMap, HashSet};

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
    /// Stores log lines (a batch, in arrival order) for the steps whose runs they are, each
    /// as an event of its deployment, in one transaction; idempotent on (run, attempt,
    /// seq), also within the batch. Lines that arrive together share a handful of
    /// statements. The writers of one step's lines queue on the step's line counter, taken
    /// first (in one order); each deployment's event counter, the lock every change of the
    /// deployment takes at its commit, is taken last (in one order), so it is held only
    /// for the events' own statements and the commit.
    ///
    /// Each line's answer is in the input's order; a line whose numbers do not fit is
    /// INVALID_ARGUMENT (the others are stored all the same).
    #[tracing::instrument(skip_all, fields(lines = lines.len()))]
    pub async fn log_lines_ingest(
        &self,
        lines: &[IncomingLine],
        bound: LogBound,
    ) -> Result<Vec<Result<Ingested>>> {
        let keys: Vec<Result<(Uuid, i32, i64)>> = lines
            .iter()
            .map(|l| key_parts(l).map(|(a, s)| (l.run_id.uuid(), a, s)))
            .collect();
        let outcome = cairn_db::transaction!(&self.pool, |conn| {
            let mut answers: Vec<Option<Ingested>> = vec![None; lines.len()];
            let mut runs: Vec<Uuid> = keys.iter().flatten().map(|k| k.0).collect();
            runs.sort_unstable();
            runs.dedup();
            let steps: HashMap<Uuid, (Uuid, Uuid)> = store::steps_of_runs(conn, &runs)
                .await?
                .into_iter()
                .map(|(run, step, deployment)| (run, (step, deployment)))
                .collect();
            let mut step_ids: Vec<Uuid> = steps.values().map(|(s, _)| *s).collect();
            step_ids.sort_unstable();
            step_ids.dedup();
            // The writers of these steps' lines queue here, so the check below sees a
            // concurrent copy of a line once it committed (a run's lines are its step's).
            let live: HashSet<Uuid> = store::line_counts_lock(conn, &step_ids)
                .await?
                .into_iter()
                .collect();
            let known: Vec<(Uuid, i32, i64)> = keys
                .iter()
                .flatten()
                .filter(|k| steps.get(&k.0).is_some_and(|(s, _)| live.contains(s)))
                .copied()
                .collect();
            let mut seen: HashSet<(Uuid, i32, i64)> =
                store::lines_seen(conn, &known).await?.into_iter().collect();
            // The new lines in arrival order: (input index, key, deployment).
            let mut fresh: Vec<(usize, LineKey, Uuid)> = Vec::new();
            for (i, key) in keys.iter().enumerate() {
                let Ok(key) = key else { continue };
                let Some(&(step_id, deployment_id)) = steps.get(&key.0) else {
                    answers[i] = Some(Ingested::UnknownRun);
                    continue;
                };
                if !live.contains(&step_id) {
                    answers[i] = Some(Ingested::UnknownRun);
                } else if !seen.insert(*key) {
                    answers[i] = Some(Ingested::Duplicate);
                } else {
                    let (run_id, attempt, seq) = *key;
                    let line = LineKey {
                        step_id,
                        run_id,
                        attempt,
                        seq,
                    };
                    fresh.push((i, line, deployment_id));
                }
            }
            // Places, step by step: stored within the bound, older tail lines pushed out.
            let mut stored = vec![false; lines.len()];
            let mut stored_lines = Vec::new();
            let mut drops = Vec::new();
            for step in &step_ids {
                let mine: Vec<&(usize, LineKey, Uuid)> =
                    fresh.iter().filter(|f| f.1.step_id == *step).collect();
                if mine.is_empty() {
                    continue;
                }
                let k = i64::try_from(mine.len()).unwrap_or(i64::MAX);
                let last = store::line_count_add(conn, *step, k).await?;
                let mut dropped: Option<(i64, i64)> = None;
                for (f, n) in mine.iter().zip(last - k + 1..) {
                    let (keep, push_out) = bound.place(n);
                    if keep {
                        let line = &lines[f.0];
                        stored_lines.push(store::NewLine {
                            key: f.1.clone(),
                            n,
                            stream: &line.stream,
                            text: &line.text,
                        });
                    }
                    stored[f.0] = keep;
                    if let Some((from, to)) = push_out {
                        dropped =
                            Some(dropped.map_or((from, to), |(a, b)| (a.min(from), b.max(to))));
                    }
                }
                if let Some(range) = dropped {
                    drops.push((*step, range));
                }
            }
            store::lines_insert(conn, &stored_lines).await?;
            for (step, (from, to)) in drops {
                store::lines_drop(conn, step, from, to).await?;
            }
            // Positions last, deployment by deployment (in one order): the next k, in
            // arrival order.
            let mut deployments: Vec<Uuid> = fresh.iter().map(|f| f.2).collect();
            deployments.sort_unstable();
            deployments.dedup();
            for d in deployments {
                let mine: Vec<&(usize, LineKey, Uuid)> =
                    fresh.iter().filter(|f| f.2 == d).collect();
                let k = i64::try_from(mine.len()).unwrap_or(i64::MAX);
                let last = events::events_reserve(conn, d, k).await?;
                let placed: Vec<(i64, &LineKey)> = mine
                    .iter()
                    .zip(last - k + 1..)
                    .map(|(f, p)| {
                        answers[f.0] = Some(Ingested::Event {
                            position: p,
                            stored: stored[f.0],
                        });
                        (p, &f.1)
                    })
                    .collect();
                events::event_logs_insert(conn, d, &placed).await?;
            }
            Ok::<_, Error>(answers)
        })?;
        Ok(keys
            .into_iter()
            .zip(outcome)
            .map(|(key, answer)| match (key, answer) {
                (Err(e), _) => Err(e),
                (Ok(_), Some(answer)) => Ok(answer),
                (Ok(_), None) => Err(Error::internal("a log line was left unanswered")),
            })
            .collect())
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
