//! The step list a deployment request creates, all at once, from the diff of the resolved
//! snapshot against the last applied one (ARCHITECTURE.md §7):
//!
//! - deploy: resolve (done at the request), a plan step per changed existing resource, a
//!   probe step per converged resource, the approval step, an apply step per resource (the
//!   worker skips converged ones once their probe confirms them), a destroy step per
//!   resource removed from the template (reverse dependency order), a verify step per
//!   resource;
//! - destroy: the approval step, then a destroy step per applied resource in reverse
//!   dependency order;
//! - preview: resolve, a plan step per added or changed resource, a probe step per
//!   converged one.
use std::collections::BTreeMap;

use super::{DeploymentKind, StepKind, StepStatus};

/// How a resource changed from the last applied snapshot to the requested one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Add,
    Update,
    Remove,
    Unchanged,
}

/// A resource of a snapshot, in the snapshot's dependency order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSpec {
    pub name: String,
    pub depends_on: Vec<String>,
}

/// A step as the request creates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewStep {
    pub kind: StepKind,
    /// Empty for the deployment-wide steps (resolve, approval).
    pub resource: String,
    /// Resources whose step of the same phase must finish first.
    pub depends_on: Vec<String>,
    pub status: StepStatus,
}

impl NewStep {
    fn pending(kind: StepKind, resource: &str, depends_on: Vec<String>) -> Self {
        NewStep {
            kind,
            resource: resource.to_owned(),
            depends_on,
            status: StepStatus::Pending,
        }
    }

    fn deployment_wide(kind: StepKind, status: StepStatus) -> Self {
        NewStep {
            kind,
            resource: String::new(),
            depends_on: Vec::new(),
            status,
        }
    }
}

/// The steps of a request, in order. `next` is the requested snapshot (empty for a
/// destroy), `previous` the last applied one, both in dependency order; `changes` says how
/// each resource of `next` and `previous` changed (a resource of `next` missing from it is
/// treated as added).
pub fn plan_steps(
    kind: DeploymentKind,
    next: &[ResourceSpec],
    changes: &BTreeMap<String, Change>,
    previous: &[ResourceSpec],
) -> Vec<NewStep> {
    let change = |name: &str| changes.get(name).copied().unwrap_or(Change::Add);
    let mut steps = Vec::new();
    match kind {
        DeploymentKind::Deploy => {
            steps.push(NewStep::deployment_wide(
                StepKind::Resolve,
                StepStatus::Succeeded,
            ));
            for r in next.iter().filter(|r| change(&r.name) == Change::Update) {
                steps.push(NewStep::pending(StepKind::Plan, &r.name, Vec::new()));
            }
            for r in next.iter().filter(|r| change(&r.name) == Change::Unchanged) {
                steps.push(NewStep::pending(StepKind::Probe, &r.name, Vec::new()));
            }
            steps.push(NewStep::deployment_wide(
                StepKind::Approval,
                StepStatus::Pending,
            ));
            for r in next {
                steps.push(NewStep::pending(
                    StepKind::Apply,
                    &r.name,
                    r.depends_on.clone(),
                ));
            }
            let removed: Vec<&ResourceSpec> = previous
                .iter()
                .filter(|r| !next.iter().any(|n| n.name == r.name))
                .collect();
            steps.extend(destroy_steps(&removed));
            for r in next {
                steps.push(NewStep::pending(StepKind::Verify, &r.name, Vec::new()));
            }
        }
        DeploymentKind::Destroy => {
            steps.push(NewStep::deployment_wide(
                StepKind::Approval,
                StepStatus::Pending,
            ));
            let all: Vec<&ResourceSpec> = previous.iter().collect();
            steps.extend(destroy_steps(&all));
        }
        DeploymentKind::Preview => {
            steps.push(NewStep::deployment_wide(
                StepKind::Resolve,
                StepStatus::Succeeded,
            ));
            for r in next
                .iter()
                .filter(|r| matches!(change(&r.name), Change::Add | Change::Update))
            {
                steps.push(NewStep::pending(StepKind::Plan, &r.name, Vec::new()));
            }
            for r in next.iter().filter(|r| change(&r.name) == Change::Unchanged) {
                steps.push(NewStep::pending(StepKind::Probe, &r.name, Vec::new()));
            }
        }
    }
    steps
}

/// Destroy steps for `resources` (in dependency order) in reverse order; each waits for the
/// destroys of the resources that depend on it.
fn destroy_steps(resources: &[&ResourceSpec]) -> Vec<NewStep> {
    resources
        .iter()
        .rev()
        .map(|r| {
            let dependents = resources
                .iter()
                .filter(|d| d.depends_on.contains(&r.name))
                .map(|d| d.name.clone())
                .collect();
            NewStep::pending(StepKind::Destroy, &r.name, dependents)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, deps: &[&str]) -> ResourceSpec {
        ResourceSpec {
            name: name.to_owned(),
            depends_on: deps.iter().map(|d| (*d).to_owned()).collect(),
        }
    }

    fn web_stack() -> Vec<ResourceSpec> {
        vec![
            spec("network", &[]),
            spec("database", &["network"]),
            spec("queue", &["network"]),
            spec("web", &["network", "database", "queue"]),
        ]
    }

    fn kinds(steps: &[NewStep]) -> Vec<(StepKind, &str)> {
        steps
            .iter()
            .map(|s| (s.kind, s.resource.as_str()))
            .collect()
    }

    #[test]
    fn a_first_deploy_applies_and_verifies_everything() {
        use StepKind::*;
        let steps = plan_steps(DeploymentKind::Deploy, &web_stack(), &BTreeMap::new(), &[]);
        assert_eq!(
            kinds(&steps),
            [
                (Resolve, ""),
                (Approval, ""),
                (Apply, "network"),
                (Apply, "database"),
                (Apply, "queue"),
                (Apply, "web"),
                (Verify, "network"),
                (Verify, "database"),
                (Verify, "queue"),
                (Verify, "web"),
            ]
        );
        assert_eq!(steps[0].status, StepStatus::Succeeded);
        assert!(steps[1..].iter().all(|s| s.status == StepStatus::Pending));
        assert_eq!(steps[5].depends_on, ["network", "database", "queue"]);
    }

    #[test]
    fn a_change_plans_changed_probes_converged_and_destroys_removed_in_reverse() {
        use StepKind::*;
        let previous = web_stack();
        let next = vec![spec("network", &[]), spec("database", &["network"])];
        let changes = BTreeMap::from([
            ("network".to_owned(), Change::Unchanged),
            ("database".to_owned(), Change::Update),
            ("queue".to_owned(), Change::Remove),
            ("web".to_owned(), Change::Remove),
        ]);
        let steps = plan_steps(DeploymentKind::Deploy, &next, &changes, &previous);
        assert_eq!(
            kinds(&steps),
            [
                (Resolve, ""),
                (Plan, "database"),
                (Probe, "network"),
                (Approval, ""),
                (Apply, "network"),
                (Apply, "database"),
                (Destroy, "web"),
                (Destroy, "queue"),
                (Verify, "network"),
                (Verify, "database"),
            ]
        );
        // The queue is destroyed after the web service that uses it.
        assert_eq!(steps[7].depends_on, ["web"]);
        assert!(steps[6].depends_on.is_empty());
    }

    #[test]
    fn destroy_and_preview() {
        use StepKind::*;
        let steps = plan_steps(DeploymentKind::Destroy, &[], &BTreeMap::new(), &web_stack());
        assert_eq!(
            kinds(&steps),
            [
                (Approval, ""),
                (Destroy, "web"),
                (Destroy, "queue"),
                (Destroy, "database"),
                (Destroy, "network"),
            ]
        );
        assert_eq!(steps[4].depends_on, ["database", "queue", "web"]);

        let changes = BTreeMap::from([
            ("network".to_owned(), Change::Unchanged),
            ("database".to_owned(), Change::Update),
        ]);
        let steps = plan_steps(
            DeploymentKind::Preview,
            &web_stack(),
            &changes,
            &web_stack(),
        );
        assert_eq!(
            kinds(&steps),
            [
                (Resolve, ""),
                (Plan, "database"),
                (Plan, "queue"),
                (Plan, "web"),
                (Probe, "network"),
            ]
        );
    }
}
