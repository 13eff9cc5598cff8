//! What a plan will do, per resource, and how risky it is to apply it without a human look.

use serde::{Deserialize, Serialize};

use crate::plan::{Action, Plan, ResourceChange};

/// How risky applying a plan is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// No changes, or only creates, reads and in-place updates.
    Low,
    /// Something is deleted, forgotten, replaced, or a deposed object is involved.
    High,
    /// The plan errored, could not be read, or uses an action this crate does not know.
    /// Production treats it as high.
    Unknown,
}

/// One resource instance object the plan does something to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceSummary {
    pub address: String,
    /// As in the plan, e.g. `["delete","create"]`.
    pub actions: Vec<String>,
    /// The plan's `action_reason`, verbatim (`null` when it gives none).
    pub reason: Option<String>,
}

/// The summary printed by `cairn-runner summarize-plan` and stored with a saved plan.
/// Serialises exactly as
/// `{"add":N,"change":N,"destroy":N,"replace":[…],"risk":"…","resources":[…]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanSummary {
    pub add: u64,
    pub change: u64,
    pub destroy: u64,
    /// Addresses being replaced, in plan order.
    pub replace: Vec<String>,
    pub risk: Risk,
    /// Every resource change whose actions are not just `no-op`, in plan order.
    pub resources: Vec<ResourceSummary>,
}

/// The counts OpenTofu prints in its `change_summary` message for the same plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChangeCounts {
    pub add: u64,
    pub change: u64,
    pub remove: u64,
    pub forget: u64,
    pub import: u64,
}

/// Counts managed resource changes as OpenTofu's own change summary does: a replace is one
/// add and one remove, data sources are not counted, a deposed object counts like any other.
pub fn change_counts(plan: &Plan) -> ChangeCounts {
    let mut counts = ChangeCounts::default();
    for rc in plan.resource_changes.iter().filter(|rc| !rc.is_data()) {
        let change = &rc.change;
        if change.has(&Action::Create) {
            counts.add += 1;
        }
        if change.has(&Action::Update) {
            counts.change += 1;
        }
        if change.has(&Action::Delete) {
            counts.remove += 1;
        }
        if change.has(&Action::Forget) {
            counts.forget += 1;
        }
        if change.importing.is_some() {
            counts.import += 1;
        }
    }
    counts
}

/// The risk of one resource change, ignoring whether the plan errored.
fn resource_risk(rc: &ResourceChange) -> Risk {
    let actions = &rc.change.actions;
    if actions
        .iter()
        .any(|action| matches!(action, Action::Other(_)))
    {
        return Risk::Unknown;
    }
    let destructive = actions
        .iter()
        .any(|action| matches!(action, Action::Delete | Action::Forget));
    if destructive || rc.deposed.is_some() || rc.change.is_replace() {
        Risk::High
    } else {
        Risk::Low
    }
}

impl PlanSummary {
    /// Summarises a parsed plan. An errored plan keeps its counts but its risk is unknown.
    pub fn from_plan(plan: &Plan) -> Self {
        let counts = change_counts(plan);
        let mut risk = Risk::Low;
        for rc in &plan.resource_changes {
            risk = match (risk, resource_risk(rc)) {
                (Risk::Unknown, _) | (_, Risk::Unknown) => Risk::Unknown,
                (Risk::High, _) | (_, Risk::High) => Risk::High,
                (Risk::Low, Risk::Low) => Risk::Low,
            };
        }
        if plan.errored {
            risk = Risk::Unknown;
        }
        let replace = plan
            .resource_changes
            .iter()
            .filter(|rc| rc.change.is_replace())
            .map(|rc| rc.address.clone())
            .collect();
        let resources = plan
            .resource_changes
            .iter()
            .filter(|rc| !rc.change.is_no_op())
            .map(|rc| ResourceSummary {
                address: rc.address.clone(),
                actions: rc
                    .change
                    .actions
                    .iter()
                    .map(|action| action.as_str().to_owned())
                    .collect(),
                reason: rc.action_reason.clone(),
            })
            .collect();
        PlanSummary {
            add: counts.add,
            change: counts.change,
            destroy: counts.remove,
            replace,
            risk,
            resources,
        }
    }

    /// The summary of a document that is not a readable plan: nothing known, risk unknown.
    pub fn unreadable() -> Self {
        PlanSummary {
            add: 0,
            change: 0,
            destroy: 0,
            replace: Vec::new(),
            risk: Risk::Unknown,
            resources: Vec::new(),
        }
    }

    /// The summary as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a summary has only strings, numbers and lists")
    }
}

/// Summarises the JSON of `tofu show -json PLANFILE`. Never fails: a document that is not a
/// readable plan of format 1.x gets [`PlanSummary::unreadable`].
pub fn summarize_plan(bytes: &[u8]) -> PlanSummary {
    match Plan::from_slice(bytes) {
        Ok(plan) => PlanSummary::from_plan(&plan),
        Err(_) => PlanSummary::unreadable(),
    }
}
