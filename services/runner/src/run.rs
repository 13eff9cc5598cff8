//! One run from admission to finish: `AdmitRun` and `GetRunConfig`, `TakePlan` for an apply of
//! a saved plan, the pipeline with the lease renewed while it runs, `PutPlan` after a plan
//! (with the masked plan JSON; the stored plan's sha256 checked), `Quarantine` of an
//! `errored.tfstate`, and `FinishRun`, whose refusal reason reclassifies a failure.
//!
//! The lease is watched, not only renewed: when it cannot be renewed before it expires
//! (renewal refused, or failing until the lease has less than a margin left), tofu is stopped
//! the graceful way (SIGINT, the grace period, SIGKILL) before the lease ends, and the run
//! finishes as lease lost ([`ErrorClass::LeaseLost`]): the coordinator admits a new attempt
//! only once the lease has expired, and by then this one writes nothing any more. An
//! `errored.tfstate` goes to the spool before it is first sent to the quarantine and leaves
//! it only once the coordinator confirmed it.

use std::time::{Duration, SystemTime};

use cairn_telemetry::Chain;
use futures::FutureExt;
use futures::future::{BoxFuture, Fuse, FusedFuture};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::coordinator::{Admission, CoordinatorClient, CoordinatorError};
use crate::executor::RunId;
use crate::pipeline::{ErrorClass, Pipeline, PipelineError, RunKind, RunOutcome, RunResult};
use crate::spool::{Spool, SpoolEntry};

/// How long one coordinator call of a retried step may take before it is abandoned.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `Quarantine` is retried within a run before the file is left to the spool.
const QUARANTINE_RETRY_FOR: Duration = Duration::from_secs(120);
/// How long the finish of a run whose lease was lost is retried.
const LOST_FINISH_RETRY_FOR: Duration = Duration::from_secs(120);
/// Time for a killed container or process to be gone, on top of the grace period.
const STOP_SLACK: Duration = Duration::from_secs(1);

/// How a running attempt's lease is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeasePolicy {
    /// The lease granted at admission (and by each renewal).
    pub lease: Duration,
    /// Renew this often while renewals succeed.
    pub renew_every: Duration,
    /// After a failed renewal, try again this soon.
    pub retry_every: Duration,
    /// Stop tofu when the lease could not be renewed and has this little left: the grace
    /// tofu gets after SIGINT and a little more, so that it is gone before the lease ends.
    pub margin: Duration,
}

impl LeasePolicy {
    /// The policy for a `lease` with tofu's `grace`: renew every third of the lease, retry a
    /// failed renewal soon, stop with the grace period (plus a second) left, but never later
    /// than half-way through a lease that is too short for that.
    pub fn new(lease: Duration, grace: Duration) -> Self {
        let renew_every = (lease / 3).max(Duration::from_millis(200));
        Self {
            lease,
            renew_every,
            retry_every: (renew_every / 4)
                .clamp(Duration::from_millis(100), Duration::from_secs(2)),
            margin: (grace + STOP_SLACK).min(lease / 2),
        }
    }
}

/// When to renew and when to give the lease up, from the renewals seen so far.
#[derive(Debug, Clone)]
pub struct LeaseWatch {
    policy: LeasePolicy,
    /// When the lease ends at the earliest, by this runner's monotonic clock.
    expires: Instant,
    next_renewal: Instant,
}

impl LeaseWatch {
    /// A lease granted at `granted_at` (when the admission was sent) for `policy.lease`.
    pub fn new(policy: LeasePolicy, granted_at: Instant) -> Self {
        Self {
            policy,
            expires: granted_at + policy.lease,
            next_renewal: granted_at + policy.renew_every,
        }
    }

    /// When the next renewal is due.
    pub fn next_renewal(&self) -> Instant {
        self.next_renewal
    }

    /// When tofu must be stopped unless the lease is renewed before.
    pub fn stop_at(&self) -> Instant {
        self.expires
            .checked_sub(self.policy.margin)
            .unwrap_or(self.expires)
    }

    /// A renewal sent at `sent_at` succeeded with `remaining` left at `answered_at`. The
    /// coordinator extended the lease after `sent_at`, so `sent_at + lease` is a lower bound
    /// that does not depend on the clocks agreeing; the answer's own expiry can only shorten
    /// it.
    pub fn renewed(&mut self, sent_at: Instant, answered_at: Instant, remaining: Duration) {
        let by_answer = answered_at + remaining;
        let expires = (sent_at + self.policy.lease).min(by_answer);
        self.expires = self.expires.max(expires);
        self.next_renewal = answered_at + self.policy.renew_every;
    }

    /// A renewal failed at `now` without a refusal: try again soon.
    pub fn failed(&mut self, now: Instant) {
        self.next_renewal = now + self.policy.retry_every;
    }

    /// How long a renewal sent at `now` may wait for its answer: half the time left before
    /// the stop (at least the retry interval), so that a call that hangs (a coordinator stuck
    /// behind a lock, a connection the keepalive has not closed yet) leaves time for another
    /// try instead of holding the next one until the stop.
    pub fn renewal_deadline(&self, now: Instant) -> Duration {
        (self.stop_at().saturating_duration_since(now) / 2).max(self.policy.retry_every)
    }
}

/// What a run needs besides the coordinator and the pipeline.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// How long tofu gets after SIGINT before SIGKILL (`CAIRN_TOFU_GRACE`): the lease is
    /// given up with at least this much left.
    pub grace: Duration,
    /// Where an `errored.tfstate` waits for the coordinator's confirmation (none: it is
    /// only kept in memory while the run retries `Quarantine`).
    pub spool: Option<Spool>,
    /// Cancelled when the runner stops: retrying `Quarantine` ends (the spool keeps the file).
    pub stopping: CancellationToken,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(30),
            spool: None,
            stopping: CancellationToken::new(),
        }
    }
}

/// What a finished run reports.
#[derive(Debug)]
pub struct RunReport {
    /// The attempt that ran.
    pub attempt: u32,
    /// The state generation the attempt started from (`AdmitRun`).
    pub base_generation: u64,
    /// When the attempt was admitted (by this runner's clock).
    pub started_at: SystemTime,
    /// What the pipeline produced, reclassified with the coordinator's refusal reason.
    pub result: RunResult,
    /// The generation current after `FinishRun`.
    pub final_generation: u64,
    /// The run applied a saved plan it took from the coordinator.
    pub took_saved_plan: bool,
    /// The coordinator's id of the saved plan (a successful plan run).
    pub plan_id: Option<String>,
    /// sha256 (lowercase hex) of the saved plan (a successful plan run), as the coordinator
    /// stored it and checked against the plan file's bytes.
    pub plan_sha256: Option<String>,
    /// The coordinator's id of the quarantined `errored.tfstate`, if tofu left one.
    pub quarantine_id: Option<String>,
}

/// Why a run could not be driven to its finish.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A coordinator call failed.
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    /// The pipeline could not run.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// `FinishRun` was refused because a newer attempt of the run superseded this one
    /// ([`RefusalReason::Superseded`](cairn_contract::RefusalReason::Superseded)): the newer
    /// attempt reports the run, so this one's result must not be published (the first
    /// result of a run wins downstream). Final: neither retried nor transient.
    #[error("attempt {attempt} was superseded by a newer attempt of the run: {source}")]
    Superseded {
        attempt: u32,
        #[source]
        source: CoordinatorError,
    },
}

impl RunError {
    /// The class of the failed run: transient (the executor or a coordinator call failed),
    /// except where the coordinator error says otherwise (a plan stored under another
    /// sha256 is an internal error: no class, never retried).
    pub fn class(&self) -> Option<ErrorClass> {
        match self {
            Self::Coordinator(e) => e.run_class(),
            Self::Pipeline(_) => Some(ErrorClass::Transient),
            Self::Superseded { .. } => None,
        }
    }

    /// The error of a refused `FinishRun` of `attempt`: [`RunError::Superseded`] when the
    /// coordinator says a newer attempt superseded it.
    fn of_finish(attempt: u32, e: CoordinatorError) -> Self {
        if e.refusal() == Some(cairn_contract::RefusalReason::Superseded) {
            Self::Superseded { attempt, source: e }
        } else {
            Self::Coordinator(e)
        }
    }
}

/// Admits `run_id`, runs it and finishes it.
#[tracing::instrument(skip_all, fields(run_id = run_id))]
pub async fn execute_run(
    client: &CoordinatorClient,
    pipeline: &Pipeline<'_>,
    run_id: &str,
    options: &RunOptions,
) -> Result<RunReport, RunError> {
    let admission = client.admit(run_id).await?;
    execute_admitted(client, pipeline, &admission, options).await
}

/// Runs an admitted run and finishes it. Only the first attempt of an apply takes its saved
/// plan: a later attempt plans afresh (its predecessor may have applied the plan already),
/// and an interrupted one runs nothing, so neither consumes the plan. A lost lease stops
/// tofu and finishes the run as [`ErrorClass::LeaseLost`]; its report is returned even when
/// the coordinator refuses that finish (a newer attempt was admitted meanwhile).
#[tracing::instrument(
    name = "run",
    skip_all,
    fields(
        run_id = %admission.run.run_id,
        attempt = admission.run.attempt,
        kind = %admission.config.kind,
        target = %admission.config.target_id,
    )
)]
pub async fn execute_admitted(
    client: &CoordinatorClient,
    pipeline: &Pipeline<'_>,
    admission: &Admission,
    options: &RunOptions,
) -> Result<RunReport, RunError> {
    let run = &admission.run;
    let config = &admission.config;
    let saved = if config.kind == RunKind::Apply
        && admission.plan_run_id.is_some()
        && !run.interrupted
        && run.attempt == 1
    {
        Some(client.take_plan(run).await?.0)
    } else {
        None
    };

    let (pipeline, stop) = pipeline.stoppable();
    let policy = LeasePolicy::new(admission.lease, options.grace);
    let work = pipeline.run(run, config, saved.as_ref());
    let (ran, lost) = watch_lease(client, admission, policy, &stop, work).await;
    let mut result = match (ran, lost) {
        (Ok(result), None) => result,
        (Err(e), None) => return Err(e.into()),
        (ran, Some(why)) => lease_lost(ran, &why),
    };
    let lost = result.class == Some(ErrorClass::LeaseLost);

    let mut stored = None;
    if !lost
        && config.kind == RunKind::Plan
        && result.outcome == RunOutcome::Succeeded
        && let Some(saved) = &result.saved_plan
    {
        stored = Some(
            client
                .put_plan(run, saved, result.masked_plan.as_ref())
                .await?,
        );
    }
    let mut quarantine_id = None;
    if let Some(state) = result.errored_state.take() {
        quarantine_id = keep_errored_state(client, options, run.run_id, run.attempt, state).await;
    }
    let (final_generation, refusal) = if lost {
        finish_lost(client, admission, &result.message).await?
    } else {
        client
            .finish(run, result.outcome, &result.message)
            .await
            .map_err(|e| RunError::of_finish(run.attempt, e))?
    };
    result.apply_refusal_reason(refusal);
    let (plan_id, plan_sha256) = stored.map(|s| (s.plan_id, s.plan_sha256)).unzip();
    Ok(RunReport {
        attempt: run.attempt,
        base_generation: run.base_generation,
        started_at: admission.admitted_at,
        took_saved_plan: saved.is_some(),
        result,
        final_generation,
        plan_id,
        plan_sha256,
        quarantine_id,
    })
}

/// Drives `work` while keeping the lease: renews it on time, and when it cannot be renewed
/// before it ends, cancels `stop` (tofu is stopped gracefully) and says why. The work always
/// runs to its end (a stopped command still cleans up).
async fn watch_lease<T>(
    client: &CoordinatorClient,
    admission: &Admission,
    policy: LeasePolicy,
    stop: &CancellationToken,
    work: impl Future<Output = T>,
) -> (T, Option<String>) {
    tokio::pin!(work);
    let run = &admission.run;
    // The lease was granted before `admit` returned: count from a little earlier.
    let granted_at = Instant::now()
        .checked_sub(admission.admitted_at.elapsed().unwrap_or_default())
        .unwrap_or_else(Instant::now);
    let mut watch = LeaseWatch::new(policy, granted_at);
    type Renewal<'a> = BoxFuture<'a, (Instant, Result<Duration, CoordinatorError>)>;
    let renewal: Fuse<Renewal<'_>> = Fuse::terminated();
    tokio::pin!(renewal);
    let mut lost: Option<String> = None;
    let mut last_error = String::new();
    loop {
        // Biased, in this order: when the task is polled late (a busy runtime), the work's
        // end and a renewal's answer that are already in hand count before the stop that
        // fell due meanwhile; an answer that extended the lease moves the stop.
        tokio::select! {
            biased;
            out = &mut work => return (out, lost),
            (sent, renewed) = &mut renewal, if lost.is_none() => match renewed {
                Ok(remaining) => {
                    watch.renewed(sent, Instant::now(), remaining);
                    last_error.clear();
                }
                Err(e) if e.is_refusal() => {
                    let why = format!("the coordinator refused to renew it: {}", e.status_message());
                    tracing::error!(reason = %why, "run lease lost; stopping tofu");
                    stop.cancel();
                    lost = Some(why);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot renew the run's lease; retrying");
                    last_error = e.to_string();
                    watch.failed(Instant::now());
                }
            },
            () = tokio::time::sleep_until(watch.stop_at()), if lost.is_none() => {
                let why = if last_error.is_empty() {
                    "it could not be renewed in time".to_owned()
                } else {
                    format!("it could not be renewed in time: {last_error}")
                };
                tracing::error!(reason = %why, "run lease about to expire; stopping tofu");
                stop.cancel();
                lost = Some(why);
            }
            () = tokio::time::sleep_until(watch.next_renewal()),
                if renewal.is_terminated() && lost.is_none() =>
            {
                let sent = Instant::now();
                let deadline = watch.renewal_deadline(sent);
                let call: Renewal<'_> = Box::pin(async move {
                    let renewed = tokio::time::timeout(deadline, client.renew(run))
                        .await
                        .unwrap_or_else(|_| Err(CoordinatorError::unanswered("RenewRun", deadline)));
                    (sent, renewed)
                });
                renewal.set(call.fuse());
            }
        }
    }
}

/// The result of a run whose lease was lost: failed as [`ErrorClass::LeaseLost`], keeping
/// what the pipeline produced that must not be lost (an `errored.tfstate`, the log tail).
fn lease_lost(ran: Result<RunResult, PipelineError>, why: &str) -> RunResult {
    let mut lost = RunResult::failed(
        ErrorClass::LeaseLost,
        format!("lease lost — state may be incomplete: {why}; tofu was stopped"),
    );
    match ran {
        Ok(r) => {
            lost.errored_state = r.errored_state;
            lost.log_tail = r.log_tail;
        }
        Err(e) => {
            lost.message = format!("{}; then {}", lost.message, Chain(&e));
        }
    }
    lost
}

/// Finishes an attempt whose lease was lost (failed, "state may be incomplete"), retrying
/// while the coordinator is unreachable. A newer attempt that superseded this one reports
/// the run: [`RunError::Superseded`], not retried. Another refusal or a coordinator that
/// stays unreachable ends the retries: the result is published all the same, with final
/// generation 0, so that the run is not retried behind the workflow's back.
async fn finish_lost(
    client: &CoordinatorClient,
    admission: &Admission,
    message: &str,
) -> Result<(u64, Option<cairn_contract::RefusalReason>), RunError> {
    let run = &admission.run;
    let finish = || client.finish(run, RunOutcome::Failed, message);
    match retry(LOST_FINISH_RETRY_FOR, &CancellationToken::new(), finish).await {
        Ok(answer) => Ok(answer),
        Err(RetryError::Refused(e))
            if e.refusal() == Some(cairn_contract::RefusalReason::Superseded) =>
        {
            Err(RunError::of_finish(run.attempt, e))
        }
        Err(e) => {
            tracing::error!(error = %Chain(&e), "cannot finish the attempt whose lease was lost; publishing its result all the same");
            Ok((0, None))
        }
    }
}

/// Keeps an `errored.tfstate` until the coordinator confirmed it: into the spool first, then
/// `Quarantine` with backoff until it answers, the runner stops or the retries run out (the
/// spool keeps it then, and a restarted runner re-sends it). Returns the quarantine id once
/// confirmed. The state's bytes are never logged.
pub async fn keep_errored_state(
    client: &CoordinatorClient,
    options: &RunOptions,
    run_id: RunId,
    attempt: u32,
    state: Vec<u8>,
) -> Option<String> {
    let entry = match &options.spool {
        Some(spool) => match spool.put(run_id, attempt, &state).await {
            Ok(entry) => Some(entry),
            Err(e) => {
                tracing::error!(error = %Chain(&e), "cannot spool errored.tfstate; it is kept only while the quarantine is retried");
                None
            }
        },
        None => None,
    };
    let send = || client.quarantine(run_id, attempt, state.clone());
    match retry(QUARANTINE_RETRY_FOR, &options.stopping, send).await {
        Ok(id) => {
            if let (Some(spool), Some(entry)) = (&options.spool, &entry) {
                unspool(spool, entry).await;
            }
            Some(id)
        }
        Err(e) => {
            if entry.is_some() {
                tracing::error!(error = %Chain(&e), "errored.tfstate not confirmed by the coordinator; kept in the spool to be sent again");
            } else {
                tracing::error!(error = %Chain(&e), "errored.tfstate not confirmed by the coordinator and not spooled: it is lost");
            }
            None
        }
    }
}

/// Sends what the spool holds to the quarantine, each once; removes what the coordinator
/// confirmed. Returns how many were confirmed and how many are left.
pub async fn resend_spool(client: &CoordinatorClient, spool: &Spool) -> (usize, usize) {
    let entries = match spool.list().await {
        Ok(entries) => entries,
        Err(e) => {
            tracing::error!(error = %Chain(&e), "cannot read the spool");
            return (0, 0);
        }
    };
    let (mut sent, mut left) = (0, 0);
    for entry in entries {
        let state = match spool.read(&entry).await {
            Ok(state) => state,
            Err(e) => {
                tracing::error!(error = %Chain(&e), "cannot read a spooled errored.tfstate");
                left += 1;
                continue;
            }
        };
        let call = client.quarantine(entry.run_id, entry.attempt, state);
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(id)) => {
                tracing::info!(run_id = %entry.run_id, attempt = entry.attempt, quarantine_id = id, "spooled errored.tfstate quarantined");
                unspool(spool, &entry).await;
                sent += 1;
            }
            Ok(Err(e)) => {
                tracing::error!(run_id = %entry.run_id, attempt = entry.attempt, error = %e, "spooled errored.tfstate refused by the coordinator; kept");
                left += 1;
            }
            Err(_) => {
                tracing::error!(run_id = %entry.run_id, attempt = entry.attempt, "the coordinator did not answer for a spooled errored.tfstate; kept");
                left += 1;
            }
        }
    }
    (sent, left)
}

async fn unspool(spool: &Spool, entry: &SpoolEntry) {
    if let Err(e) = spool.remove(entry).await {
        tracing::error!(error = %Chain(&e), "cannot remove a quarantined errored.tfstate from the spool; it will be sent again (stored once)");
    }
}

/// Calls `call` until it succeeds, the coordinator refuses for good, `stopping` is
/// cancelled or `budget` is spent; each call gets [`CALL_TIMEOUT`], and the delay between
/// calls doubles from 200 ms to 2 s.
async fn retry<T, F, Fut>(
    budget: Duration,
    stopping: &CancellationToken,
    mut call: F,
) -> Result<T, RetryError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, CoordinatorError>>,
{
    let until = Instant::now() + budget;
    let mut delay = Duration::from_millis(200);
    loop {
        let error = match tokio::time::timeout(CALL_TIMEOUT, call()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) if e.is_refusal() || e.is_permanent() => {
                return Err(RetryError::Refused(e));
            }
            Ok(Err(e)) => RetryError::Failed(e),
            Err(_) => RetryError::TimedOut,
        };
        tracing::warn!(error = %Chain(&error), retry_in = ?delay, "coordinator call failed; retrying");
        if Instant::now() + delay >= until {
            return Err(error);
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = stopping.cancelled() => return Err(error),
        }
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

/// Why a retried coordinator call gave up.
#[derive(Debug, thiserror::Error)]
enum RetryError {
    /// The coordinator refused for good.
    #[error("refused")]
    Refused(#[source] CoordinatorError),
    /// The last call failed.
    #[error("failed")]
    Failed(#[source] CoordinatorError),
    /// The last call got no answer in time.
    #[error("no answer within {CALL_TIMEOUT:?}")]
    TimedOut,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_leaves_tofu_its_grace_before_the_lease_ends() {
        let p = LeasePolicy::new(Duration::from_secs(120), Duration::from_secs(30));
        assert_eq!(p.renew_every, Duration::from_secs(40));
        assert_eq!(p.margin, Duration::from_secs(31));
        assert_eq!(p.retry_every, Duration::from_secs(2));
        // A lease too short for the grace: give up half-way, so that renewals can still be tried.
        let p = LeasePolicy::new(Duration::from_secs(8), Duration::from_secs(30));
        assert_eq!(p.margin, Duration::from_secs(4));
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_move_the_stop_and_failures_do_not() {
        let p = LeasePolicy::new(Duration::from_secs(9), Duration::from_secs(2));
        let t0 = Instant::now();
        let mut w = LeaseWatch::new(p, t0);
        assert_eq!(w.next_renewal(), t0 + Duration::from_secs(3));
        assert_eq!(w.stop_at(), t0 + Duration::from_secs(6));
        // A renewal sent at 3 s, answered at 4 s: the lease lasts at least until 3 s + 9 s.
        let (sent, answered) = (t0 + Duration::from_secs(3), t0 + Duration::from_secs(4));
        w.renewed(sent, answered, Duration::from_secs(60));
        assert_eq!(w.stop_at(), t0 + Duration::from_secs(9));
        assert_eq!(w.next_renewal(), t0 + Duration::from_secs(7));
        // An answer with less left than the lease (another clock) shortens nothing below what
        // an earlier renewal gave, and never extends beyond sent + lease.
        w.renewed(answered, answered, Duration::from_secs(1));
        assert_eq!(w.stop_at(), t0 + Duration::from_secs(9));
        // Failures only bring the next try closer.
        w.failed(t0 + Duration::from_secs(7));
        assert_eq!(w.next_renewal(), t0 + Duration::from_millis(7750));
        assert_eq!(w.stop_at(), t0 + Duration::from_secs(9));
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_waits_at_most_half_the_time_left_before_the_stop() {
        // The default lease and grace: renew at 40 s, stop at 89 s.
        let p = LeasePolicy::new(Duration::from_secs(120), Duration::from_secs(30));
        let t0 = Instant::now();
        let w = LeaseWatch::new(p, t0);
        assert_eq!(w.stop_at(), t0 + Duration::from_secs(89));
        // Sent when due, a renewal that hangs is given up at 64.5 s, which leaves time for
        // the retry 2 s later (and its own 10.25 s) before the stop; the SDK's 30 s deadline
        // would have held it until 70 s.
        let due = w.next_renewal();
        assert_eq!(w.renewal_deadline(due), Duration::from_millis(24_500));
        // Never shorter than the retry interval, even past the stop.
        assert_eq!(
            w.renewal_deadline(t0 + Duration::from_secs(88)),
            Duration::from_secs(2)
        );
        assert_eq!(
            w.renewal_deadline(t0 + Duration::from_secs(100)),
            Duration::from_secs(2)
        );
    }
}
