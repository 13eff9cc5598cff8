//! Target validation: a request is pending until the runner serving the target answers it
//! (the role assumed and the session identified, or why not); only an AWS target can be
//! validated, and an answer counts only for the request it names (see the store's
//! compare-and-set).
use super::target::Provider;

/// Where a target's last validation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidationStatus {
    /// Queued for the target's runner; no answer yet.
    Pending,
    /// The role was assumed and the session identified.
    Succeeded,
    /// It was not.
    Failed,
}

impl ValidationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ValidationStatus::Pending => "pending",
            ValidationStatus::Succeeded => "succeeded",
            ValidationStatus::Failed => "failed",
        }
    }

    /// The stored word (the table's CHECK allows no other).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(ValidationStatus::Pending),
            "succeeded" => Some(ValidationStatus::Succeeded),
            "failed" => Some(ValidationStatus::Failed),
            _ => None,
        }
    }
}

/// A runner's answer to one validation request (never a credential).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationOutcome {
    pub ok: bool,
    pub account_id: String,
    pub arn: String,
    pub error: String,
    pub transient: bool,
    pub runner_instance: String,
}

impl ValidationOutcome {
    pub fn status(&self) -> ValidationStatus {
        if self.ok {
            ValidationStatus::Succeeded
        } else {
            ValidationStatus::Failed
        }
    }
}

/// The settings a validation checks: an AWS target's region and role. `None` for a target
/// that cannot be validated (a local directory has no role to assume).
pub fn validated_settings(provider: &Provider) -> Option<(&str, &str)> {
    match provider {
        Provider::Aws { region, role_arn } => Some((region, role_arn)),
        Provider::Local { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip() {
        for s in [
            ValidationStatus::Pending,
            ValidationStatus::Succeeded,
            ValidationStatus::Failed,
        ] {
            assert_eq!(ValidationStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(ValidationStatus::parse("ok"), None);
    }

    #[test]
    fn only_aws_targets_are_validated() {
        let aws = Provider::aws("eu-west-1", "arn:aws:iam::123456789012:role/r").unwrap();
        assert_eq!(
            validated_settings(&aws),
            Some(("eu-west-1", "arn:aws:iam::123456789012:role/r"))
        );
        assert_eq!(validated_settings(&Provider::local("/srv").unwrap()), None);
    }
}
