//! The coordinator's error: what every service shares ([`BaseError`]) plus the coordinator's
//! own refusals, and its one mapping to `tonic::Status` (the HTTP backend maps the same
//! values to status codes in `http_backend::status`).
//!
//! A refusal with a machine-readable reason ([`Error::reason`]) carries its code
//! ([`RefusalReason::code`]) in the `cairn-reason` metadata of the status; the same code is
//! what the attempt records and `FinishRunResponse.refusal_reason` returns.

use cairn_contract::{RefusalReason, RunId, StateId};
use cairn_service::BaseError;
use chrono::{DateTime, Utc};

use crate::domain::write_rules::WriteConflict;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not found, permission, invalid argument, a serialization conflict (retried by type),
    /// unavailable, internal, …
    #[error(transparent)]
    Base(BaseError),
    /// The state is fenced (`recovery_required`).
    #[error(
        "state {state_id} requires recovery ({reason}); an admin must inspect and recover it (Recovery.InspectState / Recovery.Recover)"
    )]
    Fenced { state_id: StateId, reason: String },
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
    RunFinished { run_id: RunId, status: String },
    /// A state-changing run refused while the coordinator is in after-restore mode.
    #[error(
        "the coordinator is in after-restore mode: state-changing runs stay blocked until Recovery.VerifyAll passes"
    )]
    AfterRestore,
    /// The run's latest attempt still holds a live lease; admit again once it expired.
    #[error("attempt {attempt} of run {run_id} still holds a live lease until {until}")]
    LeaseHeld {
        run_id: RunId,
        attempt: i32,
        until: DateTime<Utc>,
    },
    /// FinishRun of an attempt a newer attempt of the run superseded.
    #[error(
        "attempt {attempt} of run {run_id} was superseded by attempt {latest}; only the latest attempt finishes the run"
    )]
    Superseded {
        run_id: RunId,
        attempt: i32,
        latest: i32,
    },
    #[error("state document is {size} bytes, the limit is {limit}")]
    TooLarge { size: usize, limit: usize },
}

cairn_service::base_error_conversions!(Error);

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The machine-readable reason of a refusal that has one.
    pub fn reason(&self) -> Option<RefusalReason> {
        match self {
            Error::RunFinished { .. } => Some(RefusalReason::RunFinished),
            Error::Fenced { .. } => Some(RefusalReason::Fenced),
            Error::Stale { .. } => Some(RefusalReason::Stale),
            Error::AfterRestore => Some(RefusalReason::AfterRestore),
            Error::LeaseHeld { .. } => Some(RefusalReason::LeaseHeld),
            Error::Locked { .. } => Some(RefusalReason::Locked),
            Error::Superseded { .. } => Some(RefusalReason::Superseded),
            Error::Base(_) | Error::WriteConflict(_) | Error::TooLarge { .. } => None,
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let reason = err.reason();
        let msg = err.to_string();
        let status = match err {
            Error::Base(b) => b.into(),
            Error::TooLarge { .. } => tonic::Status::invalid_argument(msg),
            Error::Fenced { .. }
            | Error::Stale { .. }
            | Error::RunFinished { .. }
            | Error::Superseded { .. }
            | Error::AfterRestore => tonic::Status::failed_precondition(msg),
            Error::WriteConflict(_) | Error::Locked { .. } | Error::LeaseHeld { .. } => {
                tonic::Status::aborted(msg)
            }
        };
        match reason {
            Some(r) => cairn_service::status_with_reason(status, r),
            None => status,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use cairn_db::IsRetryable;
    use cairn_service::reason_of;

    #[test]
    fn refusals_carry_their_reason_and_keep_code_and_message() {
        let run_id = RunId::from(uuid::Uuid::nil());
        let state_id = StateId::from(uuid::Uuid::nil());
        let until = DateTime::<Utc>::UNIX_EPOCH;
        let cases = [
            (
                Error::RunFinished {
                    run_id,
                    status: "succeeded".to_owned(),
                },
                tonic::Code::FailedPrecondition,
                RefusalReason::RunFinished,
                format!("run {run_id} has already finished (succeeded)"),
            ),
            (
                Error::Fenced {
                    state_id,
                    reason: "hash".to_owned(),
                },
                tonic::Code::FailedPrecondition,
                RefusalReason::Fenced,
                format!("state {state_id} requires recovery (hash)"),
            ),
            (
                Error::Stale {
                    current: 3,
                    base: 2,
                },
                tonic::Code::FailedPrecondition,
                RefusalReason::Stale,
                "stale run: the state is at generation 3".to_owned(),
            ),
            (
                Error::AfterRestore,
                tonic::Code::FailedPrecondition,
                RefusalReason::AfterRestore,
                "the coordinator is in after-restore mode".to_owned(),
            ),
            (
                Error::LeaseHeld {
                    run_id,
                    attempt: 1,
                    until,
                },
                tonic::Code::Aborted,
                RefusalReason::LeaseHeld,
                format!("attempt 1 of run {run_id} still holds a live lease until {until}"),
            ),
            (
                Error::Locked {
                    lock_id: "l1".to_owned(),
                    holder: serde_json::Value::Null,
                },
                tonic::Code::Aborted,
                RefusalReason::Locked,
                "state is locked by lock l1".to_owned(),
            ),
            (
                Error::Superseded {
                    run_id,
                    attempt: 1,
                    latest: 2,
                },
                tonic::Code::FailedPrecondition,
                RefusalReason::Superseded,
                format!("attempt 1 of run {run_id} was superseded by attempt 2"),
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
            Error::failed_precondition("x"),
            Error::aborted("x"),
            Error::not_found("run"),
            Error::internal("x"),
            Error::Base(BaseError::Conflict("x".to_owned())),
        ] {
            assert_eq!(reason_of(&tonic::Status::from(err)), None);
        }
    }

    #[test]
    fn a_serialization_conflict_is_retried_because_of_its_type_not_its_text() {
        // What a 40001 / 40P01 becomes on its way from sqlx.
        assert!(
            Error::Base(BaseError::Conflict("could not serialize access".into())).is_retryable()
        );
        // A message that merely reads like a conflict is not one (the old rule matched text).
        assert!(!Error::aborted("transaction conflict: lost the race").is_retryable());
        assert!(!Error::internal("transaction conflict").is_retryable());
        assert!(!Error::AfterRestore.is_retryable());
        // A conflict that outlived its retries is ABORTED with no refusal reason.
        let status = tonic::Status::from(Error::Base(BaseError::Conflict("40001".into())));
        assert_eq!(status.code(), tonic::Code::Aborted);
        assert_eq!(reason_of(&status), None);
    }
}
