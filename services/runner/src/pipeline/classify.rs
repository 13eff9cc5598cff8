//! Why a run failed: the [`ErrorClass`] of a command that did not succeed, read from tofu's
//! (redacted) output, and the coordinator's typed refusal reason, which wins over it.

use cairn_contract::RefusalReason;

use super::command::Ran;
use super::model::{RunOutcome, RunResult};

/// Why a run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Network, rate limit, a lock held by another run, a server error: worth retrying.
    Transient,
    /// The configuration is invalid.
    Config,
    /// A provider failed or refused.
    Provider,
    /// The saved plan no longer matches the state or the config.
    StalePlan,
    /// The state is fenced (or blocked for changes until an operator acts).
    Fenced,
    /// Cancelled.
    Cancelled,
    /// Timed out.
    TimedOut,
    /// Interrupted by a runner restart.
    Interrupted,
    /// The attempt's lease could not be renewed before it expired: tofu was stopped before
    /// the lease ended, state may be incomplete. Never retried.
    LeaseLost,
}

/// The class the coordinator's refusal reason gives a failed attempt; `None` where the
/// reason says nothing about why it failed (tofu's class stays).
pub fn class_of_refusal(reason: RefusalReason) -> Option<ErrorClass> {
    match reason {
        RefusalReason::Fenced => Some(ErrorClass::Fenced),
        // State-changing runs are blocked until an operator ends after-restore mode:
        // retrying does not help, as with a fence.
        RefusalReason::AfterRestore => Some(ErrorClass::Fenced),
        RefusalReason::Stale => Some(ErrorClass::StalePlan),
        RefusalReason::LeaseHeld | RefusalReason::Locked => Some(ErrorClass::Transient),
        // A superseded attempt's finish is refused: the newer attempt reports the run, so
        // this one has no class to give (the runner drops its result; see `RunError`).
        RefusalReason::RunFinished | RefusalReason::Superseded => None,
    }
}

impl RunResult {
    /// Replaces the class of a failed run by the one the coordinator's refusal reason (from
    /// `FinishRun`) gives: what the coordinator recorded wins over tofu's text. No reason, or
    /// one this runner does not know, keeps tofu's class.
    pub fn apply_refusal_reason(&mut self, reason: Option<RefusalReason>) {
        // A lost lease stays lost: whatever a LOCK of the attempt met, tofu was stopped.
        if self.outcome != RunOutcome::Failed || self.class == Some(ErrorClass::LeaseLost) {
            return;
        }
        if let Some(class) = reason.and_then(class_of_refusal) {
            self.class = Some(class);
        }
    }
}

/// Where in the run a command stands, for classifying its failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// `init`.
    Init,
    /// `validate`: any failure is a config error.
    Validate,
    /// Everything after.
    Run,
}

/// The failed result of a command that did not succeed, or `None` when it did.
pub(super) fn failure(ran: &Ran, what: &str, stage: Stage) -> Option<RunResult> {
    let o = &ran.outcome;
    if o.timed_out {
        return Some(RunResult::new(
            RunOutcome::TimedOut,
            Some(ErrorClass::TimedOut),
            format!("{what} timed out — state may be incomplete"),
        ));
    }
    if o.cancelled {
        return Some(RunResult::new(
            RunOutcome::Cancelled,
            Some(ErrorClass::Cancelled),
            format!("{what} cancelled — state may be incomplete"),
        ));
    }
    if o.success() {
        return None;
    }
    let class = match stage {
        Stage::Validate => ErrorClass::Config,
        Stage::Init | Stage::Run => classify_text(&ran.text, stage),
    };
    let code = o
        .exit_code
        .map_or_else(|| "no exit code".to_owned(), |c| format!("exit code {c}"));
    Some(RunResult::failed(class, format!("{what} failed ({code})")))
}

/// Phrases of tofu's output that mean trying again may succeed.
const TRANSIENT: &[&str] = &[
    "error acquiring the state lock",
    "connection refused",
    "connection reset",
    "i/o timeout",
    "timeout awaiting",
    "tls handshake timeout",
    "no such host",
    "too many requests",
    "rate limit",
    "throttl",
    "503 service unavailable",
    "502 bad gateway",
    "500 internal server error",
    "504 gateway timeout",
    "http status 5",
];

/// Phrases of tofu's output that mean the configuration is wrong.
const CONFIG: &[&str] = &[
    "unsupported argument",
    "missing required argument",
    "reference to undeclared",
    "invalid reference",
    "unsupported block type",
    "argument or block definition required",
    "invalid expression",
    "module not installed",
    "unreadable module directory",
    "no value for required variable",
    "invalid value for",
];

/// A failure's class from tofu's (redacted) output, when the coordinator recorded none.
fn classify_text(text: &str, stage: Stage) -> ErrorClass {
    let t = text.to_ascii_lowercase();
    if TRANSIENT.iter().any(|p| t.contains(p)) {
        ErrorClass::Transient
    } else if stage == Stage::Validate || CONFIG.iter().any(|p| t.contains(p)) {
        ErrorClass::Config
    } else {
        ErrorClass::Provider
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_reason_wins_over_text() {
        let mut r = RunResult::failed(ErrorClass::Provider, "x");
        r.apply_refusal_reason(RefusalReason::from_code("fenced"));
        assert_eq!(r.class, Some(ErrorClass::Fenced));
        r.apply_refusal_reason(RefusalReason::from_code("stale"));
        assert_eq!(r.class, Some(ErrorClass::StalePlan));
        // No code, a code this runner does not know, or text: tofu's class stays.
        for code in ["", "a-newer-reason", "state is fenced: serial regression"] {
            r.apply_refusal_reason(RefusalReason::from_code(code));
            assert_eq!(r.class, Some(ErrorClass::StalePlan), "{code:?}");
        }
        let mut lost = RunResult::failed(ErrorClass::LeaseLost, "lease lost");
        lost.apply_refusal_reason(Some(RefusalReason::Locked));
        assert_eq!(lost.class, Some(ErrorClass::LeaseLost));
        let mut ok = RunResult::new(RunOutcome::Succeeded, None, "ok");
        ok.apply_refusal_reason(Some(RefusalReason::Fenced));
        assert_eq!(ok.class, None);
    }

    #[test]
    fn refusal_reasons_map_to_classes() {
        let class = |code| RefusalReason::from_code(code).and_then(class_of_refusal);
        assert_eq!(class("fenced"), Some(ErrorClass::Fenced));
        assert_eq!(class("after-restore"), Some(ErrorClass::Fenced));
        assert_eq!(class("stale"), Some(ErrorClass::StalePlan));
        assert_eq!(class("lease-held"), Some(ErrorClass::Transient));
        assert_eq!(class("locked"), Some(ErrorClass::Transient));
        assert_eq!(class("run-finished"), None);
        assert_eq!(class("superseded"), None, "never transient, never retried");
        // Transient exactly where the contract says waiting may help: never a fence.
        for reason in RefusalReason::ALL {
            assert_eq!(
                class_of_refusal(reason) == Some(ErrorClass::Transient),
                reason.is_transient(),
                "{reason}"
            );
        }
    }

    #[test]
    fn classifies_tofu_text() {
        for (text, stage, class) in [
            (
                "Error: Error acquiring the state lock",
                Stage::Run,
                ErrorClass::Transient,
            ),
            (
                "Error: Unsupported argument",
                Stage::Run,
                ErrorClass::Config,
            ),
            (
                "Error: creating bucket: AccessDenied",
                Stage::Run,
                ErrorClass::Provider,
            ),
            ("anything", Stage::Validate, ErrorClass::Config),
        ] {
            assert_eq!(classify_text(text, stage), class, "{text}");
        }
    }
}
