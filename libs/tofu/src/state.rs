//! The OpenTofu state file, format version 4, as a typed model that loses nothing: every
//! struct keeps the fields it does not name in `extra`, and serialising follows OpenTofu's
//! own writer (`outputs`, `resources` and `check_results` always present, `false` flags and
//! absent optional fields omitted).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::envelope;
use crate::error::{StateError, message_without_position};
use crate::fields::{TopLevel, not_json};
use crate::header::read_version;
use crate::outputs::{self, OutputValue};

/// A version 4 state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateV4 {
    /// Always 4 for a value returned by [`StateV4::from_slice`].
    pub version: u64,
    /// The OpenTofu (or Terraform) version that wrote the file.
    pub terraform_version: String,
    pub serial: u64,
    /// May be empty in hand-written files; OpenTofu assigns one on its first write.
    pub lineage: String,
    /// Root module outputs by name.
    #[serde(default)]
    pub outputs: BTreeMap<String, OutputV4>,
    #[serde(default)]
    pub resources: Vec<ResourceV4>,
    /// `null` when the configuration has no checks (OpenTofu writes `null` or `[]`).
    #[serde(default)]
    pub check_results: Option<Vec<CheckResultsV4>>,
    /// Fields this model does not name.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One root module output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputV4 {
    pub value: Value,
    /// The cty type in its JSON form, e.g. `"string"` or `["map","string"]`.
    #[serde(rename = "type")]
    pub value_type: Value,
    #[serde(default, skip_serializing_if = "is_false")]
    pub sensitive: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One resource block (all instances of `type.name` in one module).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceV4 {
    /// Module address such as `module.a.module.b`; absent for the root module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// `managed` or `data`.
    pub mode: String,
    #[serde(rename = "type")]
    pub resource_type: String,
    pub name: String,
    /// `list` (count) or `map` (for_each); absent for a single instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub each: Option<String>,
    /// Provider configuration address, e.g. `provider["registry.opentofu.org/hashicorp/null"]`
    /// (legacy files have `provider.null`, which OpenTofu upgrades on read).
    pub provider: String,
    #[serde(default)]
    pub instances: Vec<InstanceV4>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One instance object of a resource (current or deposed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceV4 {
    /// Integer for `count`, string for `for_each`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_key: Option<Value>,
    /// `tainted` when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The deposed key of a deposed object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deposed: Option<String>,
    #[serde(default)]
    pub schema_version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Value>,
    /// The pre-0.12 flatmap encoding, still accepted by OpenTofu.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes_flat: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitive_attributes: Option<Value>,
    /// Provider-private data, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub create_before_destroy: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The results of one checkable object kind at one configuration address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResultsV4 {
    pub object_kind: String,
    pub config_addr: String,
    /// `pass`, `fail`, `error` or `unknown`.
    pub status: String,
    #[serde(default)]
    pub objects: Option<Vec<CheckResultObjectV4>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The check result of one object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResultObjectV4 {
    pub object_addr: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_messages: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl StateV4 {
    /// Parses a plaintext version 4 state file. Unlike [`crate::inspect_state`], an empty
    /// lineage is accepted (OpenTofu accepts it too and assigns one on its next write).
    pub fn from_slice(bytes: &[u8]) -> Result<Self, StateError> {
        let top = TopLevel::parse(bytes)?;
        if envelope::is_envelope(&top) {
            return Err(StateError::Encrypted);
        }
        let version = read_version(&top)?;
        if version != 4 {
            return Err(StateError::UnsupportedVersion { version });
        }
        // Through `Value`: OpenTofu (Go) lets a repeated key overwrite the earlier one, and
        // real fixtures repeat `dependencies`; a derived struct would refuse them.
        let value: Value = serde_json::from_slice(bytes).map_err(|error| not_json(&error))?;
        StateV4::deserialize(&value).map_err(|error| StateError::Schema {
            path: locate_schema_error(&value),
            message: message_without_position(&error),
        })
    }

    /// The root module outputs, ordered by name.
    pub fn output_values(&self) -> Vec<OutputValue> {
        self.outputs
            .iter()
            .map(|(name, output)| outputs::from_v4(name.clone(), output.clone()))
            .collect()
    }
}

/// Finds the smallest part of a v4 state that does not decode, to say where the schema
/// error is. Only called after decoding the whole state failed.
fn locate_schema_error(state: &Value) -> String {
    fn fails<'a, T: Deserialize<'a>>(value: &'a Value) -> bool {
        T::deserialize(value).is_err()
    }
    if let Some(outputs) = state.get("outputs").and_then(Value::as_object) {
        for (name, output) in outputs {
            if fails::<OutputV4>(output) {
                return format!("outputs.{name}");
            }
        }
    }
    if let Some(resources) = state.get("resources").and_then(Value::as_array) {
        for (r, resource) in resources.iter().enumerate() {
            if !fails::<ResourceV4>(resource) {
                continue;
            }
            if let Some(instances) = resource.get("instances").and_then(Value::as_array) {
                for (i, instance) in instances.iter().enumerate() {
                    if fails::<InstanceV4>(instance) {
                        return format!("resources[{r}].instances[{i}]");
                    }
                }
            }
            return format!("resources[{r}]");
        }
    }
    if let Some(checks) = state.get("check_results").and_then(Value::as_array) {
        for (c, check) in checks.iter().enumerate() {
            if fails::<CheckResultsV4>(check) {
                return format!("check_results[{c}]");
            }
        }
    }
    String::new()
}
