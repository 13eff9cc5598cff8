//! Roles a principal can hold: the ordered user roles and the unordered service role.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a principal may do.
///
/// User roles are ordered `Viewer < Operator < Approver < Admin < Owner`. `Service` is a
/// service principal and stands outside that order: comparing it with a user role yields
/// `None` from [`PartialOrd::partial_cmp`], so `Role::Service >= Role::Viewer` is `false`.
/// This is why `Role` implements `PartialOrd` but deliberately not `Ord`: a total order
/// would have to rank `Service` somewhere among the user roles and grant it their rights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Viewer,
    Operator,
    Approver,
    Admin,
    Owner,
    /// A service account; has no tenant and none of the user roles.
    Service,
}

impl Role {
    /// Every role, user roles in ascending order followed by `Service`.
    pub const ALL: [Role; 6] = [
        Role::Viewer,
        Role::Operator,
        Role::Approver,
        Role::Admin,
        Role::Owner,
        Role::Service,
    ];

    /// The position of a user role in the order; `None` for `Service`.
    pub fn rank(self) -> Option<u8> {
        match self {
            Role::Viewer => Some(0),
            Role::Operator => Some(1),
            Role::Approver => Some(2),
            Role::Admin => Some(3),
            Role::Owner => Some(4),
            Role::Service => None,
        }
    }

    /// True for the service role.
    pub fn is_service(self) -> bool {
        self == Role::Service
    }

    /// Whether a principal holding `self` satisfies a requirement of `required`.
    ///
    /// A user role satisfies every user role at or below it; `Service` satisfies only
    /// `Service`, and no user role satisfies `Service`.
    pub fn satisfies(self, required: Role) -> bool {
        match (self.rank(), required.rank()) {
            (Some(held), Some(needed)) => held >= needed,
            (None, None) => true,
            (Some(_), None) | (None, Some(_)) => false,
        }
    }

    /// The lowercase wire name, e.g. `"approver"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Approver => "approver",
            Role::Admin => "admin",
            Role::Owner => "owner",
            Role::Service => "service",
        }
    }
}

impl PartialOrd for Role {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        match (self.rank(), other.rank()) {
            (Some(a), Some(b)) => Some(a.cmp(&b)),
            (None, None) => Some(Ordering::Equal),
            (Some(_), None) | (None, Some(_)) => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role name that is not one of the known roles.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role {0:?}")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|role| role.as_str() == s)
            .ok_or_else(|| UnknownRole(s.to_owned()))
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}
