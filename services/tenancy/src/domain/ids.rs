//! Identifier newtypes, parsed once at the edge.
use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

use super::Invalid;

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
            pub fn parse(field: &str, s: &str) -> Result<Self, Invalid> {
                Uuid::from_str(s.trim())
                    .map(Self)
                    .map_err(|_| Invalid(format!("{field} must be a UUID")))
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

id_type!(TenantId, "tenant");
id_type!(UserId, "user");
id_type!(TokenId, "API token");
id_type!(TargetId, "target");
id_type!(ServiceAccountId, "service account");
