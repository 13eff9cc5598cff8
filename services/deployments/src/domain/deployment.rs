//! Deployments and steps: their kinds and statuses.
use super::InstanceStatus;
use super::named_enum;

named_enum!(
    /// What a deployment does.
    DeploymentKind("deployment kind") {
        Deploy = "deploy",
        Destroy = "destroy",
        Preview = "preview",
    }
);

impl DeploymentKind {
    /// The instance status while a deployment of this kind is active; `None` for a
    /// preview, which leaves the instance alone and takes no slot.
    pub fn instance_status(self) -> Option<InstanceStatus> {
        match self {
            DeploymentKind::Deploy => Some(InstanceStatus::Deploying),
            DeploymentKind::Destroy => Some(InstanceStatus::Destroying),
            DeploymentKind::Preview => None,
        }
    }
}

named_enum!(
    /// Where a deployment is.
    DeploymentStatus("deployment status") {
        Queued = "queued",
        Running = "running",
        AwaitingApproval = "awaiting_approval",
        Succeeded = "succeeded",
        Failed = "failed",
        Cancelled = "cancelled",
        Rejected = "rejected",
        Expired = "expired",
    }
);

impl DeploymentStatus {
    /// Still going (holds its instance unless it is a preview).
    pub fn is_active(self) -> bool {
        matches!(
            self,
            DeploymentStatus::Queued
                | DeploymentStatus::Running
                | DeploymentStatus::AwaitingApproval
        )
    }

    /// May be cancelled at once, without a worker: nothing of it has run yet.
    pub fn cancellable_at_once(self) -> bool {
        self == DeploymentStatus::Queued
    }
}

named_enum!(
    /// What a step does.
    StepKind("step kind") {
        Resolve = "resolve",
        Plan = "plan",
        Probe = "probe",
        Approval = "approval",
        Apply = "apply",
        Destroy = "destroy",
        Verify = "verify",
    }
);

named_enum!(
    /// Where a step is.
    StepStatus("step status") {
        Pending = "pending",
        Running = "running",
        Succeeded = "succeeded",
        Failed = "failed",
        Skipped = "skipped",
        Cancelled = "cancelled",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in DeploymentKind::ALL {
            assert_eq!(DeploymentKind::parse(k.as_str()), Ok(*k));
        }
        for s in DeploymentStatus::ALL {
            assert_eq!(DeploymentStatus::parse(s.as_str()), Ok(*s));
        }
        for k in StepKind::ALL {
            assert_eq!(StepKind::parse(k.as_str()), Ok(*k));
        }
        for s in StepStatus::ALL {
            assert_eq!(StepStatus::parse(s.as_str()), Ok(*s));
        }
    }

    #[test]
    fn active_and_cancellable() {
        assert!(DeploymentStatus::AwaitingApproval.is_active());
        assert!(!DeploymentStatus::Expired.is_active());
        assert!(DeploymentStatus::Queued.cancellable_at_once());
        assert!(!DeploymentStatus::Running.cancellable_at_once());
        assert!(!DeploymentStatus::AwaitingApproval.cancellable_at_once());
        assert_eq!(DeploymentKind::Preview.instance_status(), None);
    }
}
