//! Run kinds, outcomes and the rules that depend on them.
use std::fmt;
use std::str::FromStr;

/// What a run does to its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    Plan,
    Apply,
    Destroy,
    Preview,
    Drift,
}

impl RunKind {
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

    /// Runs that may write state; blocked while the coordinator is in after-restore mode.
    pub fn changes_state(self) -> bool {
        matches!(self, Self::Apply | Self::Destroy)
    }

    /// Attempt 2+ of a production apply or of a destroy ends as interrupted without running
    /// tofu: the workflow decides what happens next.
    pub fn interrupts_on_retry(self, environment: &str) -> bool {
        match self {
            Self::Destroy => true,
            Self::Apply => is_production(environment),
            Self::Plan | Self::Preview | Self::Drift => false,
        }
    }
}

/// Environments named `production` (or `prod`) get the strict rules.
pub fn is_production(environment: &str) -> bool {
    matches!(
        environment.to_ascii_lowercase().as_str(),
        "production" | "prod"
    )
}

impl fmt::Display for RunKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown run kind {0:?}")]
pub struct UnknownKind(pub String);

impl FromStr for RunKind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "plan" => Self::Plan,
            "apply" => Self::Apply,
            "destroy" => Self::Destroy,
            "preview" => Self::Preview,
            "drift" => Self::Drift,
            other => return Err(UnknownKind(other.to_owned())),
        })
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
    Cancelled,
    TimedOut,
    Interrupted,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::Interrupted => "interrupted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_rules() {
        assert!(RunKind::Destroy.interrupts_on_retry("dev"));
        assert!(RunKind::Apply.interrupts_on_retry("production"));
        assert!(!RunKind::Apply.interrupts_on_retry("staging"));
        assert!(!RunKind::Plan.interrupts_on_retry("production"));
        assert!(RunKind::Drift.read_only() && RunKind::Preview.read_only());
        assert!(!RunKind::Plan.read_only());
    }

    #[test]
    fn kinds_round_trip() {
        for k in [
            RunKind::Plan,
            RunKind::Apply,
            RunKind::Destroy,
            RunKind::Preview,
            RunKind::Drift,
        ] {
            assert_eq!(k.as_str().parse::<RunKind>().unwrap(), k);
        }
        assert!("nuke".parse::<RunKind>().is_err());
    }
}

/// The execution context of a run: references only, never credential values.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
pub struct ExecutionContext {
    pub tenant_id: String,
    pub target_id: String,
    pub target_settings: std::collections::BTreeMap<String, String>,
    pub credential_ref: String,
    pub sensitive_variable_refs: std::collections::BTreeMap<String, String>,
}
