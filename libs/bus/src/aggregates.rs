//! Whose events are whose: the aggregates of the domain events on `cairn.events.>` and the
//! one role that states each aggregate's events ([`OWNERS`]). Services build their events
//! with [`crate::new_event`], naming their own role and the [`Aggregate`]: an event of an
//! aggregate (or event type) the role does not own is refused there, before it reaches an
//! outbox. [`crate::permissions()`] grants each role the publish subjects of exactly what
//! it owns here (`cairn.events.*.<aggregate>.*`, or `cairn.events.*.<aggregate>.<event>`
//! per event type where an aggregate's events come from two services), so the server
//! refuses the rest.

use std::fmt;
use std::str::FromStr;

use crate::permissions::ServiceRole;

/// An aggregate whose events the bus carries: the subject's `<aggregate>` token
/// ([`Aggregate::name`]) and the event's `aggregate` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Aggregate {
    /// Tenancy: a tenant (`created`, `bootstrapped`).
    Tenant,
    /// Tenancy: the platform's service accounts (`token_created`).
    ServiceAccount,
    /// Tenancy: a user's membership of a tenant (`created`, `role_changed`, `deleted`).
    Membership,
    /// Tenancy: a user (`password_changed`).
    User,
    /// Tenancy: a login session (`login`).
    Session,
    /// Tenancy: an API token (`created`, `revoked`).
    ApiToken,
    /// A target: tenancy's changes, the runner's answer to a validation (`validated`).
    Target,
    /// Tenancy: a webhook subscription (`created`, `deleted`, `disabled`).
    Webhook,
    /// The state coordinator: a state (generations, recovery, locks, runs).
    State,
    /// An instance: deployments' changes, drift's verdicts (`drift_detected`,
    /// `drift_resolved`).
    Instance,
    /// Deployments: a deployment (`requested`, `approved`, `succeeded`, …).
    Deployment,
    /// Deployments: a resource a deployment applied or destroyed.
    Resource,
}

impl Aggregate {
    pub const ALL: [Aggregate; 12] = [
        Aggregate::Tenant,
        Aggregate::ServiceAccount,
        Aggregate::Membership,
        Aggregate::User,
        Aggregate::Session,
        Aggregate::ApiToken,
        Aggregate::Target,
        Aggregate::Webhook,
        Aggregate::State,
        Aggregate::Instance,
        Aggregate::Deployment,
        Aggregate::Resource,
    ];

    /// The subject token and the event's `aggregate` field.
    pub fn name(self) -> &'static str {
        match self {
            Aggregate::Tenant => "tenant",
            Aggregate::ServiceAccount => "service_account",
            Aggregate::Membership => "membership",
            Aggregate::User => "user",
            Aggregate::Session => "session",
            Aggregate::ApiToken => "api_token",
            Aggregate::Target => "target",
            Aggregate::Webhook => "webhook",
            Aggregate::State => "state",
            Aggregate::Instance => "instance",
            Aggregate::Deployment => "deployment",
            Aggregate::Resource => "resource",
        }
    }

    /// The role that states `event_type` of this aggregate, if any does.
    pub fn owner(self, event_type: &str) -> Option<ServiceRole> {
        OWNERS
            .iter()
            .find(|o| o.aggregate == self && o.events.covers(event_type))
            .map(|o| o.owner)
    }
}

impl fmt::Display for Aggregate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An aggregate name that is not one of [`Aggregate::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown event aggregate {0:?}")]
pub struct UnknownAggregate(pub String);

impl FromStr for Aggregate {
    type Err = UnknownAggregate;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Aggregate::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| UnknownAggregate(s.to_owned()))
    }
}

/// Which of an aggregate's event types an [`Owner`] entry covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventTypes {
    /// Every event type: the aggregate is one role's alone.
    Any,
    /// These event types only: the aggregate's events come from more than one role.
    Only(&'static [&'static str]),
}

impl EventTypes {
    /// Whether `event_type` is covered.
    pub fn covers(self, event_type: &str) -> bool {
        match self {
            EventTypes::Any => true,
            EventTypes::Only(types) => types.contains(&event_type),
        }
    }
}

/// One entry of [`OWNERS`]: `owner` alone states these events of `aggregate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub aggregate: Aggregate,
    pub events: EventTypes,
    pub owner: ServiceRole,
}

const fn any(aggregate: Aggregate, owner: ServiceRole) -> Owner {
    Owner {
        aggregate,
        events: EventTypes::Any,
        owner,
    }
}

const fn only(aggregate: Aggregate, events: &'static [&'static str], owner: ServiceRole) -> Owner {
    Owner {
        aggregate,
        events: EventTypes::Only(events),
        owner,
    }
}

/// Who states which events: every aggregate's events belong to exactly one role, or, for
/// an aggregate two services write about, each of its event types to exactly one (the unit
/// tests hold the table to that, and [`crate::permissions()`] to it).
pub const OWNERS: &[Owner] = &[
    any(Aggregate::Tenant, ServiceRole::Tenancy),
    any(Aggregate::ServiceAccount, ServiceRole::Tenancy),
    any(Aggregate::Membership, ServiceRole::Tenancy),
    any(Aggregate::User, ServiceRole::Tenancy),
    any(Aggregate::Session, ServiceRole::Tenancy),
    any(Aggregate::ApiToken, ServiceRole::Tenancy),
    only(
        Aggregate::Target,
        &["created", "updated", "deleted", "validation_requested"],
        ServiceRole::Tenancy,
    ),
    // The runner's answer to a target validation: the one event a runner states.
    only(Aggregate::Target, &["validated"], ServiceRole::Runner),
    any(Aggregate::Webhook, ServiceRole::Tenancy),
    any(Aggregate::State, ServiceRole::StateCoordinator),
    only(
        Aggregate::Instance,
        &["created", "updated", "deleted"],
        ServiceRole::Deployments,
    ),
    only(
        Aggregate::Instance,
        &["drift_detected", "drift_resolved"],
        ServiceRole::Drift,
    ),
    any(Aggregate::Deployment, ServiceRole::Deployments),
    any(Aggregate::Resource, ServiceRole::Deployments),
];

/// The entries of [`OWNERS`] that `role` owns.
pub fn owned_by(role: ServiceRole) -> impl Iterator<Item = &'static Owner> {
    OWNERS.iter().filter(move |o| o.owner == role)
}

/// The role that states events of `aggregate` (a name, as an event carries it) and
/// `event_type`; `None` for an aggregate or event type nobody states.
pub fn owner_of(aggregate: &str, event_type: &str) -> Option<ServiceRole> {
    aggregate
        .parse::<Aggregate>()
        .ok()
        .and_then(|a| a.owner(event_type))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_has_at_most_one_owner() {
        for aggregate in Aggregate::ALL {
            let entries: Vec<_> = OWNERS.iter().filter(|o| o.aggregate == aggregate).collect();
            assert!(!entries.is_empty(), "{aggregate} has no owner");
            if entries.iter().any(|o| o.events == EventTypes::Any) {
                assert_eq!(entries.len(), 1, "{aggregate}: `Any` next to other owners");
                continue;
            }
            let mut seen = std::collections::BTreeSet::new();
            for o in &entries {
                let EventTypes::Only(types) = o.events else {
                    unreachable!("checked above")
                };
                for t in types {
                    assert!(seen.insert(*t), "{aggregate}.{t} has two owners");
                }
            }
        }
    }

    #[test]
    fn owners_by_aggregate_and_event_type() {
        assert_eq!(owner_of("target", "validated"), Some(ServiceRole::Runner));
        assert_eq!(owner_of("target", "created"), Some(ServiceRole::Tenancy));
        assert_eq!(owner_of("target", "whatever"), None);
        assert_eq!(
            owner_of("instance", "drift_detected"),
            Some(ServiceRole::Drift)
        );
        assert_eq!(
            owner_of("instance", "updated"),
            Some(ServiceRole::Deployments)
        );
        assert_eq!(
            owner_of("state", "anything"),
            Some(ServiceRole::StateCoordinator)
        );
        assert_eq!(owner_of("run", "finished"), None);
        for a in Aggregate::ALL {
            assert_eq!(a.name().parse::<Aggregate>(), Ok(a));
        }
        assert_eq!(owned_by(ServiceRole::Admin).count(), 0);
    }
}
