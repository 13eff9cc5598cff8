//! The run model: what the coordinator granted ([`AdmittedRun`]) and what the run does
//! ([`RunConfig`], with the contract's [`RunKind`] and [`Environment`]), a saved plan
//! ([`SavedPlan`]), and what running it produced ([`RunOutcome`], [`RunResult`]).

use std::collections::BTreeMap;

use cairn_tofu::{DriftFinding, PlanSummary, PublicOutput};
use serde_json::Value;

pub use cairn_contract::{Environment, RunKind};

use super::classify::ErrorClass;
use crate::executor::{RunId, Secret};
use crate::plan_tags::PlanTags;

/// The state backend endpoints of the run (`TF_HTTP_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendAddresses {
    /// `TF_HTTP_ADDRESS`.
    pub address: String,
    /// `TF_HTTP_LOCK_ADDRESS`.
    pub lock_address: String,
    /// `TF_HTTP_UNLOCK_ADDRESS`.
    pub unlock_address: String,
}

impl BackendAddresses {
    /// Whether tofu reaches any of them over TLS (the coordinator's public backend URL is
    /// `https://`): its commands then get the [`super::BackendTls`] variables.
    pub fn is_https(&self) -> bool {
        [&self.address, &self.lock_address, &self.unlock_address]
            .iter()
            .any(|a| {
                a.get(..8)
                    .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
            })
    }
}

/// What the coordinator's `AdmitRun` granted.
#[derive(Debug, Clone)]
pub struct AdmittedRun {
    /// The run.
    pub run_id: RunId,
    /// This attempt's number (1 for the first).
    pub attempt: u32,
    /// The backend endpoints.
    pub backend: BackendAddresses,
    /// The run token, sent as `TF_HTTP_PASSWORD`.
    pub run_token: Secret,
    /// The state generation the run starts from.
    pub base_generation: u64,
    /// The token only reads state.
    pub read_only: bool,
    /// Attempt 2+ of a production apply or of a destroy: report interrupted, run nothing.
    pub interrupted: bool,
}

/// What the coordinator's `GetRunConfig` returned.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// What the run does.
    pub kind: RunKind,
    /// The environment, normalised (`prod` and `Production` are `production`).
    pub environment: Environment,
    /// The root module, written as `main.tf.json`.
    pub root_config: Vec<u8>,
    /// The hash the coordinator recorded for `root_config`.
    pub config_hash: String,
    /// The tenant owning the run.
    pub tenant_id: String,
    /// The target it runs against.
    pub target_id: String,
    /// Target settings such as `base_dir`.
    pub target_settings: BTreeMap<String, String>,
    /// The credential reference, if the target needs one.
    pub credential_ref: Option<String>,
    /// Root variable name → reference of its sensitive value, given as `TF_VAR_<name>`.
    pub sensitive_variable_refs: BTreeMap<String, String>,
}

/// A saved plan to apply, with the provider lock file it was made with and its tags.
#[derive(Debug, Clone)]
pub struct SavedPlan {
    /// The plan file.
    pub plan: Vec<u8>,
    /// `.terraform.lock.hcl` as it was at plan time.
    pub lock_file: Vec<u8>,
    /// What the plan was made from.
    pub tags: PlanTags,
}

/// How a run ended, as reported to the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every command succeeded.
    Succeeded,
    /// A command failed or the run could not be started.
    Failed,
    /// Cancelled: state may be incomplete; never retried.
    Cancelled,
    /// Timed out: state may be incomplete; never retried.
    TimedOut,
    /// A new attempt of a run that must not be repeated; nothing was run.
    Interrupted,
}

/// Everything a pipeline produced.
#[derive(Debug)]
pub struct RunResult {
    /// How the run ended.
    pub outcome: RunOutcome,
    /// Why it failed (`None` when it succeeded).
    pub class: Option<ErrorClass>,
    /// A short, redacted description of the end.
    pub message: String,
    /// The plan's summary and risk (plan-like runs, and an apply that planned again).
    pub summary: Option<PlanSummary>,
    /// What a plan-like run found differing from its configuration (no values).
    pub drift_findings: Vec<DriftFinding>,
    /// The saved plan's tags that changed before an apply (empty when none did).
    pub stale_tags: Vec<&'static str>,
    /// The plan JSON with every sensitive value masked.
    pub masked_plan: Option<Value>,
    /// The saved plan and its lock file, for `PutPlan` (plan runs).
    pub saved_plan: Option<SavedPlan>,
    /// The root outputs after an apply, sensitive values withheld.
    pub outputs: Vec<PublicOutput>,
    /// An `errored.tfstate` tofu left behind, for the coordinator's quarantine. Never log it.
    pub errored_state: Option<Vec<u8>>,
    /// The last redacted log lines.
    pub log_tail: Vec<String>,
}

impl RunResult {
    /// A result with only its outcome, class and message.
    pub(crate) fn new(
        outcome: RunOutcome,
        class: Option<ErrorClass>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            outcome,
            class,
            message: message.into(),
            summary: None,
            drift_findings: Vec::new(),
            stale_tags: Vec::new(),
            masked_plan: None,
            saved_plan: None,
            outputs: Vec::new(),
            errored_state: None,
            log_tail: Vec::new(),
        }
    }

    /// A failed result of class `class`.
    pub(crate) fn failed(class: ErrorClass, message: impl Into<String>) -> Self {
        Self::new(RunOutcome::Failed, Some(class), message)
    }
}
