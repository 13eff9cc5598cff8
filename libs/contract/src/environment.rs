//! Environments: the canonical name and the one production rule.
//!
//! An instance's environment is normalised once, when it is created ([`Environment::parse`]),
//! and every part — the coordinator's retry rule, the runner's stale-plan rule, the
//! templates' per-environment overrides, the workflow's approvals — compares the normalised
//! name. `Production`, `PROD` and `prod` are all `production`.
use std::fmt;

/// The canonical name of the production environment.
pub const PRODUCTION: &str = "production";

/// Names that mean production, compared after lower-casing.
const PRODUCTION_ALIASES: &[&str] = &["production", "prod"];

/// Longest environment name.
pub const MAX_LEN: usize = 63;

/// A normalised environment name: lower-case `[a-z0-9_-]`, starting with a letter, with the
/// aliases of production folded into [`PRODUCTION`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Environment(String);

/// An environment name that cannot be normalised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "environment {0:?} must be 1-63 characters of [a-z0-9_-] starting with a letter (case is ignored)"
)]
pub struct InvalidEnvironment(pub String);

impl Environment {
    /// Normalises a name given by a user or a stored row.
    pub fn parse(name: &str) -> Result<Self, InvalidEnvironment> {
        let lower = name.trim().to_ascii_lowercase();
        let ok = !lower.is_empty()
            && lower.len() <= MAX_LEN
            && lower.as_bytes()[0].is_ascii_lowercase()
            && lower
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !ok {
            return Err(InvalidEnvironment(name.to_owned()));
        }
        if PRODUCTION_ALIASES.contains(&lower.as_str()) {
            return Ok(Self(PRODUCTION.to_owned()));
        }
        Ok(Self(lower))
    }

    /// The production environment.
    pub fn production() -> Self {
        Self(PRODUCTION.to_owned())
    }

    /// The strict rules apply: stale saved plans fail instead of planning again, a crashed
    /// apply is not retried, high-risk changes wait for an approval.
    pub fn is_production(&self) -> bool {
        self.0 == PRODUCTION
    }

    /// The canonical name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The production rule for a name that may not have been normalised (a stored row, a
/// request): the name is normalised first, and a name that cannot be is not production.
pub fn is_production(name: &str) -> bool {
    Environment::parse(name).is_ok_and(|e| e.is_production())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn aliases_and_case_fold_into_production() {
        for name in ["production", "Production", "PROD", "prod", " prod "] {
            let env = Environment::parse(name).unwrap();
            assert_eq!(env.as_str(), "production", "{name}");
            assert!(env.is_production() && is_production(name), "{name}");
        }
        for name in [
            "staging",
            "Dev",
            "preprod",
            "pre_prod",
            "production-eu",
            "prod2",
        ] {
            assert!(!is_production(name), "{name}");
        }
        assert_eq!(Environment::parse("Staging").unwrap().as_str(), "staging");
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in ["", "1prod", "a b", "a/b", "ünicode", &"x".repeat(64)] {
            assert!(Environment::parse(bad).is_err(), "{bad:?}");
            assert!(!is_production(bad));
        }
    }
}
