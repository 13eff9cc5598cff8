//! What a run does, and the rules that follow from it.
use std::fmt;
use std::str::FromStr;

use crate::environment::Environment;

/// What a run does to its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunKind {
    /// Plan and save the plan for a later apply.
    Plan,
    /// Apply a saved plan (or, with none, plan and apply in one go).
    Apply,
    /// Destroy everything in the state.
    Destroy,
    /// A plan shown to a human, not saved, without locking.
    Preview,
    /// A plan looking for drift, not saved, without locking.
    Drift,
}

/// A run kind name that is not one of [`RunKind`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown run kind {0:?}")]
pub struct UnknownKind(pub String);

impl RunKind {
    /// Every kind.
    pub const ALL: [RunKind; 5] = [
        Self::Plan,
        Self::Apply,
        Self::Destroy,
        Self::Preview,
        Self::Drift,
    ];

    /// The stored and logged name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plan => "plan",
            Self::Apply => "apply",
            Self::Destroy => "destroy",
            Self::Preview => "preview",
            Self::Drift => "drift",
        }
    }

    /// Previews and drift scans get read-only run tokens: they may GET but never LOCK/POST.
    pub fn read_only(self) -> bool {
        matches!(self, Self::Preview | Self::Drift)
    }

    /// Runs that only plan (no apply step).
    pub fn is_plan_only(self) -> bool {
        matches!(self, Self::Plan | Self::Preview | Self::Drift)
    }

    /// Runs that may write state; blocked while the coordinator is in after-restore mode.
    pub fn changes_state(self) -> bool {
        matches!(self, Self::Apply | Self::Destroy)
    }

    /// Attempt 2+ of a production apply or of a destroy ends as interrupted without running
    /// tofu: the workflow decides what happens next (a production change needs a new
    /// approval).
    pub fn interrupts_on_retry(self, environment: &Environment) -> bool {
        match self {
            Self::Destroy => true,
            Self::Apply => environment.is_production(),
            Self::Plan | Self::Preview | Self::Drift => false,
        }
    }
}

impl fmt::Display for RunKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunKind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn retry_rules_use_the_one_production_rule() {
        let env = |n: &str| Environment::parse(n).unwrap();
        assert!(RunKind::Destroy.interrupts_on_retry(&env("dev")));
        for prod in ["production", "prod", "Production"] {
            assert!(RunKind::Apply.interrupts_on_retry(&env(prod)), "{prod}");
        }
        assert!(!RunKind::Apply.interrupts_on_retry(&env("staging")));
        assert!(!RunKind::Plan.interrupts_on_retry(&env("production")));
        assert!(RunKind::Drift.read_only() && RunKind::Preview.read_only());
        assert!(!RunKind::Plan.read_only());
    }

    #[test]
    fn kinds_round_trip() {
        for k in RunKind::ALL {
            assert_eq!(k.as_str().parse::<RunKind>().unwrap(), k);
        }
        assert!("nuke".parse::<RunKind>().is_err());
    }
}
