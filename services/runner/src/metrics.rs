//! What the runner records: runs by kind and outcome, each tofu command's duration, and its
//! run queues (redeliveries; the depth JetStream reports with every delivery, so the gauge
//! moves when a request is taken, not while a long run holds the worker).
use cairn_service::Metric;

/// Runs handled, by `kind` and `outcome` (`succeeded`, `failed`, `cancelled`, `timed_out`,
/// `interrupted`; `superseded` when a newer attempt took over; `error` when the runner
/// could not drive it).
pub const RUNS: &str = "cairn_runner_runs_total";
/// One tofu command, by `command` (`init`, `plan`, …) and `result` (`ok`, `failed`,
/// `timed_out`, `cancelled`, `error`: the executor failed).
pub const TOFU_COMMAND_DURATION: &str = "cairn_runner_tofu_command_duration_seconds";
/// Run queue messages delivered again (a request not acknowledged in time or handed back).
pub const QUEUE_REDELIVERIES: &str = "cairn_runner_queue_redeliveries_total";
/// Requests waiting in a target's run queue after the last delivery, by `target`.
pub const QUEUE_PENDING: &str = "cairn_runner_queue_pending";

/// What this crate records.
pub const METRICS: &[Metric] = &[
    Metric::counter(RUNS, "runs handled, by kind and outcome"),
    Metric::histogram(
        TOFU_COMMAND_DURATION,
        "tofu command duration in seconds, by command and result",
    ),
    Metric::counter(QUEUE_REDELIVERIES, "run queue messages delivered again"),
    Metric::gauge(
        QUEUE_PENDING,
        "requests waiting in a target's run queue at the last delivery",
    ),
];

/// The `outcome` label of a run that ended.
pub(crate) fn outcome_label(outcome: crate::pipeline::RunOutcome) -> &'static str {
    use crate::pipeline::RunOutcome;
    match outcome {
        RunOutcome::Succeeded => "succeeded",
        RunOutcome::Failed => "failed",
        RunOutcome::Cancelled => "cancelled",
        RunOutcome::TimedOut => "timed_out",
        RunOutcome::Interrupted => "interrupted",
    }
}

/// Counts a run of `kind` that ended with `outcome` (an [`outcome_label`] or `superseded`,
/// `error`).
pub(crate) fn run_ended(kind: &'static str, outcome: &'static str) {
    metrics::counter!(RUNS, "kind" => kind, "outcome" => outcome).increment(1);
}

/// Records one tofu command's duration; with `detailed_exitcode` (`plan -detailed-exitcode`)
/// exit code 2, a success with changes, is `ok` too.
pub(crate) fn tofu_command<E>(
    command: String,
    outcome: &Result<crate::executor::CommandOutcome, E>,
    detailed_exitcode: bool,
    took: std::time::Duration,
) {
    let result = match outcome {
        Ok(o) if o.timed_out => "timed_out",
        Ok(o) if o.cancelled => "cancelled",
        Ok(o) if o.success() || (detailed_exitcode && o.exit_code == Some(2)) => "ok",
        Ok(_) => "failed",
        Err(_) => "error",
    };
    metrics::histogram!(TOFU_COMMAND_DURATION, "command" => command, "result" => result)
        .record(took.as_secs_f64());
}

/// What a run queue delivery says about the queue.
pub(crate) fn queue_delivery(target: &str, delivered: i64, pending: u64) {
    if delivered > 1 {
        metrics::counter!(QUEUE_REDELIVERIES).increment(1);
    }
    #[allow(clippy::cast_precision_loss, reason = "a queue depth far below 2^52")]
    metrics::gauge!(QUEUE_PENDING, "target" => target.to_owned()).set(pending as f64);
}
