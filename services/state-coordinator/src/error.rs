//! The coordinator's error type and its one mapping to `tonic::Status` (the HTTP backend
//! has its own mapping to status codes in `http_backend::status`).

use chrono::{DateTime, Utc};

use crate::domain::write_rules::WriteConflict;

/// The ASCII gRPC metadata key that carries a machine-readable reason on some refusals, so
/// callers (the runner) never parse message text. The values are listed in [`reason`] and
/// documented next to `service Runs` in `proto/cairn/state/v1/state.proto`.
pub const REASON_METADATA: &str = "cairn-reason";

/// The values of [`REASON_METADATA`].
pub mod reason {
    /// AdmitRun of a run that already finished (FAILED_PRECONDITION).
    pub const RUN_FINISHED: &str = "run-finished";
    /// The state is fenced (`recovery_required`) (FAILED_PRECONDITION).
    pub const FENCED: &str = "fenced";
    /// The attempt's base generation is no longer current (FAILED_PRECONDITION).
    pub const STALE: &str = "stale";
    /// A state-changing run refused in after-restore mode (FAILED_PRECONDITION).
    pub const AFTER_RESTORE: &str = "after-restore";
    /// The run's previous attempt still holds a live lease (ABORTED).
    pub const LEASE_HELD: &str = "lease-held";
    /// The state's lock is held by another lock id (ABORTED).
    pub const LOCKED: &str = "locked";
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidArgument(String),
    /// Missing, or owned by another tenant: the two are indistinguishable on purpose.
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    /// The state is fenced (`recovery_required`).
    #[error(
        "state {state_id} requires recovery ({reason}); an admin must inspect and recover it (Recovery.InspectState / Recovery.Recover)"
    )]
    Fenced {
        state_id: uuid::Uuid,
        reason: String,
    },
    /// The attempt's base generation is no longer current.
    #[error("stale run: the state is at generation {current}, this attempt started from {base}")]
    Stale { current: u64, base: u64 },
    #[error(transparent)]
    WriteConflict(#[from] WriteConflict),
    /// The lock is held by another lock id; carries the holder's LockInfo.
    #[error("state is locked by lock {lock_id}")]
    Locked {
        lock_id: String,
        holder: serde_json::Value,
    },
    /// AdmitRun of a run that has already finished.
    #[error("run {run_id} has already finished ({status})")]
    RunFinished { run_id: uuid::Uuid, status: String },
    /// A state-changing run refused while the coordinator is in after-restore mode.
    #[error(
        "the coordinator is in after-restore mode: state-changing runs stay blocked until Recovery.VerifyAll passes"
    )]
    AfterRestore,
    /// The run's latest attempt still holds a live lease; admit again once it expired.
    #[error("attempt {attempt} of run {run_id} still holds a live lease until {until}")]
    LeaseHeld {
        run_id: uuid::Uuid,
        attempt: i32,
        until: DateTime<Utc>,
    },
    #[error("{0}")]
    FailedPrecondition(String),
    /// A race was lost; retrying may succeed.
    #[error("{0}")]
    Aborted(String),
    #[error("state document is {size} bytes, the limit is {limit}")]
    TooLarge { size: usize, limit: usize },
    /// Transient trouble with KMS, S3 or PostgreSQL; the message names the cause.
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Self {
        match cairn_db::classify(&err) {
            cairn_db::DbFailure::Unavailable(m) => Error::Unavailable(m),
            cairn_db::DbFailure::Conflict(m) => Error::Aborted(m),
            cairn_db::DbFailure::Other(m) => Error::Internal(m),
        }
    }
}

impl cairn_db::IsRetryable for Error {
    fn is_retryable(&self) -> bool {
        matches!(self, Error::Aborted(m) if m.starts_with("transaction conflict"))
    }
}

impl From<cairn_auth::AuthError> for Error {
    fn from(err: cairn_auth::AuthError) -> Self {
        let message = err.to_string();
        match err.denial() {
            cairn_auth::Denial::Unauthenticated => Error::Unauthenticated(message),
            cairn_auth::Denial::PermissionDenied => Error::PermissionDenied(message),
            cairn_auth::Denial::NotFound => Error::NotFound("resource".to_owned()),
            cairn_auth::Denial::Internal => Error::Internal(format!("authentication: {message}")),
        }
    }
}

impl From<crate::domain::ids::InvalidId> for Error {
    fn from(err: crate::domain::ids::InvalidId) -> Self {
        Error::InvalidArgument(err.to_string())
    }
}

impl Error {
    /// The machine-readable reason sent as [`REASON_METADATA`], for the refusals that have one.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            Error::RunFinished { .. } => Some(reason::RUN_FINISHED),
            Error::Fenced { .. } => Some(reason::FENCED),
            Error::Stale { .. } => Some(reason::STALE),
            Error::AfterRestore => Some(reason::AFTER_RESTORE),
            Error::LeaseHeld { .. } => Some(reason::LEASE_HELD),
            Error::Locked { .. } => Some(reason::LOCKED),
            Error::InvalidArgument(_)
            | Error::NotFound(_)
            | Error::Unauthenticated(_)
            | Error::PermissionDenied(_)
            | Error::WriteConflict(_)
            | Error::FailedPrecondition(_)
            | Error::Aborted(_)
            | Error::TooLarge { .. }
            | Error::Unavailable(_)
            | Error::Internal(_) => None,
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let msg = err.to_string();
        let reason = err.reason();
        let mut status = match err {
            Error::InvalidArgument(_) | Error::TooLarge { .. } => {
                tonic::Status::invalid_argument(msg)
            }
            Error::NotFound(_) => tonic::Status::not_found(msg),
            Error::Unauthenticated(_) => tonic::Status::unauthenticated(msg),
            Error::PermissionDenied(_) => tonic::Status::permission_denied(msg),
            Error::Fenced { .. }
            | Error::Stale { .. }
            | Error::RunFinished { .. }
            | Error::AfterRestore
            | Error::FailedPrecondition(_) => tonic::Status::failed_precondition(msg),
            Error::WriteConflict(_)
            | Error::Locked { .. }
            | Error::LeaseHeld { .. }
            | Error::Aborted(_) => tonic::Status::aborted(msg),
            Error::Unavailable(_) => tonic::Status::unavailable(msg),
            Error::Internal(_) => {
                tracing::error!(error = %msg, "internal error");
                tonic::Status::internal("internal error")
            }
        };
        if let Some(r) = reason {
            status.metadata_mut().insert(
                REASON_METADATA,
                tonic::metadata::AsciiMetadataValue::from_static(r),
            );
        }
        status
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn reason_of(s: &tonic::Status) -> Option<&str> {
        s.metadata()
            .get(REASON_METADATA)
            .map(|v| v.to_str().unwrap())
    }

    #[test]
    fn refusals_carry_their_reason_and_keep_code_and_message() {
        let run_id = uuid::Uuid::nil();
        let until = DateTime::<Utc>::UNIX_EPOCH;
        let cases = [
            (
                Error::RunFinished {
                    run_id,
                    status: "succeeded".to_owned(),
                },
                tonic::Code::FailedPrecondition,
                "run-finished",
                format!("run {run_id} has already finished (succeeded)"),
            ),
            (
                Error::Fenced {
                    state_id: run_id,
                    reason: "hash".to_owned(),
                },
                tonic::Code::FailedPrecondition,
                "fenced",
                format!("state {run_id} requires recovery (hash)"),
            ),
            (
                Error::Stale {
                    current: 3,
                    base: 2,
                },
                tonic::Code::FailedPrecondition,
                "stale",
                "stale run: the state is at generation 3".to_owned(),
            ),
            (
                Error::AfterRestore,
                tonic::Code::FailedPrecondition,
                "after-restore",
                "the coordinator is in after-restore mode".to_owned(),
            ),
            (
                Error::LeaseHeld {
                    run_id,
                    attempt: 1,
                    until,
                },
                tonic::Code::Aborted,
                "lease-held",
                format!("attempt 1 of run {run_id} still holds a live lease until {until}"),
            ),
            (
                Error::Locked {
                    lock_id: "l1".to_owned(),
                    holder: serde_json::Value::Null,
                },
                tonic::Code::Aborted,
                "locked",
                "state is locked by lock l1".to_owned(),
            ),
        ];
        for (err, code, reason, message) in cases {
            let status = tonic::Status::from(err);
            assert_eq!(status.code(), code, "{reason}");
            assert_eq!(reason_of(&status), Some(reason));
            assert!(
                status.message().starts_with(&message),
                "{reason}: {}",
                status.message()
            );
        }
    }

    #[test]
    fn other_errors_carry_no_reason() {
        for err in [
            Error::FailedPrecondition("x".to_owned()),
            Error::Aborted("x".to_owned()),
            Error::NotFound("run".to_owned()),
            Error::Internal("x".to_owned()),
        ] {
            assert_eq!(reason_of(&tonic::Status::from(err)), None);
        }
    }
}
