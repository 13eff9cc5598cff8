//! Errors of the executors.

use std::path::PathBuf;

/// Why an executor could not run a command or manage a run's resources. A command that ran
/// and failed is not an error: its exit code is in the `CommandOutcome`.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    /// A Docker Engine API call failed.
    #[error("docker: {op}")]
    Docker {
        /// What was being done.
        op: String,
        /// The engine's error.
        #[source]
        source: bollard::errors::Error,
    },
    /// A file system operation failed.
    #[error("{op} {}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The tofu process could not be started or waited for.
    #[error("run {}", bin.display())]
    Spawn {
        /// The binary.
        bin: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A signal could not be sent.
    #[error("send {signal} to process group {pgid}")]
    Signal {
        /// The signal's name.
        signal: &'static str,
        /// The process group.
        pgid: i32,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The secrets of a command could not be turned into a redaction pattern.
    #[error("build the redaction pattern")]
    Redaction(#[source] regex::Error),
    /// The command's work directory was not prepared.
    #[error("run {0} has no work directory (prepare_run was not called)")]
    NotPrepared(String),
    /// The configuration is unusable.
    #[error("invalid executor configuration: {0}")]
    Config(String),
    /// The task supervising a command panicked or was aborted.
    #[error("the task supervising the command ended abnormally")]
    Supervisor(#[source] tokio::task::JoinError),
}

impl ExecutorError {
    pub(crate) fn docker(op: impl Into<String>) -> impl FnOnce(bollard::errors::Error) -> Self {
        let op = op.into();
        move |source| Self::Docker { op, source }
    }

    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { op, path, source }
    }
}
