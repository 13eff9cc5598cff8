//! Drift status of a resource: what the drift service's events say about it
//! (`instance.drift_detected` / `instance.drift_resolved`, payload `DriftChange`).
use super::named_enum;

named_enum! {
    /// A resource's drift status as an instance shows it.
    DriftStatus ("drift status") {
        Unknown = "unknown",
        InSync = "in_sync",
        DriftDetected = "drift_detected",
        CheckFailed = "check_failed",
    }
}

/// The status a drift event reports: the payload's `status` when it names one, else the
/// event type's; `None` for an event that is not about drift (or a status other than those
/// a check can find: "unknown" is never reported).
pub fn reported(event_type: &str, payload_status: &str) -> Option<DriftStatus> {
    match DriftStatus::parse(payload_status) {
        Ok(DriftStatus::Unknown) => None,
        Ok(status) => Some(status),
        Err(_) => match event_type {
            "drift_detected" => Some(DriftStatus::DriftDetected),
            "drift_resolved" => Some(DriftStatus::InSync),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_status_wins_then_the_event_type() {
        assert_eq!(
            reported("drift_detected", "drift_detected"),
            Some(DriftStatus::DriftDetected)
        );
        assert_eq!(
            reported("drift_resolved", "in_sync"),
            Some(DriftStatus::InSync)
        );
        assert_eq!(
            reported("drift_detected", "check_failed"),
            Some(DriftStatus::CheckFailed)
        );
        assert_eq!(reported("drift_resolved", ""), Some(DriftStatus::InSync));
        assert_eq!(reported("drift_detected", "unknown"), None);
        assert_eq!(reported("created", ""), None);
    }
}
