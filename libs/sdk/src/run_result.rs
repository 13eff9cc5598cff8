//! One spelling of how a run ended, for every service that stores or shows a runner's
//! `RunResult`: its outcome and error class as lower snake case names (`timed_out`,
//! `stale_plan`, …), so the workflow and drift store the same words for the same wire values.
use cairn_proto::runner::ErrorClass;
use cairn_proto::state::RunOutcome;

/// The name of a result's `outcome` (a `RunOutcome` wire value); anything but a known
/// success, cancellation, timeout or interruption is `failed`.
pub fn outcome_name(outcome: i32) -> &'static str {
    match RunOutcome::try_from(outcome) {
        Ok(RunOutcome::Succeeded) => "succeeded",
        Ok(RunOutcome::Cancelled) => "cancelled",
        Ok(RunOutcome::TimedOut) => "timed_out",
        Ok(RunOutcome::Interrupted) => "interrupted",
        Ok(RunOutcome::Failed | RunOutcome::Unspecified) | Err(_) => "failed",
    }
}

/// The name of a result's `error_class` (an `ErrorClass` wire value); `None` when the
/// runner named none (unspecified) or one this build does not know.
pub fn error_class_name(class: i32) -> Option<&'static str> {
    Some(match ErrorClass::try_from(class).ok()? {
        ErrorClass::Transient => "transient",
        ErrorClass::Config => "config",
        ErrorClass::Provider => "provider",
        ErrorClass::StalePlan => "stale_plan",
        ErrorClass::Fenced => "fenced",
        ErrorClass::Cancelled => "cancelled",
        ErrorClass::TimedOut => "timed_out",
        ErrorClass::Interrupted => "interrupted",
        // The runner stopped tofu when it lost the attempt's lease: the state may be
        // incomplete, so this is never retried (not a transient class).
        ErrorClass::LeaseLost => "lease_lost",
        ErrorClass::Unspecified => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_class_has_its_own_name() {
        let names: Vec<_> = (0..=9).filter_map(error_class_name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(names.len(), 9, "{names:?}");
        assert_eq!(error_class_name(ErrorClass::Unspecified as i32), None);
        assert_eq!(error_class_name(9999), None);
        assert_eq!(
            error_class_name(ErrorClass::StalePlan as i32),
            Some("stale_plan")
        );
    }

    #[test]
    fn an_unknown_outcome_is_a_failure() {
        assert_eq!(outcome_name(RunOutcome::TimedOut as i32), "timed_out");
        assert_eq!(outcome_name(RunOutcome::Unspecified as i32), "failed");
        assert_eq!(outcome_name(9999), "failed");
    }
}
