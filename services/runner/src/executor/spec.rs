//! What an executor is asked to run and what it reports back.

use std::fmt;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The id of a run, as the state coordinator hands it out (the contract's one run id).
pub use cairn_contract::RunId;

/// The id of a runner instance: 1 to 63 characters of `[A-Za-z0-9_.-]`, so that it can be a
/// label value, part of a file name and part of a volume name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunnerInstance(String);

/// Why a runner instance id was refused.
#[derive(Debug, thiserror::Error)]
#[error("runner instance id {0:?} must be 1 to 63 characters of A-Z, a-z, 0-9, '_', '.', '-'")]
pub struct RunnerInstanceError(String);

impl RunnerInstance {
    /// Checks and wraps an instance id.
    pub fn parse(id: &str) -> Result<Self, RunnerInstanceError> {
        let ok = !id.is_empty()
            && id.len() <= 63
            && !id.starts_with('.')
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if ok {
            Ok(Self(id.to_owned()))
        } else {
            Err(RunnerInstanceError(id.to_owned()))
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunnerInstance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A value that must not be shown: `Debug` prints `Secret(***)`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself, for the one place that has to hand it over.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// One line of a command's output, already redacted, without its line ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// The stream it was written to.
    pub stream: OutputStream,
    /// The redacted text.
    pub text: String,
}

/// One tofu command of a run.
#[derive(Debug)]
pub struct CommandSpec {
    /// The run whose work directory the command runs in (see `Executor::prepare_run`).
    pub run_id: RunId,
    /// The attempt of the run the command belongs to (a label on its container: a
    /// container of an attempt that is not the run's live one is dead).
    pub attempt: u32,
    /// The arguments after `tofu`, e.g. `["plan", "-out=plan.bin"]`. Never put a secret here.
    pub args: Vec<String>,
    /// Environment variables whose values are secret (credentials, sensitive `TF_VAR_*`,
    /// `TF_HTTP_PASSWORD`): given to this command only and redacted from its output.
    pub env: Vec<(String, Secret)>,
    /// Environment variables that are not secret (`TF_HTTP_ADDRESS`, `TF_HTTP_RETRY_MAX`,
    /// `CAIRN_EXECUTOR_EXTRA_ENV`, …): given to this command only.
    pub plain_env: Vec<(String, String)>,
    /// A local target's base directory, made visible at the same path.
    pub base_dir: Option<std::path::PathBuf>,
    /// After this long the command is stopped (SIGINT, the grace period, SIGKILL).
    pub timeout: Duration,
    /// Cancelling this stops the command the same way.
    pub cancel: CancellationToken,
    /// Where the redacted output lines go. A closed receiver does not stop the command.
    pub output: mpsc::Sender<LogLine>,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandOutcome {
    /// The exit code; `None` when the process died of a signal and no code was reported.
    pub exit_code: Option<i64>,
    /// The timeout expired and the command was stopped.
    pub timed_out: bool,
    /// The command was cancelled and stopped.
    pub cancelled: bool,
    /// The command ignored SIGINT for the whole grace period and was killed.
    pub killed: bool,
}

impl CommandOutcome {
    /// The command ran to its end and exited 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.stopped()
    }

    /// The command was stopped by a timeout or a cancellation: state may be incomplete.
    pub fn stopped(&self) -> bool {
        self.timed_out || self.cancelled
    }
}

/// Why a running command is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    TimedOut,
    Cancelled,
}

impl CommandSpec {
    /// Waits until the command must be stopped: its timeout expires or it is cancelled.
    pub(crate) async fn stop_requested(&self) -> StopReason {
        tokio::select! {
            () = tokio::time::sleep(self.timeout) => StopReason::TimedOut,
            () = self.cancel.cancelled() => StopReason::Cancelled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_debug_hides_the_value() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn runner_instance_ids_are_checked() {
        assert!(RunnerInstance::parse("runner-1.a_b").is_ok());
        for bad in ["", ".x", "a/b", "a b", &"x".repeat(64)] {
            assert!(RunnerInstance::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
