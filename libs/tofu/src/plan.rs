//! OpenTofu's plan JSON (`tofu show -json PLANFILE`, format version 1.x) as a typed model
//! that keeps every field it does not name, so newer OpenTofu releases still parse.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::error::{PlanError, message_without_position};

/// The only major plan format version this crate reads.
pub const PLAN_FORMAT_MAJOR: &str = "1";

/// A plan as printed by `tofu show -json PLANFILE`. Its `Debug` form leaves out every value
/// (variables, planned and prior values, configuration), which may be sensitive.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// `"1.0"`, `"1.1"`, `"1.2"`, …
    pub format_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terraform_version: Option<String>,
    /// Root module input variables, in clear even when sensitive (see [`crate::mask_plan`]).
    #[serde(default, deserialize_with = "null_as_default")]
    pub variables: BTreeMap<String, PlanVariable>,
    /// The planned state (`outputs`, `root_module`), kept as JSON. Always present: a
    /// document without it is not a plan.
    pub planned_values: Value,
    /// Changes made outside OpenTofu that the refresh found.
    #[serde(default, deserialize_with = "null_as_default")]
    pub resource_drift: Vec<ResourceChange>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub resource_changes: Vec<ResourceChange>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub output_changes: BTreeMap<String, Change>,
    /// The state the plan was made from, in the state JSON format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior_state: Option<Value>,
    /// The configuration, with constant expressions in clear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<Value>,
    /// Set when planning failed; such a plan cannot be applied.
    #[serde(default)]
    pub errored: bool,
    /// Fields this model does not name (`relevant_attributes`, `checks`, `timestamp`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("format_version", &self.format_version)
            .field("terraform_version", &self.terraform_version)
            .field("errored", &self.errored)
            .field("variables", &self.variables.keys().collect::<Vec<_>>())
            .field("resource_changes", &self.resource_changes)
            .field("resource_drift", &self.resource_drift)
            .field("output_changes", &self.output_changes)
            .field("extra", &self.extra.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// One root module input variable of a plan.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanVariable {
    #[serde(default)]
    pub value: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl fmt::Debug for PlanVariable {
    /// Never prints the value: whether it is sensitive is only known from the configuration.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlanVariable")
            .field("value", &format_args!("<hidden>"))
            .finish_non_exhaustive()
    }
}

/// A planned (or drifted) change of one resource instance object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceChange {
    /// Absolute instance address, e.g. `module.a["x"].aws_instance.web[0]`.
    pub address: String,
    /// The address before a `moved` block took effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_address: Option<String>,
    /// `managed` or `data`.
    #[serde(default)]
    pub mode: String,
    #[serde(rename = "type", default)]
    pub resource_type: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<Value>,
    #[serde(default)]
    pub provider_name: String,
    /// Set when the change is about a deposed object of this address, not its current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deposed: Option<String>,
    pub change: Change,
    /// Why OpenTofu chose the action (`replace_because_tainted`, `delete_because_no_module`,
    /// …). Free text to this crate: new reasons appear with new releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_reason: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ResourceChange {
    pub fn is_data(&self) -> bool {
        self.mode == "data"
    }
}

/// The before/after of a resource instance or an output. Its `Debug` form leaves out the
/// values, which may be sensitive.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub actions: Vec<Action>,
    #[serde(default)]
    pub before: Value,
    #[serde(default)]
    pub after: Value,
    /// `true` or a structure of `true` leaves where the value is only known after apply.
    #[serde(default)]
    pub after_unknown: Value,
    /// `true` (the whole value) or a structure of `true` leaves marking sensitive parts.
    #[serde(default)]
    pub before_sensitive: Value,
    #[serde(default)]
    pub after_sensitive: Value,
    /// Attribute paths that force the replacement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_paths: Option<Vec<Value>>,
    /// Present when the object is being imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importing: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_config: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl fmt::Debug for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Change")
            .field("actions", &self.actions)
            .field("replace_paths", &self.replace_paths)
            .field("importing", &self.importing.is_some())
            .finish_non_exhaustive()
    }
}

impl Change {
    pub fn has(&self, action: &Action) -> bool {
        self.actions.contains(action)
    }

    /// `["delete","create"]` or `["create","delete"]` (create before destroy).
    pub fn is_replace(&self) -> bool {
        self.has(&Action::Create) && self.has(&Action::Delete)
    }

    /// Nothing but `no-op` (an empty list counts as no change too).
    pub fn is_no_op(&self) -> bool {
        self.actions.iter().all(|action| *action == Action::NoOp)
    }
}

/// One element of a change's `actions` list. Strings this crate does not know are kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Action {
    NoOp,
    Create,
    Read,
    Update,
    Delete,
    Forget,
    Other(String),
}

impl Action {
    pub fn as_str(&self) -> &str {
        match self {
            Action::NoOp => "no-op",
            Action::Create => "create",
            Action::Read => "read",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Forget => "forget",
            Action::Other(other) => other,
        }
    }
}

impl From<String> for Action {
    fn from(text: String) -> Self {
        match text.as_str() {
            "no-op" => Action::NoOp,
            "create" => Action::Create,
            "read" => Action::Read,
            "update" => Action::Update,
            "delete" => Action::Delete,
            "forget" => Action::Forget,
            _ => Action::Other(text),
        }
    }
}

impl From<Action> for String {
    fn from(action: Action) -> Self {
        match action {
            Action::Other(text) => text,
            known => known.as_str().to_owned(),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Plan {
    /// Parses a plan JSON document of format version 1.x. A repeated key keeps its last
    /// value, as Go's `encoding/json` does.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, PlanError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(PlanError::Empty);
        }
        let value: Value = serde_json::from_slice(bytes).map_err(|error| PlanError::NotJson {
            line: error.line(),
            column: error.column(),
            message: message_without_position(&error),
        })?;
        Self::from_value(value)
    }

    /// [`Plan::from_slice`] for an already decoded document.
    pub fn from_value(value: Value) -> Result<Self, PlanError> {
        let Value::Object(top) = &value else {
            return Err(PlanError::NotAnObject);
        };
        let version = match top.get("format_version") {
            Some(Value::String(version)) => version.clone(),
            Some(_) => {
                return Err(PlanError::Schema {
                    message: "format_version is not a string".to_owned(),
                });
            }
            None => return Err(PlanError::MissingFormatVersion),
        };
        if version.split('.').next() != Some(PLAN_FORMAT_MAJOR) {
            return Err(PlanError::UnsupportedFormatVersion { version });
        }
        // OpenTofu always writes it, even for an errored plan; its absence means another
        // document with a format_version, such as the JSON of a state.
        if !top.contains_key("planned_values") {
            return Err(PlanError::MissingPlannedValues);
        }
        decode(value)
    }
}

fn decode<T: DeserializeOwned>(value: Value) -> Result<T, PlanError> {
    serde_json::from_value(value).map_err(|error| PlanError::Schema {
        message: message_without_position(&error),
    })
}

/// OpenTofu writes `null` for some empty collections; treat it as empty.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
