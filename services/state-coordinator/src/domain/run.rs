//! Run outcomes and execution contexts (run kinds and the production rule are
//! `cairn_contract`'s).

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
    Cancelled,
    TimedOut,
    Interrupted,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::Interrupted => "interrupted",
        }
    }
}

/// The execution context of a run: references only, never credential values.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
pub struct ExecutionContext {
    pub tenant_id: String,
    pub target_id: String,
    pub target_settings: std::collections::BTreeMap<String, String>,
    pub credential_ref: String,
    pub sensitive_variable_refs: std::collections::BTreeMap<String, String>,
}
