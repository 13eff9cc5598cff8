//! The OpenTofu contract, pure: typed models of what OpenTofu writes and reads, with no I/O.
//!
//! The state file: [`inspect_state`] is what the state coordinator calls on every state it
//! receives; [`state::StateV4`] is the full version 4 model. Plans: [`Plan`] models
//! `tofu show -json PLANFILE`, [`summarize_plan`] gives its per-resource summary and risk,
//! and [`mask_plan`] hides its sensitive values. [`ui_stream`] reads the `-json` UI stream.
//! [`drift`] turns a plan into value-free drift findings, their fingerprint and ignore rules.

pub mod address;
pub mod drift;
pub mod envelope;
pub mod error;
mod fields;
pub mod header;
pub mod inspect;
pub mod outputs;
pub mod plan;
pub mod plan_mask;
pub mod plan_summary;
pub mod state;
pub mod ui_stream;

pub use drift::{
    DriftAction, DriftFinding, IgnoreRule, InvalidIgnoreRule, apply_ignore_rules, drift_findings,
    drift_findings_json,
};
pub use error::{DocumentKind, PlanError, StateError};
pub use header::StateHeader;
pub use inspect::{StateDocument, inspect_state};
pub use outputs::{OutputValue, PublicOutput, public_outputs};
pub use plan::{Action, Change, Plan, PlanVariable, ResourceChange};
pub use plan_mask::{SENSITIVE_MARKER, mask_plan, mask_plan_collecting, mask_ui_message};
pub use plan_summary::{
    ChangeCounts, PlanSummary, ResourceSummary, Risk, change_counts, summarize_plan,
};
pub use state::StateV4;
pub use ui_stream::{UiEvent, UiMessage, UiStreamError, parse_ui_line};
