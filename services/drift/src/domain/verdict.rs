//! What a scan's result means: discarded (it raced a deployment or a newer apply), or the
//! resource's new status, and whether that is news (a new or changed finding, or drift
//! resolved). A resource that stays drifted the same way alerts once.
use cairn_tofu::drift::{fingerprint, summary};
use cairn_tofu::{DriftFinding, IgnoreRule, apply_ignore_rules};

/// A resource's drift status (the `status` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Unknown,
    InSync,
    DriftDetected,
    CheckFailed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Unknown => "unknown",
            Status::InSync => "in_sync",
            Status::DriftDetected => "drift_detected",
            Status::CheckFailed => "check_failed",
        }
    }

    pub fn parse(s: &str) -> Status {
        match s {
            "in_sync" => Status::InSync,
            "drift_detected" => Status::DriftDetected,
            "check_failed" => Status::CheckFailed,
            _ => Status::Unknown,
        }
    }

    /// Worse statuses outrank better ones in an instance's summary status.
    pub fn severity(self) -> u8 {
        match self {
            Status::InSync => 0,
            Status::Unknown => 1,
            Status::CheckFailed => 2,
            Status::DriftDetected => 3,
        }
    }
}

/// What the scan was made against, and what holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The instance's deployment counter.
    pub deployments: i64,
    /// The resource's last applied run.
    pub applied_run_id: uuid::Uuid,
}

/// Why a result is thrown away instead of changing the resource's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discard {
    /// A deployment of the instance was requested after the scan was (or is in progress).
    DeploymentStarted,
    /// The coordinator says a state-changing run of the resource's state was registered,
    /// admitted or live, or a generation committed, since the scan was registered (a
    /// deployment whose `deployment.requested` has not reached drift yet).
    StateChanged,
    /// The resource was applied again since: the scan planned an old config.
    AppliedSince,
    /// The resource is no longer tracked (destroyed).
    Untracked,
}

impl Discard {
    pub fn as_str(self) -> &'static str {
        match self {
            Discard::DeploymentStarted => "a deployment of the instance started meanwhile",
            Discard::StateChanged => "its state was being changed meanwhile",
            Discard::AppliedSince => "the resource was applied again meanwhile",
            Discard::Untracked => "the resource is no longer tracked",
        }
    }
}

/// Whether a result for a scan made against `at_claim` still counts now; `state_changed` is
/// the coordinator's answer for the scan's run.
pub fn discard(
    at_claim: &Fence,
    now: Option<&Fence>,
    deployment_in_progress: bool,
    state_changed: bool,
) -> Option<Discard> {
    let Some(now) = now else {
        return Some(Discard::Untracked);
    };
    if deployment_in_progress || now.deployments != at_claim.deployments {
        return Some(Discard::DeploymentStarted);
    }
    if state_changed {
        return Some(Discard::StateChanged);
    }
    if now.applied_run_id != at_claim.applied_run_id {
        return Some(Discard::AppliedSince);
    }
    None
}

/// How the scan's run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The plan ran; its findings (before ignore rules).
    Planned(Vec<DriftFinding>),
    /// It failed; the run's error class and message.
    Failed { class: String, message: String },
}

/// The resource's new status and what to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub status: Status,
    /// The findings after the ignore rules (empty unless drift was found).
    pub findings: Vec<DriftFinding>,
    pub fingerprint: String,
    pub summary: String,
    pub error_class: String,
    pub message: String,
    pub news: News,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum News {
    /// Nothing to report (same drift as before, still in sync, a failed check).
    None,
    /// New drift, or drift different from the last finding: a new finding and an event.
    Detected,
    /// Drifted before, in sync now: the finding resolved and an event.
    Resolved,
}

/// The verdict of a counted result. `previous_fingerprint` is the resource's last finding's
/// (empty when it had none open).
pub fn verdict(ending: Ending, rules: &[IgnoreRule], previous_fingerprint: &str) -> Verdict {
    match ending {
        Ending::Failed { class, message } => Verdict {
            status: Status::CheckFailed,
            findings: Vec::new(),
            // A failed check neither opens nor resolves anything.
            fingerprint: previous_fingerprint.to_owned(),
            summary: String::new(),
            error_class: if class.is_empty() {
                "unspecified".to_owned()
            } else {
                class
            },
            message,
            news: News::None,
        },
        Ending::Planned(found) => {
            let findings = apply_ignore_rules(&found, rules);
            let print = fingerprint(&findings);
            let (status, news) = if findings.is_empty() {
                let news = if previous_fingerprint.is_empty() {
                    News::None
                } else {
                    News::Resolved
                };
                (Status::InSync, news)
            } else if print == previous_fingerprint {
                (Status::DriftDetected, News::None)
            } else {
                (Status::DriftDetected, News::Detected)
            };
            Verdict {
                status,
                summary: summary(&findings),
                findings,
                fingerprint: print,
                error_class: String::new(),
                message: String::new(),
                news,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use cairn_tofu::DriftAction;

    use super::*;

    fn gone(address: &str) -> DriftFinding {
        DriftFinding {
            address: address.into(),
            action: DriftAction::Delete,
            attributes: vec![],
            relevant: vec![],
        }
    }

    #[test]
    fn the_same_drift_alerts_once_and_its_end_is_news() {
        let first = verdict(Ending::Planned(vec![gone("a.b")]), &[], "");
        assert_eq!(
            (first.status, first.news),
            (Status::DriftDetected, News::Detected)
        );
        let again = verdict(Ending::Planned(vec![gone("a.b")]), &[], &first.fingerprint);
        assert_eq!(
            (again.status, again.news),
            (Status::DriftDetected, News::None)
        );
        let more = verdict(
            Ending::Planned(vec![gone("a.b"), gone("c.d")]),
            &[],
            &first.fingerprint,
        );
        assert_eq!(more.news, News::Detected);
        let fixed = verdict(Ending::Planned(vec![]), &[], &first.fingerprint);
        assert_eq!((fixed.status, fixed.news), (Status::InSync, News::Resolved));
        let clean = verdict(Ending::Planned(vec![]), &[], "");
        assert_eq!((clean.status, clean.news), (Status::InSync, News::None));
    }

    #[test]
    fn ignored_noise_is_in_sync_and_a_failure_keeps_the_finding() {
        let tag = DriftFinding {
            address: "a.b".into(),
            action: DriftAction::Update,
            attributes: vec!["tags.LastSeen".into()],
            relevant: vec![],
        };
        let rules = vec![IgnoreRule::parse("tags.LastSeen").unwrap()];
        let v = verdict(Ending::Planned(vec![tag]), &rules, "");
        assert_eq!((v.status, v.news), (Status::InSync, News::None));
        let failed = verdict(
            Ending::Failed {
                class: "transient".into(),
                message: "x".into(),
            },
            &[],
            "abc",
        );
        assert_eq!(failed.status, Status::CheckFailed);
        assert_eq!(failed.fingerprint, "abc");
        assert_eq!(failed.news, News::None);
    }

    #[test]
    fn results_that_raced_a_deployment_or_an_apply_are_discarded() {
        let run = uuid::Uuid::new_v4();
        let claim = Fence {
            deployments: 3,
            applied_run_id: run,
        };
        assert_eq!(discard(&claim, Some(&claim.clone()), false, false), None);
        assert_eq!(
            discard(&claim, Some(&claim.clone()), true, false),
            Some(Discard::DeploymentStarted)
        );
        let later = Fence {
            deployments: 4,
            ..claim.clone()
        };
        assert_eq!(
            discard(&claim, Some(&later), false, false),
            Some(Discard::DeploymentStarted)
        );
        let reapplied = Fence {
            applied_run_id: uuid::Uuid::new_v4(),
            ..claim.clone()
        };
        assert_eq!(
            discard(&claim, Some(&reapplied), false, false),
            Some(Discard::AppliedSince)
        );
        assert_eq!(
            discard(&claim, None, false, false),
            Some(Discard::Untracked)
        );
        // The coordinator's word, when the events have not told drift anything yet.
        assert_eq!(
            discard(&claim, Some(&claim.clone()), false, true),
            Some(Discard::StateChanged)
        );
    }
}
