//! The platform's own diff of two snapshots, per resource: add, update (with the inputs
//! that changed), remove or unchanged — shown before any provider plan.
use std::collections::{BTreeMap, BTreeSet};

use crate::snapshot::{Binding, ResolvedResource, Snapshot};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Add,
    /// `changed_inputs` are module input names; `module_changed` when the module source or
    /// kind changed.
    Update {
        changed_inputs: Vec<String>,
        module_changed: bool,
    },
    Remove,
    Unchanged,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDiff {
    pub name: String,
    pub change: Change,
}

fn sensitive_ref<'a>(r: &'a ResolvedResource, b: &Binding) -> Option<&'a String> {
    match b {
        Binding::Sensitive { variable } => r.sensitive_variables.get(variable),
        Binding::Literal { .. } | Binding::Output { .. } | Binding::Outputs { .. } => None,
    }
}

fn compare(prev: &ResolvedResource, next: &ResolvedResource) -> Change {
    let names: BTreeSet<&String> = prev.inputs.keys().chain(next.inputs.keys()).collect();
    let changed_inputs: Vec<String> = names
        .into_iter()
        .filter(|n| match (prev.inputs.get(*n), next.inputs.get(*n)) {
            (Some(a), Some(b)) => a != b || sensitive_ref(prev, a) != sensitive_ref(next, b),
            _ => true,
        })
        .cloned()
        .collect();
    let module_changed = prev.module != next.module || prev.kind != next.kind;
    if changed_inputs.is_empty() && !module_changed && prev.physical_name == next.physical_name {
        Change::Unchanged
    } else {
        Change::Update {
            changed_inputs,
            module_changed,
        }
    }
}

/// Resources of `next` in its order, then removed ones in reverse dependency order of
/// `prev` (the order they would be destroyed in). With no previous snapshot, all are adds.
pub fn diff(prev: Option<&Snapshot>, next: &Snapshot) -> Vec<ResourceDiff> {
    let old: BTreeMap<&str, &ResolvedResource> = prev
        .map(|p| p.resources.iter().map(|r| (r.name.as_str(), r)).collect())
        .unwrap_or_default();
    let new: BTreeSet<&str> = next.resources.iter().map(|r| r.name.as_str()).collect();
    let mut out: Vec<ResourceDiff> = next
        .resources
        .iter()
        .map(|r| ResourceDiff {
            name: r.name.clone(),
            change: match old.get(r.name.as_str()) {
                None => Change::Add,
                Some(before) => compare(before, r),
            },
        })
        .collect();
    if let Some(prev) = prev {
        out.extend(
            prev.resources
                .iter()
                .rev()
                .filter(|r| !new.contains(r.name.as_str()))
                .map(|r| ResourceDiff {
                    name: r.name.clone(),
                    change: Change::Remove,
                }),
        );
    }
    out
}
