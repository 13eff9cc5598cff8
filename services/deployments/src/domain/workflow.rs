//! The workflow's rules, pure: what a plan says (risk, whether it changes anything, whether
//! it deletes or replaces), when a deployment waits for approval, the plan-set hash an
//! approval is bound to, which failures are retried and how long to wait before a retry.
use std::time::Duration;

use cairn_templating::hash::sha256_hex;

/// A plan's risk, as the runner judged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Risk {
    Low,
    High,
    Unknown,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::High => "high",
            Risk::Unknown => "unknown",
        }
    }

    /// Needs an approval in production.
    pub fn escalates(self) -> bool {
        matches!(self, Risk::High | Risk::Unknown)
    }
}

/// What a plan (or a preview) of one resource found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanFacts {
    pub add: u32,
    pub change: u32,
    pub destroy: u32,
    pub replace: Vec<String>,
    pub risk: Risk,
    /// (address, actions) of every resource change, sorted: what "the same changes" means.
    pub changes: Vec<(String, Vec<String>)>,
    /// False when the summary was lost: then it counts as changing something, at unknown
    /// risk.
    pub known: bool,
}

impl PlanFacts {
    /// A plan whose summary is missing (the result was lost): nothing is known.
    pub fn unknown() -> Self {
        PlanFacts {
            add: 0,
            change: 0,
            destroy: 0,
            replace: Vec::new(),
            risk: Risk::Unknown,
            changes: Vec::new(),
            known: false,
        }
    }

    pub fn has_changes(&self) -> bool {
        !self.known
            || self.add > 0
            || self.change > 0
            || self.destroy > 0
            || !self.replace.is_empty()
    }

    /// Deletes or replaces something: applying it is never retried.
    pub fn destructive(&self) -> bool {
        self.destroy > 0 || !self.replace.is_empty()
    }

    /// Creates something where the state says it exists: gone at the provider.
    pub fn creates(&self) -> bool {
        self.add > 0
    }

    /// The same resource changes as `other` (addresses and actions).
    pub fn same_changes(&self, other: &PlanFacts) -> bool {
        self.known && other.known && self.changes == other.changes
    }
}

/// One plan an approval is bound to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlanSetEntry {
    pub resource: String,
    pub plan_run_id: String,
    pub plan_sha256: String,
    pub base_generation: u64,
}

/// sha256 (lowercase hex) over the sorted (resource, plan run id, plan sha256, base
/// generation) of the plans: what an approver reviewed. Empty for no plans.
pub fn plan_set_hash(entries: &[PlanSetEntry]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let mut sorted = entries.to_vec();
    sorted.sort();
    let mut text = String::new();
    for e in &sorted {
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            e.resource, e.plan_run_id, e.plan_sha256, e.base_generation
        ));
    }
    sha256_hex(text.as_bytes())
}

/// Why a deployment must wait for an approval, or `None` with the reason it need not.
pub fn approval_needed(
    production: bool,
    environment: &str,
    risks: &[(String, Risk)],
    unplannable: &[String],
) -> Result<String, String> {
    if !production {
        return Err(format!(
            "environment {environment} is not production: no approval needed"
        ));
    }
    if let Some(r) = unplannable.first() {
        return Ok(format!("resource {r} could not be planned"));
    }
    let risky: Vec<&str> = risks
        .iter()
        .filter(|(_, r)| r.escalates())
        .map(|(n, _)| n.as_str())
        .collect();
    if risky.is_empty() {
        return Err("no high-risk changes in production: no approval needed".to_owned());
    }
    Ok(format!(
        "high or unknown risk in production: {}",
        risky.join(", ")
    ))
}

/// How a run ended, as far as retrying goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Succeeded,
    /// Failed with the runner's transient class (network, rate limit, lock busy, 5xx).
    Transient,
    /// Failed otherwise (config, provider, stale plan, fenced, not admitted, …).
    Failed,
    Cancelled,
    TimedOut,
    Interrupted,
}

/// Whether a failed run of `kind` is tried again: only transient failures, never a destroy
/// or the apply of a plan that deletes or replaces, and at most `retries` more tries.
pub fn retried(ending: Ending, kind: &str, destructive: bool, tries: u32, retries: u32) -> bool {
    ending == Ending::Transient && kind != "destroy" && !destructive && tries <= retries
}

/// The wait before try `tries + 1`: `base · 2^(tries-1)`, at most a minute, plus up to a
/// quarter of it as jitter (`jitter` in [0, 1)).
pub fn backoff(base: Duration, tries: u32, jitter: f64) -> Duration {
    let exp = base
        .saturating_mul(1u32 << tries.saturating_sub(1).min(10))
        .min(Duration::from_secs(60));
    exp + exp.mul_f64(jitter.clamp(0.0, 1.0) / 4.0)
}

/// The reason of a failed step whose production apply was interrupted.
pub const INTERRUPTED: &str = "interrupted, deploy again to plan and approve";
/// The reason of a verify that found a resource gone.
pub const GONE: &str = "Resource no longer exists at the provider. Redeploy to re-create it.";
/// The reason of a step skipped because nothing changed.
pub const NO_CHANGES: &str = "no changes";

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(r: &str, run: &str) -> PlanSetEntry {
        PlanSetEntry {
            resource: r.into(),
            plan_run_id: run.into(),
            plan_sha256: "ab".into(),
            base_generation: 3,
        }
    }

    #[test]
    fn the_plan_set_hash_ignores_order_and_binds_every_part() {
        let a = plan_set_hash(&[entry("db", "r1"), entry("web", "r2")]);
        let b = plan_set_hash(&[entry("web", "r2"), entry("db", "r1")]);
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
        let mut other = entry("db", "r1");
        other.base_generation = 4;
        assert_ne!(a, plan_set_hash(&[other, entry("web", "r2")]));
        assert_eq!(plan_set_hash(&[]), "");
    }

    #[test]
    fn approval_only_for_risky_or_unplannable_production_changes() {
        let risks = vec![("db".to_owned(), Risk::High), ("web".to_owned(), Risk::Low)];
        assert!(approval_needed(false, "staging", &risks, &[]).is_err());
        assert!(
            approval_needed(true, "production", &risks, &[])
                .unwrap()
                .contains("db")
        );
        let low = vec![("web".to_owned(), Risk::Low)];
        assert!(approval_needed(true, "production", &low, &[]).is_err());
        assert!(approval_needed(true, "production", &low, &["q".to_owned()]).is_ok());
        let unknown = vec![("web".to_owned(), Risk::Unknown)];
        assert!(approval_needed(true, "production", &unknown, &[]).is_ok());
    }

    #[test]
    fn only_transient_non_destructive_failures_are_retried() {
        assert!(retried(Ending::Transient, "apply", false, 1, 3));
        assert!(!retried(Ending::Transient, "apply", false, 4, 3));
        assert!(!retried(Ending::Transient, "destroy", false, 1, 3));
        assert!(!retried(Ending::Transient, "apply", true, 1, 3));
        for e in [
            Ending::Failed,
            Ending::Cancelled,
            Ending::TimedOut,
            Ending::Interrupted,
        ] {
            assert!(!retried(e, "apply", false, 1, 3));
        }
    }

    #[test]
    fn backoff_grows_and_is_bounded() {
        let b = Duration::from_secs(1);
        assert_eq!(backoff(b, 1, 0.0), Duration::from_secs(1));
        assert_eq!(backoff(b, 3, 0.0), Duration::from_secs(4));
        assert!(backoff(b, 3, 0.99) < Duration::from_secs(5));
        assert_eq!(backoff(b, 30, 0.0), Duration::from_secs(60));
    }
}
