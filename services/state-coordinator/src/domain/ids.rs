//! Identifier newtypes, parsed once at the edge.
use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

macro_rules! id_type {
    ($name:ident, $what:literal) => {
        #[doc = concat!("The id of a ", $what, ".")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub Uuid);

        impl $name {
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
            /// Parses a request field; the error names the field.
            pub fn parse(field: &'static str, s: &str) -> Result<Self, InvalidId> {
                Uuid::from_str(s.trim())
                    .map(Self)
                    .map_err(|_| InvalidId { field })
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(StateId, "state");
id_type!(RunId, "run");
id_type!(AttemptId, "run attempt");
id_type!(TenantId, "tenant");
id_type!(InstanceId, "instance");

/// A request field that is not a UUID.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{field} must be a UUID")]
pub struct InvalidId {
    pub field: &'static str,
}

/// The state key of a resource: `cairn/<physical-name>.tfstate`.
pub fn state_key(physical_name: &str) -> Result<String, InvalidPhysicalName> {
    let ok = !physical_name.is_empty()
        && physical_name.len() <= 200
        && physical_name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !physical_name.starts_with('-');
    if ok {
        Ok(format!("cairn/{physical_name}.tfstate"))
    } else {
        Err(InvalidPhysicalName)
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("physical_name must be 1-200 characters of [a-z0-9_-] not starting with '-'")]
pub struct InvalidPhysicalName;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys_are_confined() {
        assert_eq!(state_key("db-main").unwrap(), "cairn/db-main.tfstate");
        for bad in ["", "../x", "A", "a/b", "-x", "a b", "a.b"] {
            assert!(state_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ids_parse_with_the_field_name() {
        let err = StateId::parse("state_id", "nope").unwrap_err();
        assert_eq!(err.to_string(), "state_id must be a UUID");
    }
}
