//! The event types a subscription may name: `<aggregate>.<event>` of the domain events on
//! `cairn.events.>` that mean something to a tenant. `ping` is sent by the Test RPC only.
use super::super::Invalid;

/// Every type a subscription may name.
pub const KNOWN: &[&str] = &[
    "deployment.requested",
    "deployment.awaiting_approval",
    "deployment.approved",
    "deployment.rejected",
    "deployment.succeeded",
    "deployment.failed",
    "deployment.expired",
    "deployment.cancelled",
    "instance.created",
    "instance.updated",
    "instance.deleted",
    "instance.drift_detected",
    "instance.drift_resolved",
    "resource.applied",
    "resource.destroyed",
    "state.recovery_required",
    "state.recovered",
    "state.lock_forced",
    "target.validated",
    "webhook.disabled",
];

/// The type of the Test RPC's delivery (not subscribable: every subscription receives it).
pub const PING: &str = "ping";

/// Most event types one subscription may name (the known list, each once).
pub const MAX_PER_SUBSCRIPTION: usize = KNOWN.len();

/// A known event type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventType(&'static str);

impl EventType {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        KNOWN
            .iter()
            .find(|k| **k == s.trim())
            .map(|k| EventType(k))
            .ok_or_else(|| {
                Invalid::new(format!(
                    "unknown event type {s:?}; known: {}",
                    KNOWN.join(", ")
                ))
            })
    }

    /// The request's list: at least one, each known, duplicates removed, sorted.
    pub fn parse_list(items: &[String]) -> Result<Vec<EventType>, Invalid> {
        if items.is_empty() {
            return Err(Invalid::new(
                "event_types must name at least one event type",
            ));
        }
        let mut out = items
            .iter()
            .map(|s| EventType::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        out.sort();
        out.dedup();
        Ok(out)
    }

    pub fn as_str(&self) -> &'static str {
        self.0
    }
}

/// The webhook type of a domain event (`<aggregate>.<event>`).
pub fn of_event(aggregate: &str, event_type: &str) -> String {
    format!("{aggregate}.{event_type}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subscribable type is an event some service states (`cairn_bus::OWNERS`), so a
    /// webhook can receive it.
    #[test]
    fn every_known_type_has_a_publisher() {
        for known in KNOWN {
            let (aggregate, event) = known.split_once('.').unwrap();
            assert!(
                cairn_bus::owner_of(aggregate, event).is_some(),
                "{known}: no service states it"
            );
        }
    }

    #[test]
    fn known_types_parse_and_others_are_refused() {
        assert_eq!(
            EventType::parse("deployment.succeeded").unwrap().as_str(),
            "deployment.succeeded"
        );
        assert!(EventType::parse("instance.drift_detected").is_ok());
        let err = EventType::parse("deployment.*").unwrap_err();
        assert!(err.0.contains("known: deployment.requested"), "{err}");
        assert!(EventType::parse(PING).is_err(), "ping is not subscribable");
        assert!(EventType::parse_list(&[]).is_err());
        let list = EventType::parse_list(&[
            "deployment.failed".into(),
            "deployment.failed".into(),
            "deployment.awaiting_approval".into(),
        ])
        .unwrap();
        let names: Vec<_> = list.iter().map(EventType::as_str).collect();
        assert_eq!(names, ["deployment.awaiting_approval", "deployment.failed"]);
    }
}
