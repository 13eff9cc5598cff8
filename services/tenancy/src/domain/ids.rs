//! Identifiers, parsed once at the edge. Tenants, users and targets are entities every
//! service names, so their ids are the platform's (libs/contract); an API token's id is
//! tenancy's own (libs/contract has no kind for it).
use std::fmt;
use std::str::FromStr;

pub use cairn_contract::{InvalidId, TargetId, TenantId, UserId};
use uuid::Uuid;

/// The id of an API token (the `<id>` in `cairn_<id>_<secret>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenId(pub Uuid);

impl TokenId {
    /// Parses a request field; the error names the field.
    pub fn parse(field: &'static str, s: &str) -> Result<Self, InvalidId> {
        Uuid::from_str(s.trim())
            .map(TokenId)
            .map_err(|_| InvalidId { field })
    }
}

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
