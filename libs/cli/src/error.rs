//! Why a command failed and which exit code says so: 1 for a refusal or failure, 2 for a
//! usage error, 3 for a deployment awaiting approval. Printed as one line.
use std::process::ExitCode;

/// A command's failure.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The command line or a local input is wrong (exit 2).
    #[error("{0}")]
    Usage(String),
    /// A Cairn service refused or failed (exit 1): its message, code and reason.
    #[error(transparent)]
    Api(#[from] cairn_sdk::Error),
    /// Anything else (exit 1).
    #[error("{0}")]
    Other(String),
    /// Already reported; exit with this code.
    #[error("")]
    Exit(u8),
}

impl CliError {
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            CliError::Usage(_) => 2,
            CliError::Api(_) | CliError::Other(_) => 1,
            CliError::Exit(code) => *code,
        })
    }
}

/// Result of a command.
pub type Result<T = ()> = std::result::Result<T, CliError>;
