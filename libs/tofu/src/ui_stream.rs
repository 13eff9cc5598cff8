//! The machine-readable UI stream: one JSON object per line from `plan -json`/`apply -json`.
//! Known message types are decoded; unknown ones, and unnamed fields, are kept.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::message_without_position;
use crate::plan::null_as_default;

/// One line of the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct UiMessage {
    /// `@level`: `info`, `warn`, `error`, `debug`, `trace`.
    pub level: String,
    /// `@message`: the human-readable text.
    pub message: String,
    /// `@module`: `tofu.ui` (`terraform.ui` from Terraform).
    pub module: Option<String>,
    /// `@timestamp`, RFC 3339.
    pub timestamp: Option<String>,
    /// `type`, verbatim (`None` for a log line without one).
    pub message_type: Option<String>,
    pub event: UiEvent,
}

/// The payload of a message, by `type`.
#[derive(Debug, Clone, PartialEq)]
pub enum UiEvent {
    Version(VersionInfo),
    /// A plain log line (`type` `log`, or none).
    Log,
    Diagnostic(Diagnostic),
    PlannedChange(PlannedChange),
    ResourceDrift(PlannedChange),
    ChangeSummary(ChangeSummary),
    Outputs(BTreeMap<String, UiOutput>),
    ApplyStart(Hook),
    ApplyProgress(Hook),
    ApplyComplete(Hook),
    ApplyErrored(Hook),
    RefreshStart(Hook),
    RefreshComplete(Hook),
    ProvisionStart(Hook),
    ProvisionProgress(Hook),
    ProvisionComplete(Hook),
    ProvisionErrored(Hook),
    /// A type this crate does not decode: every field but the `@…` ones and `type`.
    Other(Map<String, Value>),
}

/// Why a line of the stream could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UiStreamError {
    #[error("UI stream line is not JSON: {message}")]
    NotJson { message: String },
    #[error("UI stream line must be a JSON object")]
    NotAnObject,
    #[error("UI stream message of type {message_type:?} does not match its schema: {message}")]
    Schema {
        message_type: String,
        message: String,
    },
}

/// The `version` message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// OpenTofu's version (`"tofu"`); Terraform writes `"terraform"` instead.
    #[serde(default)]
    pub tofu: Option<String>,
    #[serde(default)]
    pub terraform: Option<String>,
    /// The UI stream format version.
    #[serde(default)]
    pub ui: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A diagnostic (error or warning). Its snippet can quote configuration and values, so it
/// is redacted like any other log text before leaving the runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub severity: String,
    pub summary: String,
    #[serde(default)]
    pub detail: Option<String>,
    #[serde(default)]
    pub address: Option<String>,
    #[serde(default)]
    pub range: Option<Value>,
    #[serde(default)]
    pub snippet: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The resource a message is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UiResource {
    pub addr: String,
    #[serde(default)]
    pub module: String,
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub implied_provider: String,
    #[serde(default)]
    pub resource_type: String,
    #[serde(default)]
    pub resource_name: String,
    #[serde(default)]
    pub resource_key: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `planned_change` and `resource_drift`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedChange {
    pub resource: UiResource,
    #[serde(default)]
    pub previous_resource: Option<UiResource>,
    /// `noop`, `create`, `read`, `update`, `replace`, `delete`, `move`, `import`, `forget`, …
    pub action: String,
    /// Free text, e.g. `cannot_update`, `tainted`, `delete_because_no_resource_config`.
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `change_summary`: what a plan would do or what an apply/destroy did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeSummary {
    pub add: u64,
    pub change: u64,
    pub remove: u64,
    /// Absent in Terraform's stream.
    #[serde(default)]
    pub import: u64,
    #[serde(default)]
    pub forget: u64,
    /// `plan`, `apply` or `destroy`.
    pub operation: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One output in an `outputs` message: after a plan `action` is set, after an apply `value`
/// (in clear even when sensitive: see [`crate::mask_ui_message`]). Its `Debug` form hides a
/// sensitive value.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct UiOutput {
    #[serde(default)]
    pub sensitive: bool,
    #[serde(rename = "type", default)]
    pub value_type: Option<Value>,
    #[serde(default)]
    pub value: Option<Value>,
    #[serde(default)]
    pub action: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl fmt::Debug for UiOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("UiOutput");
        debug.field("sensitive", &self.sensitive);
        if self.sensitive {
            debug.field("value", &format_args!("<sensitive>"));
        } else {
            debug.field("value", &self.value);
        }
        debug
            .field("value_type", &self.value_type)
            .field("action", &self.action)
            .finish_non_exhaustive()
    }
}

/// The hook of apply, refresh and provision messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hook {
    pub resource: UiResource,
    #[serde(default)]
    pub action: Option<String>,
    #[serde(default)]
    pub id_key: Option<String>,
    #[serde(default)]
    pub id_value: Option<String>,
    #[serde(default)]
    pub elapsed_seconds: Option<f64>,
    #[serde(default)]
    pub provisioner: Option<String>,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Deserialize)]
struct HookWrapper {
    hook: Hook,
}

#[derive(Deserialize)]
struct ChangeWrapper {
    change: PlannedChange,
}

#[derive(Deserialize)]
struct SummaryWrapper {
    changes: ChangeSummary,
}

#[derive(Deserialize)]
struct OutputsWrapper {
    #[serde(default, deserialize_with = "null_as_default")]
    outputs: BTreeMap<String, UiOutput>,
}

#[derive(Deserialize)]
struct DiagnosticWrapper {
    diagnostic: Diagnostic,
}

/// Parses one line of the stream (surrounding whitespace allowed).
pub fn parse_ui_line(line: &str) -> Result<UiMessage, UiStreamError> {
    let value: Value =
        serde_json::from_str(line.trim()).map_err(|error| UiStreamError::NotJson {
            message: error.to_string(),
        })?;
    UiMessage::from_value(value)
}

impl UiMessage {
    /// Decodes one message already parsed as JSON.
    pub fn from_value(value: Value) -> Result<Self, UiStreamError> {
        let Value::Object(mut fields) = value else {
            return Err(UiStreamError::NotAnObject);
        };
        let mut take_string = |key: &str| match fields.remove(key) {
            Some(Value::String(text)) => Some(text),
            _ => None,
        };
        let level = take_string("@level").unwrap_or_default();
        let message = take_string("@message").unwrap_or_default();
        let module = take_string("@module");
        let timestamp = take_string("@timestamp");
        let message_type = take_string("type");
        let kind = message_type.clone().unwrap_or_default();
        let body = Value::Object(fields);
        let hook = |body: &Value| decode::<HookWrapper>(body, &kind).map(|w| w.hook);
        let event = match kind.as_str() {
            "version" => UiEvent::Version(decode(&body, &kind)?),
            "log" | "" => UiEvent::Log,
            "diagnostic" => {
                UiEvent::Diagnostic(decode::<DiagnosticWrapper>(&body, &kind)?.diagnostic)
            }
            "planned_change" => {
                UiEvent::PlannedChange(decode::<ChangeWrapper>(&body, &kind)?.change)
            }
            "resource_drift" => {
                UiEvent::ResourceDrift(decode::<ChangeWrapper>(&body, &kind)?.change)
            }
            "change_summary" => {
                UiEvent::ChangeSummary(decode::<SummaryWrapper>(&body, &kind)?.changes)
            }
            "outputs" => UiEvent::Outputs(decode::<OutputsWrapper>(&body, &kind)?.outputs),
            "apply_start" => UiEvent::ApplyStart(hook(&body)?),
            "apply_progress" => UiEvent::ApplyProgress(hook(&body)?),
            "apply_complete" => UiEvent::ApplyComplete(hook(&body)?),
            "apply_errored" => UiEvent::ApplyErrored(hook(&body)?),
            "refresh_start" => UiEvent::RefreshStart(hook(&body)?),
            "refresh_complete" => UiEvent::RefreshComplete(hook(&body)?),
            "provision_start" => UiEvent::ProvisionStart(hook(&body)?),
            "provision_progress" => UiEvent::ProvisionProgress(hook(&body)?),
            "provision_complete" => UiEvent::ProvisionComplete(hook(&body)?),
            "provision_errored" => UiEvent::ProvisionErrored(hook(&body)?),
            _ => UiEvent::Other(body.as_object().cloned().unwrap_or_default()),
        };
        Ok(UiMessage {
            level,
            message,
            module,
            timestamp,
            message_type,
            event,
        })
    }
}

fn decode<T: DeserializeOwned>(body: &Value, kind: &str) -> Result<T, UiStreamError> {
    T::deserialize(body).map_err(|error| UiStreamError::Schema {
        message_type: kind.to_owned(),
        message: message_without_position(&error),
    })
}
