//! Drift findings of a plan: per resource address what a read-only plan of the applied
//! configuration found — changed outside OpenTofu (`resource_drift`), or what applying would
//! change (`resource_changes`) — as the action and the changed attribute paths, never a
//! value. A [`fingerprint`] identifies a set of findings (the same drift alerts once), and
//! [`IgnoreRule`]s (attribute paths such as `tags.LastSeen`, `*` for one step) keep known
//! noise out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::PlanError;
use crate::plan::{Action, Change, Plan, ResourceChange};

/// What happened to a resource, as far as the plan tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftAction {
    /// Changed in place outside OpenTofu (or applying would update it).
    Update,
    /// Gone outside OpenTofu: the refresh found it deleted (or replaced by something the
    /// provider does not recognise), so applying would create it again.
    Delete,
    /// Applying would replace it (delete and create).
    Replace,
    /// Applying would remove it from the infrastructure or the state (a planned delete or
    /// forget without a create).
    Remove,
}

impl DriftAction {
    pub fn as_str(self) -> &'static str {
        match self {
            DriftAction::Update => "update",
            DriftAction::Delete => "delete",
            DriftAction::Replace => "replace",
            DriftAction::Remove => "remove",
        }
    }

    /// The inverse of [`DriftAction::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "update" => Some(DriftAction::Update),
            "delete" => Some(DriftAction::Delete),
            "replace" => Some(DriftAction::Replace),
            "remove" => Some(DriftAction::Remove),
            _ => None,
        }
    }

    /// Which of two actions of one address says more (a deletion outweighs an update).
    fn weight(self) -> u8 {
        match self {
            DriftAction::Update => 0,
            DriftAction::Remove => 1,
            DriftAction::Replace => 2,
            DriftAction::Delete => 3,
        }
    }
}

impl fmt::Display for DriftAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One drifted resource instance: its address, what happened and which attribute paths
/// differ. Holds no value, so it may travel and be stored as it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DriftFinding {
    pub address: String,
    pub action: DriftAction,
    /// Changed attribute paths (`tags.LastSeen`, `ingress[0].cidr_blocks`), sorted, unique.
    pub attributes: Vec<String>,
    /// Those of `attributes` the plan's `relevant_attributes` names: the changes outside
    /// that other planned changes depend on.
    pub relevant: Vec<String>,
}

/// The findings of a plan JSON document (`tofu show -json`).
pub fn drift_findings_json(bytes: &[u8]) -> Result<Vec<DriftFinding>, PlanError> {
    Ok(drift_findings(&Plan::from_slice(bytes)?))
}

/// The findings of a plan, sorted by address: every managed resource instance with a drift
/// entry or a planned action other than `no-op`/`read`. Data sources are left out (reading
/// them again is not drift).
pub fn drift_findings(plan: &Plan) -> Vec<DriftFinding> {
    let relevant = relevant_attributes(plan);
    let mut by_address: BTreeMap<String, (DriftAction, BTreeSet<String>)> = BTreeMap::new();
    let mut note = |address: &str, action: DriftAction, paths: BTreeSet<String>| {
        let entry = by_address
            .entry(address.to_owned())
            .or_insert((action, BTreeSet::new()));
        if action.weight() > entry.0.weight() {
            entry.0 = action;
        }
        entry.1.extend(paths);
    };
    for rc in managed(&plan.resource_drift) {
        let action = if rc.change.has(&Action::Delete) && !rc.change.has(&Action::Create) {
            DriftAction::Delete
        } else {
            DriftAction::Update
        };
        if let Some(action) = drift_action(&rc.change, action) {
            note(&rc.address, action, changed_paths(&rc.change));
        }
    }
    for rc in managed(&plan.resource_changes) {
        let change = &rc.change;
        let action = if change.is_replace() {
            DriftAction::Replace
        } else if change.has(&Action::Create) {
            // Applying the applied configuration creates it again: it is gone.
            DriftAction::Delete
        } else if change.has(&Action::Delete) || change.has(&Action::Forget) {
            DriftAction::Remove
        } else {
            DriftAction::Update
        };
        if let Some(action) = drift_action(change, action) {
            let paths = if matches!(action, DriftAction::Update | DriftAction::Replace) {
                changed_paths(change)
            } else {
                BTreeSet::new()
            };
            note(&rc.address, action, paths);
        }
    }
    by_address
        .into_iter()
        .map(|(address, (action, paths))| {
            let wanted = relevant.get(&address);
            let relevant = paths
                .iter()
                .filter(|p| wanted.is_some_and(|w| w.iter().any(|r| path_within(p, r))))
                .cloned()
                .collect();
            DriftFinding {
                address,
                action,
                attributes: paths.into_iter().collect(),
                relevant,
            }
        })
        .collect()
}

/// `Some(action)` unless the change is nothing (`no-op`, `read`, or no actions).
fn drift_action(change: &Change, action: DriftAction) -> Option<DriftAction> {
    let nothing = change
        .actions
        .iter()
        .all(|a| matches!(a, Action::NoOp | Action::Read));
    (!nothing).then_some(action)
}

fn managed(changes: &[ResourceChange]) -> impl Iterator<Item = &ResourceChange> {
    changes
        .iter()
        .filter(|rc| !rc.is_data() && rc.deposed.is_none())
}

/// `relevant_attributes` as address → rendered paths.
fn relevant_attributes(plan: &Plan) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let Some(Value::Array(items)) = plan.extra.get("relevant_attributes") else {
        return out;
    };
    for item in items {
        let (Some(Value::String(resource)), Some(Value::Array(steps))) =
            (item.get("resource"), item.get("attribute"))
        else {
            continue;
        };
        let mut path = Path::default();
        for step in steps {
            match step {
                Value::String(key) => path.push_key(key),
                Value::Number(n) => match n.as_u64() {
                    Some(i) => path.push_index(i),
                    None => path.push_key(&n.to_string()),
                },
                _ => {}
            }
        }
        out.entry(resource.clone()).or_default().push(path.render());
    }
    out
}

/// Attribute paths whose value differs between `before` and `after` (or becomes unknown).
fn changed_paths(change: &Change) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    diff(
        &change.before,
        &change.after,
        &change.after_unknown,
        &mut Path::default(),
        &mut out,
    );
    out
}

fn diff(before: &Value, after: &Value, unknown: &Value, at: &mut Path, out: &mut BTreeSet<String>) {
    if unknown == &Value::Bool(true) {
        if !at.is_root() {
            out.insert(at.render());
        }
        return;
    }
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let keys: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            for key in keys {
                let null = Value::Null;
                at.push_key(key);
                diff(
                    b.get(key).unwrap_or(&null),
                    a.get(key).unwrap_or(&null),
                    unknown.get(key.as_str()).unwrap_or(&null),
                    at,
                    out,
                );
                at.pop();
            }
        }
        (Value::Array(b), Value::Array(a)) if b.len() == a.len() => {
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                at.push_index(i as u64);
                diff(bv, av, unknown.get(i).unwrap_or(&Value::Null), at, out);
                at.pop();
            }
        }
        (b, a) if b == a && !contains_unknown(unknown) => {}
        // A whole object appearing or vanishing (before/after null) is the resource
        // itself, not an attribute.
        _ if at.is_root() => {}
        _ => {
            out.insert(at.render());
        }
    }
}

fn contains_unknown(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Array(items) => items.iter().any(contains_unknown),
        Value::Object(map) => map.values().any(contains_unknown),
        _ => false,
    }
}

/// An attribute path being built: `a.b[0]["odd.key"]`.
#[derive(Default)]
struct Path {
    steps: Vec<String>,
}

impl Path {
    fn is_root(&self) -> bool {
        self.steps.is_empty()
    }

    fn push_key(&mut self, key: &str) {
        let plain = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let step = if plain {
            if self.steps.is_empty() {
                key.to_owned()
            } else {
                format!(".{key}")
            }
        } else {
            format!("[{}]", Value::String(key.to_owned()))
        };
        self.steps.push(step);
    }

    fn push_index(&mut self, i: u64) {
        self.steps.push(format!("[{i}]"));
    }

    fn pop(&mut self) {
        self.steps.pop();
    }

    fn render(&self) -> String {
        self.steps.concat()
    }
}

/// The steps of a rendered path: `tags.LastSeen` → `["tags", "LastSeen"]`,
/// `a[0]["x.y"]` → `["a", "0", "x.y"]`.
fn steps(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            rest = after;
            continue;
        }
        if let Some(after) = rest.strip_prefix("[\"") {
            // A quoted key: up to the closing `"]`, with JSON escapes.
            let mut end = None;
            let mut escaped = false;
            for (i, c) in after.char_indices() {
                match c {
                    '\\' if !escaped => escaped = true,
                    '"' if !escaped => {
                        end = Some(i);
                        break;
                    }
                    _ => escaped = false,
                }
            }
            let Some(end) = end else {
                out.push(after.to_owned());
                break;
            };
            let quoted = format!("\"{}\"", &after[..end]);
            out.push(
                serde_json::from_str::<String>(&quoted).unwrap_or_else(|_| after[..end].to_owned()),
            );
            rest = after[end + 1..]
                .strip_prefix(']')
                .unwrap_or(&after[end + 1..]);
            continue;
        }
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').unwrap_or(after.len());
            out.push(after[..end].to_owned());
            rest = after.get(end + 1..).unwrap_or("");
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        out.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    out
}

/// Whether `path` is `within` or below it (`tags.LastSeen` is within `tags`).
fn path_within(path: &str, within: &str) -> bool {
    let (p, w) = (steps(path), steps(within));
    p.len() >= w.len() && p.iter().zip(&w).all(|(a, b)| a == b)
}

/// An attribute path that is noise for an instance: a finding's attribute matches when the
/// rule's steps are a prefix of the attribute's (`tags` covers `tags.LastSeen`), `*`
/// matching any one step (`tags.*`, `ingress[*].description`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoreRule {
    text: String,
    steps: Vec<String>,
}

/// Why an ignore rule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ignore rule {rule:?}: {why}")]
pub struct InvalidIgnoreRule {
    pub rule: String,
    pub why: &'static str,
}

impl IgnoreRule {
    /// Longest rule accepted, in bytes.
    pub const MAX_LEN: usize = 512;

    pub fn parse(rule: &str) -> Result<Self, InvalidIgnoreRule> {
        let bad = |why| InvalidIgnoreRule {
            rule: rule.chars().take(80).collect(),
            why,
        };
        let text = rule.trim();
        if text.is_empty() {
            return Err(bad("is empty"));
        }
        if text.len() > Self::MAX_LEN {
            return Err(bad("is longer than 512 bytes"));
        }
        if text.chars().any(char::is_control) {
            return Err(bad("contains a control character"));
        }
        if text.starts_with('.')
            || text.ends_with('.')
            || text.contains("..")
            || text.contains("[]")
        {
            return Err(bad("has an empty step"));
        }
        let steps = steps(text);
        if steps.is_empty() || steps.iter().any(String::is_empty) {
            return Err(bad("has an empty step"));
        }
        Ok(IgnoreRule {
            text: text.to_owned(),
            steps,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the rule covers the attribute path `path`.
    pub fn matches(&self, path: &str) -> bool {
        let p = steps(path);
        p.len() >= self.steps.len()
            && self
                .steps
                .iter()
                .zip(&p)
                .all(|(rule, step)| rule == "*" || rule == step)
    }
}

/// The findings with every attribute an ignore rule covers removed; an update left with no
/// attribute is dropped. Deletions, replacements and removals always stay, as does an
/// update that names no attribute (nothing to match a rule against).
pub fn apply_ignore_rules(findings: &[DriftFinding], rules: &[IgnoreRule]) -> Vec<DriftFinding> {
    findings
        .iter()
        .filter_map(|f| {
            let kept: Vec<String> = f
                .attributes
                .iter()
                .filter(|a| !rules.iter().any(|r| r.matches(a)))
                .cloned()
                .collect();
            if f.action == DriftAction::Update && !f.attributes.is_empty() && kept.is_empty() {
                return None;
            }
            let relevant = f
                .relevant
                .iter()
                .filter(|a| kept.contains(a))
                .cloned()
                .collect();
            Some(DriftFinding {
                address: f.address.clone(),
                action: f.action,
                attributes: kept,
                relevant,
            })
        })
        .collect()
}

/// A fingerprint of a set of findings: lowercase hex sha256 over a canonical text of the
/// findings sorted by address (actions and attribute paths, not `relevant`). The same drift
/// gives the same fingerprint, scan after scan; no findings give the empty string.
pub fn fingerprint(findings: &[DriftFinding]) -> String {
    if findings.is_empty() {
        return String::new();
    }
    let mut sorted: Vec<&DriftFinding> = findings.iter().collect();
    sorted.sort_by(|a, b| a.address.cmp(&b.address));
    let mut canonical = String::new();
    for f in sorted {
        let mut attributes = f.attributes.clone();
        attributes.sort();
        attributes.dedup();
        // JSON strings: no address or path can forge a separator.
        canonical.push_str(&Value::String(f.address.clone()).to_string());
        canonical.push(' ');
        canonical.push_str(f.action.as_str());
        for a in attributes {
            canonical.push(' ');
            canonical.push_str(&Value::String(a).to_string());
        }
        canonical.push('\n');
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, canonical.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A one-line, value-free summary of findings: `2 resources drifted: a.b (update: tags.x),
/// c.d (delete)`.
pub fn summary(findings: &[DriftFinding]) -> String {
    if findings.is_empty() {
        return "in sync".to_owned();
    }
    let each: Vec<String> = findings
        .iter()
        .map(|f| {
            if f.attributes.is_empty() {
                format!("{} ({})", f.address, f.action)
            } else {
                format!("{} ({}: {})", f.address, f.action, f.attributes.join(", "))
            }
        })
        .collect();
    let noun = if findings.len() == 1 {
        "resource"
    } else {
        "resources"
    };
    format!("{} {noun} drifted: {}", findings.len(), each.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_and_split_back() {
        let mut p = Path::default();
        p.push_key("tags");
        p.push_key("Last Seen");
        assert_eq!(p.render(), r#"tags["Last Seen"]"#);
        assert_eq!(steps(&p.render()), vec!["tags", "Last Seen"]);
        let mut p = Path::default();
        p.push_key("ingress");
        p.push_index(0);
        p.push_key("cidr");
        assert_eq!(p.render(), "ingress[0].cidr");
        assert_eq!(steps("ingress[0].cidr"), vec!["ingress", "0", "cidr"]);
        assert_eq!(steps(r#"a["x.\"y"].b"#), vec!["a", "x.\"y", "b"]);
    }

    #[test]
    fn rules_match_prefixes_and_wildcards() {
        let rule = IgnoreRule::parse("tags.LastSeen").unwrap();
        assert!(rule.matches("tags.LastSeen"));
        assert!(!rule.matches("tags.Owner"));
        assert!(!rule.matches("tags"));
        assert!(IgnoreRule::parse("tags").unwrap().matches("tags.Owner"));
        assert!(IgnoreRule::parse("tags.*").unwrap().matches("tags.Owner"));
        assert!(
            IgnoreRule::parse("ingress[*].description")
                .unwrap()
                .matches("ingress[3].description")
        );
        assert!(
            !IgnoreRule::parse("ingress[*].description")
                .unwrap()
                .matches("ingress[3].cidr")
        );
        assert!(IgnoreRule::parse("").is_err());
        assert!(IgnoreRule::parse("a..b").is_err());
        assert!(IgnoreRule::parse("a\nb").is_err());
    }

    #[test]
    fn fingerprints_ignore_order_and_differ_by_content() {
        let a = DriftFinding {
            address: "a.x".into(),
            action: DriftAction::Update,
            attributes: vec!["tags.b".into(), "tags.a".into()],
            relevant: vec![],
        };
        let b = DriftFinding {
            address: "b.y".into(),
            action: DriftAction::Delete,
            attributes: vec![],
            relevant: vec![],
        };
        assert_eq!(
            fingerprint(&[a.clone(), b.clone()]),
            fingerprint(&[b.clone(), a.clone()])
        );
        assert_eq!(fingerprint(std::slice::from_ref(&a)).len(), 64);
        let other = DriftFinding {
            action: DriftAction::Replace,
            ..a.clone()
        };
        assert_ne!(fingerprint(&[a, b.clone()]), fingerprint(&[other, b]));
        assert_eq!(fingerprint(&[]), "");
    }
}
