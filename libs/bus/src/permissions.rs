//! Who may publish and subscribe to what (ARCHITECTURE §3, §9): one NATS user per service
//! role, its allow lists derived here from a [`Namespace`], and the nats-server configuration
//! that grants them ([`server_config`]). Everything not allowed is refused by the server.
//!
//! The matrix, from what each service does on the bus:
//!
//! | role | publishes | consumes (durable pull consumers) | core NATS |
//! |---|---|---|---|
//! | tenancy | its events, `cairn.runq.*.validate` (target validation requests) | `CAIRN_EVENTS` (audit, webhooks) | — |
//! | state-coordinator | its events | — | — |
//! | runner | `cairn.runres.*`, `cairn.runlog.*`, its one event `target.validated` | `CAIRN_RUNQ` | subscribes `cairn.runctl.*` |
//! | deployments | its events, `cairn.runq.*` (run requests), `cairn.deployq` | `CAIRN_DEPLOYQ`, `CAIRN_RUNRES`, `CAIRN_RUNLOG`, `CAIRN_EVENTS` | publishes `cairn.runctl.*` |
//! | drift | its events, `cairn.runq.*` (run requests) | `CAIRN_EVENTS`, `CAIRN_RUNRES` | — |
//! | admin | the JetStream API (`$JS.API.>`): creates, updates and deletes streams | — | — |
//!
//! "Its events" are the aggregates (or, where two services write about one aggregate, the
//! event types) [`crate::aggregates::OWNERS`] gives the role: `cairn.events.*.<aggregate>.*`
//! each, or `cairn.events.*.<aggregate>.<event>`. A run request is `cairn.runq.<target>` and
//! a validation request `cairn.runq.<target>.validate`, so `cairn.runq.*` grants the first
//! only. Templates uses no NATS and has no user. Besides its subjects, a role may ask for the
//! stream info of the streams it uses (the start-up check), create and pull from
//! consumers of the streams it consumes (`$JS.API.CONSUMER.{CREATE,MSG.NEXT}.<stream>.…`)
//! and acknowledge their messages (`$JS.ACK.<stream>.>`); replies come to an inbox of its
//! own ([`ServiceRole::inbox_prefix`]), so no service reads another's replies or pulled
//! messages. Only admin may create, update, purge or delete streams.

use std::fmt;
use std::str::FromStr;

use crate::aggregates::{self, EventTypes};
use crate::subjects::{Namespace, StreamKind};

/// A NATS user of the platform: one per service that uses the bus, and the admin that sets
/// up the streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServiceRole {
    Tenancy,
    StateCoordinator,
    Runner,
    Deployments,
    Drift,
    /// Creates and updates the streams (`cairn-tenancy nats setup`); no service runs as it.
    Admin,
}

/// A role name that is not one of [`ServiceRole::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown NATS role {0:?} (one of: tenancy, state-coordinator, runner, deployments, drift, admin)"
)]
pub struct UnknownRole(pub String);

impl ServiceRole {
    pub const ALL: [ServiceRole; 6] = [
        ServiceRole::Tenancy,
        ServiceRole::StateCoordinator,
        ServiceRole::Runner,
        ServiceRole::Deployments,
        ServiceRole::Drift,
        ServiceRole::Admin,
    ];

    /// The role's name: the service's name (file names, the user's comment in the config).
    pub fn name(self) -> &'static str {
        match self {
            ServiceRole::Tenancy => "tenancy",
            ServiceRole::StateCoordinator => "state-coordinator",
            ServiceRole::Runner => "runner",
            ServiceRole::Deployments => "deployments",
            ServiceRole::Drift => "drift",
            ServiceRole::Admin => "admin",
        }
    }

    /// The inbox prefix the role's connection uses and alone may subscribe to
    /// (`_INBOX_<role>`): request replies, publish acknowledgements and pulled messages.
    pub fn inbox_prefix(self) -> String {
        format!("_INBOX_{}", self.name())
    }

    /// The streams the role publishes to or consumes from: what its start-up check asks for.
    pub fn streams(self) -> &'static [StreamKind] {
        match self {
            ServiceRole::Tenancy => &[StreamKind::Events, StreamKind::RunQ],
            ServiceRole::StateCoordinator => &[StreamKind::Events],
            ServiceRole::Runner => &[
                StreamKind::RunQ,
                StreamKind::RunRes,
                StreamKind::RunLog,
                StreamKind::Events,
            ],
            ServiceRole::Deployments => &StreamKind::ALL,
            ServiceRole::Drift => &[StreamKind::Events, StreamKind::RunQ, StreamKind::RunRes],
            ServiceRole::Admin => &StreamKind::ALL,
        }
    }

    /// The streams the role has durable consumers on.
    fn consumes(self) -> &'static [StreamKind] {
        match self {
            ServiceRole::Tenancy => &[StreamKind::Events],
            ServiceRole::StateCoordinator | ServiceRole::Admin => &[],
            ServiceRole::Runner => &[StreamKind::RunQ],
            ServiceRole::Deployments => &[
                StreamKind::DeployQ,
                StreamKind::RunRes,
                StreamKind::RunLog,
                StreamKind::Events,
            ],
            ServiceRole::Drift => &[StreamKind::Events, StreamKind::RunRes],
        }
    }
}

impl fmt::Display for ServiceRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ServiceRole {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ServiceRole::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| UnknownRole(s.to_owned()))
    }
}

/// The subjects a user may publish to and subscribe to (NATS wildcards allowed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permissions {
    pub publish: Vec<String>,
    pub subscribe: Vec<String>,
}

/// The JetStream API prefix.
const API: &str = "$JS.API";

/// What `role` may do in `ns`.
pub fn permissions(role: ServiceRole, ns: &Namespace) -> Permissions {
    let mut p = Permissions::default();
    let stream_subject = |kind| ns.stream_subject(kind);
    if role == ServiceRole::Admin {
        p.publish.push(format!("{API}.>"));
    } else {
        for kind in role.streams() {
            p.publish
                .push(format!("{API}.STREAM.INFO.{}", ns.stream_name(*kind)));
        }
    }
    for kind in role.consumes() {
        let stream = ns.stream_name(*kind);
        for op in ["CONSUMER.CREATE", "CONSUMER.MSG.NEXT"] {
            p.publish.push(format!("{API}.{op}.{stream}.>"));
        }
        p.publish.push(format!("$JS.ACK.{stream}.>"));
    }
    p.publish.extend(event_subjects(role, ns));
    match role {
        ServiceRole::Tenancy => p.publish.push(ns.runq_validate_filter()),
        ServiceRole::StateCoordinator | ServiceRole::Admin => {}
        ServiceRole::Runner => {
            p.publish.extend([
                stream_subject(StreamKind::RunRes),
                stream_subject(StreamKind::RunLog),
            ]);
            p.subscribe.push(ns.runctl_filter());
        }
        ServiceRole::Deployments => p.publish.extend([
            ns.runq_filter(),
            stream_subject(StreamKind::DeployQ),
            ns.runctl_filter(),
        ]),
        ServiceRole::Drift => p.publish.push(ns.runq_filter()),
    }
    p.subscribe.push(format!("{}.>", role.inbox_prefix()));
    p
}

/// The event subjects `role` may publish: one filter per aggregate it owns, or per event type
/// where it owns some of an aggregate's types ([`aggregates::OWNERS`]).
fn event_subjects(role: ServiceRole, ns: &Namespace) -> Vec<String> {
    let filter = |aggregate: &str, event: Option<&str>| {
        ns.events_filter(None, Some(aggregate), event)
            .expect("aggregate names and event types are valid tokens")
    };
    aggregates::owned_by(role)
        .flat_map(|o| match o.events {
            EventTypes::Any => vec![filter(o.aggregate.name(), None)],
            EventTypes::Only(types) => types
                .iter()
                .map(|t| filter(o.aggregate.name(), Some(t)))
                .collect(),
        })
        .collect()
}

/// A user of the server configuration: its role and its public nkey (`U…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsUser {
    pub role: ServiceRole,
    pub public_key: String,
}

/// The account every Cairn user belongs to (JetStream enabled).
pub const ACCOUNT: &str = "CAIRN";

/// A nats-server configuration (include it, or pass it with `-c`; listen address, port and
/// JetStream store stay on the command line or in the including file) with account
/// [`ACCOUNT`] and one nkey user per entry of `users`, each with [`permissions`] in `ns`.
pub fn server_config(ns: &Namespace, users: &[NatsUser]) -> String {
    let list = |subjects: &[String]| {
        subjects
            .iter()
            .map(|s| quote(s))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::from(
        "# Cairn's NATS users and their permissions (generated by `cairn-tenancy nats \
         credentials`; regenerate it rather than edit it).\n",
    );
    out.push_str(&format!(
        "accounts {{\n  {ACCOUNT} {{\n    jetstream: enabled\n    users: [\n"
    ));
    for user in users {
        let p = permissions(user.role, ns);
        out.push_str(&format!(
            "      # {role}\n      {{\n        nkey: {key}\n        permissions: {{\n          \
             publish: {{ allow: [{publish}] }}\n          subscribe: {{ allow: [{subscribe}] }}\n        \
             }}\n      }}\n",
            role = user.role,
            key = quote(&user.public_key),
            publish = list(&p.publish),
            subscribe = list(&p.subscribe),
        ));
    }
    out.push_str("    ]\n  }\n}\n");
    out
}

/// A double-quoted string of the configuration format: quoted, `$` is not a variable
/// reference. Subjects and nkeys hold neither quotes nor backslashes.
fn quote(s: &str) -> String {
    debug_assert!(!s.contains(['"', '\\']), "{s:?} needs escaping");
    format!("\"{s}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(patterns: &[String], subject: &str) -> bool {
        patterns.iter().any(|p| matches(p, subject))
    }

    /// NATS wildcard matching of a literal subject.
    fn matches(pattern: &str, subject: &str) -> bool {
        let mut s = subject.split('.');
        for token in pattern.split('.') {
            match (token, s.next()) {
                (">", Some(_)) => return true,
                ("*", Some(_)) => {}
                (t, Some(x)) if t == x => {}
                _ => return false,
            }
        }
        s.next().is_none()
    }

    #[test]
    fn the_matrix_follows_the_architecture() {
        let ns = Namespace::root();
        let p = |r| permissions(r, &ns);
        let runner = p(ServiceRole::Runner);
        assert!(allows(&runner.publish, "cairn.runres.r1"));
        assert!(allows(&runner.publish, "cairn.runlog.r1"));
        assert!(allows(&runner.publish, "cairn.events.t1.target.validated"));
        assert!(!allows(&runner.publish, "cairn.events.t1.state.recovered"));
        assert!(!allows(&runner.publish, "cairn.runq.t"));
        assert!(!allows(&runner.publish, "cairn.runq.t.validate"));
        assert!(allows(&runner.subscribe, "cairn.runctl.r1"));
        assert!(allows(
            &runner.publish,
            "$JS.API.CONSUMER.MSG.NEXT.CAIRN_RUNQ.runner-t"
        ));
        assert!(!allows(
            &runner.publish,
            "$JS.API.CONSUMER.MSG.NEXT.CAIRN_EVENTS.x"
        ));
        let coordinator = p(ServiceRole::StateCoordinator);
        assert!(allows(&coordinator.publish, "cairn.events._.state.fenced"));
        assert!(!allows(&coordinator.publish, "cairn.runq.t"));
        assert!(!allows(
            &coordinator.publish,
            "cairn.events.t1.deployment.requested"
        ));
        assert!(!allows(&p(ServiceRole::Drift).publish, "cairn.deployq"));
        assert!(!allows(
            &p(ServiceRole::Drift).publish,
            "cairn.events.t1.state.recovered"
        ));
        // Run requests are the run-requesting services'; validation requests tenancy's.
        let tenancy = p(ServiceRole::Tenancy);
        assert!(allows(&tenancy.publish, "cairn.runq.t.validate"));
        assert!(!allows(&tenancy.publish, "cairn.runq.t"));
        for role in [ServiceRole::Deployments, ServiceRole::Drift] {
            assert!(allows(&p(role).publish, "cairn.runq.t"), "{role}");
            assert!(!allows(&p(role).publish, "cairn.runq.t.validate"), "{role}");
        }
        assert!(allows(
            &p(ServiceRole::Deployments).publish,
            "cairn.runctl.r1"
        ));
        for role in ServiceRole::ALL {
            let perms = p(role);
            let admin = role == ServiceRole::Admin;
            for op in [
                "STREAM.CREATE",
                "STREAM.UPDATE",
                "STREAM.DELETE",
                "STREAM.PURGE",
            ] {
                let subject = format!("$JS.API.{op}.CAIRN_EVENTS");
                assert_eq!(allows(&perms.publish, &subject), admin, "{role} {op}");
            }
            assert!(allows(&perms.subscribe, &format!("_INBOX_{role}.x.y")));
            assert!(!allows(&perms.subscribe, "_INBOX.x.y"), "{role}");
            assert!(!allows(&perms.publish, "_INBOX.x"), "{role}");
        }
    }

    /// Every role may publish exactly the events the aggregate table gives it: a service that
    /// states an event its role may not publish fails here (and is refused by `new_event`).
    #[test]
    fn each_role_publishes_the_events_it_owns_and_no_others() {
        let ns = Namespace::root();
        let perms: Vec<_> = ServiceRole::ALL
            .into_iter()
            .map(|r| (r, permissions(r, &ns)))
            .collect();
        for owner in aggregates::OWNERS {
            let types: &[&str] = match owner.events {
                EventTypes::Any => &["created", "some_new_event"],
                EventTypes::Only(types) => types,
            };
            for t in types {
                for tenant in ["t1", crate::NO_TENANT] {
                    let subject = ns
                        .events_subject(tenant, owner.aggregate.name(), t)
                        .expect("valid tokens");
                    for (role, p) in &perms {
                        let may = *role == owner.owner;
                        assert_eq!(allows(&p.publish, &subject), may, "{role} {subject}");
                    }
                    assert_eq!(owner.aggregate.owner(t), Some(owner.owner), "{subject}");
                }
            }
        }
        // An aggregate or event type nobody owns is nobody's to publish.
        for subject in [
            "cairn.events.t1.run.finished",
            "cairn.events.t1.target.something_else",
            "cairn.events.t1.instance.renamed",
        ] {
            for (role, p) in &perms {
                assert!(!allows(&p.publish, subject), "{role} {subject}");
            }
        }
    }

    #[test]
    fn a_prefix_applies_to_subjects_and_streams() {
        let ns = Namespace::with_prefix("t1").expect("valid prefix");
        let runner = permissions(ServiceRole::Runner, &ns);
        assert!(allows(&runner.publish, "t1.cairn.runres.r1"));
        assert!(!allows(&runner.publish, "cairn.runres.r1"));
        assert!(allows(&runner.publish, "$JS.API.STREAM.INFO.T1_CAIRN_RUNQ"));
        assert!(allows(&runner.publish, "$JS.ACK.T1_CAIRN_RUNQ.c.1.2.3.4.5"));
        assert!(allows(
            &runner.publish,
            "t1.cairn.events.x.target.validated"
        ));
        assert!(!allows(&runner.publish, "cairn.events.x.target.validated"));
        let tenancy = permissions(ServiceRole::Tenancy, &ns);
        assert!(allows(&tenancy.publish, "t1.cairn.runq.x.validate"));
        assert!(allows(&tenancy.publish, "t1.cairn.events.x.tenant.created"));
        assert!(!allows(&tenancy.publish, "cairn.runq.x.validate"));
    }

    #[test]
    fn roles_parse_by_name() {
        for role in ServiceRole::ALL {
            assert_eq!(role.name().parse::<ServiceRole>(), Ok(role));
        }
        assert!("templates".parse::<ServiceRole>().is_err());
    }

    #[test]
    fn the_server_config_quotes_subjects() {
        let config = server_config(
            &Namespace::root(),
            &[NatsUser {
                role: ServiceRole::Runner,
                public_key: "UABC".into(),
            }],
        );
        assert!(config.contains("nkey: \"UABC\""), "{config}");
        assert!(config.contains("\"$JS.ACK.CAIRN_RUNQ.>\""), "{config}");
        assert!(config.contains("jetstream: enabled"), "{config}");
    }
}
