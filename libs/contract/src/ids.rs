//! Identifier newtypes: one type per entity, so a run id can never be passed where a state
//! id is expected. Parsed once at the edge ([`StateId::parse`] names the request field in
//! its error); inside, code carries the typed value.
use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

/// Parses an optional id field: empty is `None`, anything else must be a UUID.
pub fn parse_optional<T: From<Uuid>>(field: &'static str, s: &str) -> Result<Option<T>, InvalidId> {
    if s.trim().is_empty() {
        return Ok(None);
    }
    Uuid::from_str(s.trim())
        .map(|u| Some(T::from(u)))
        .map_err(|_| InvalidId { field })
}

/// A request field that is not a UUID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} must be a UUID")]
pub struct InvalidId {
    /// The field (or setting) that held it.
    pub field: &'static str,
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A new, time-ordered id (UUID v7).
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            /// Parses a request field; the error names the field.
            pub fn parse(field: &'static str, s: &str) -> Result<Self, InvalidId> {
                Uuid::from_str(s.trim()).map(Self).map_err(|_| InvalidId { field })
            }

            /// The UUID (for SQL binds and wire formats).
            pub const fn uuid(self) -> Uuid {
                self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Uuid {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// The id of a tenant.
    TenantId
);
id_type!(
    /// The id of a user.
    UserId
);
id_type!(
    /// The id of a target (a cloud account or a local directory).
    TargetId
);
id_type!(
    /// The id of a template.
    TemplateId
);
id_type!(
    /// The id of an instance (a deployed template).
    InstanceId
);
id_type!(
    /// The id of a deployment of an instance.
    DeploymentId
);
id_type!(
    /// The id of an immutable ResolvedInfrastructure snapshot.
    SnapshotId
);
id_type!(
    /// The id of an OpenTofu state.
    StateId
);
id_type!(
    /// The id of a run (one tofu operation on one state).
    RunId
);
id_type!(
    /// The id of one attempt of a run.
    AttemptId
);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ids_parse_with_the_field_name_and_round_trip() {
        let err = StateId::parse("state_id", "nope").unwrap_err();
        assert_eq!(err.to_string(), "state_id must be a UUID");
        let run = RunId::new();
        assert_eq!(RunId::parse("run_id", &format!(" {run} ")).unwrap(), run);
        let json = serde_json::to_string(&run).unwrap();
        assert_eq!(json, format!("\"{run}\""));
        assert_eq!(serde_json::from_str::<RunId>(&json).unwrap(), run);
    }
}
