//! Why the state coordinator refused a run, as a typed value with a stable wire code.
//!
//! The code travels wherever a reason does: the `cairn-reason` gRPC metadata of a refused
//! call, `FinishRunResponse.refusal_reason` and the attempt's recorded reason (a LOCK refused
//! by the HTTP backend). Callers decide on [`RefusalReason`], never on message text.
use std::fmt;

/// The ASCII gRPC metadata key that carries a [`RefusalReason::code`] on a refused call.
pub const REASON_METADATA: &str = "cairn-reason";

/// A refusal reason of the state coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusalReason {
    /// AdmitRun of a run that already finished (FAILED_PRECONDITION).
    RunFinished,
    /// The state is fenced (`recovery_required`) (FAILED_PRECONDITION; 422 over HTTP).
    Fenced,
    /// The attempt's base generation is no longer current (FAILED_PRECONDITION; 412).
    Stale,
    /// A state-changing run refused in after-restore mode (FAILED_PRECONDITION).
    AfterRestore,
    /// The run's previous attempt still holds a live lease (ABORTED).
    LeaseHeld,
    /// The state's lock is held by another lock id (ABORTED).
    Locked,
    /// FinishRun of an attempt a newer attempt of the run superseded (FAILED_PRECONDITION):
    /// the newer attempt reports the run; this one's outcome is not the run's.
    Superseded,
}

impl RefusalReason {
    /// Every reason.
    pub const ALL: [RefusalReason; 7] = [
        Self::RunFinished,
        Self::Fenced,
        Self::Stale,
        Self::AfterRestore,
        Self::LeaseHeld,
        Self::Locked,
        Self::Superseded,
    ];

    /// The wire code.
    pub const fn code(self) -> &'static str {
        match self {
            Self::RunFinished => "run-finished",
            Self::Fenced => "fenced",
            Self::Stale => "stale",
            Self::AfterRestore => "after-restore",
            Self::LeaseHeld => "lease-held",
            Self::Locked => "locked",
            Self::Superseded => "superseded",
        }
    }

    /// The reason a wire code names; `None` for an empty or unknown code (a newer
    /// coordinator's reason is treated as "no known reason", never guessed from text).
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.code() == code)
    }

    /// Waiting and trying again may succeed (another attempt's lease or lock goes away);
    /// the other reasons are final for this run.
    pub const fn is_transient(self) -> bool {
        match self {
            Self::LeaseHeld | Self::Locked => true,
            Self::RunFinished
            | Self::Fenced
            | Self::Stale
            | Self::AfterRestore
            | Self::Superseded => false,
        }
    }
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_none() {
        for r in RefusalReason::ALL {
            assert_eq!(RefusalReason::from_code(r.code()), Some(r));
        }
        assert_eq!(RefusalReason::from_code(""), None);
        assert_eq!(RefusalReason::from_code("state is fenced"), None);
        assert!(!RefusalReason::Fenced.is_transient());
        assert!(RefusalReason::LeaseHeld.is_transient());
        assert_eq!(
            RefusalReason::from_code("superseded"),
            Some(RefusalReason::Superseded)
        );
        assert!(!RefusalReason::Superseded.is_transient());
    }
}
