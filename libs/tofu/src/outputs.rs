//! Root module outputs of a state, and their redacted form for callers outside the
//! coordinator (sensitive values never leave it).

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use crate::error::{DocumentKind, StateError};
use crate::fields::TopLevel;
use crate::state::OutputV4;

/// One root module output as stored in the state. Its `Debug` form hides sensitive values.
#[derive(Clone, PartialEq)]
pub struct OutputValue {
    pub name: String,
    pub value: Value,
    /// The cty type in its JSON form (`"string"`, `["map","string"]`, …); `None` for a
    /// version 3 state, whose `type` field is only `string`, `list` or `map`.
    pub type_json: Option<Value>,
    pub sensitive: bool,
}

/// An output safe to hand out: `value` is `None` when the output is sensitive.
/// A non-sensitive output whose value is null has `Some(Value::Null)`.
#[derive(Debug, Clone, PartialEq)]
pub struct PublicOutput {
    pub name: String,
    pub value: Option<Value>,
    pub type_json: Option<Value>,
    pub sensitive: bool,
}

impl fmt::Debug for OutputValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("OutputValue");
        debug.field("name", &self.name);
        if self.sensitive {
            debug.field("value", &format_args!("<sensitive>"));
        } else {
            debug.field("value", &self.value);
        }
        debug
            .field("type_json", &self.type_json)
            .field("sensitive", &self.sensitive)
            .finish()
    }
}

impl OutputValue {
    /// This output with its value removed if it is sensitive.
    pub fn to_public(&self) -> PublicOutput {
        PublicOutput {
            name: self.name.clone(),
            value: (!self.sensitive).then(|| self.value.clone()),
            type_json: self.type_json.clone(),
            sensitive: self.sensitive,
        }
    }
}

/// The outputs with every sensitive value removed, in the same order.
pub fn public_outputs(outputs: &[OutputValue]) -> Vec<PublicOutput> {
    outputs.iter().map(OutputValue::to_public).collect()
}

/// Version 4: `"outputs": {name: {value, type, sensitive}}` at the top level.
pub(crate) fn read_v4(top: &TopLevel<'_>) -> Result<Vec<OutputValue>, StateError> {
    let outputs = top
        .decode::<BTreeMap<String, OutputV4>>("outputs", DocumentKind::Plain)?
        .unwrap_or_default();
    Ok(outputs
        .into_iter()
        .map(|(name, output)| from_v4(name, output))
        .collect())
}

pub(crate) fn from_v4(name: String, output: OutputV4) -> OutputValue {
    OutputValue {
        name,
        value: output.value,
        type_json: Some(output.value_type),
        sensitive: output.sensitive,
    }
}

#[derive(Deserialize)]
struct ModuleV3 {
    #[serde(default)]
    path: Vec<String>,
    #[serde(default)]
    outputs: Option<BTreeMap<String, OutputV3>>,
}

#[derive(Deserialize)]
struct OutputV3 {
    #[serde(default)]
    sensitive: bool,
    value: Value,
}

/// Version 3: `"modules": [{"path": ["root"], "outputs": {…}}, …]`; only the root module's
/// outputs are root outputs.
pub(crate) fn read_v3(top: &TopLevel<'_>) -> Result<Vec<OutputValue>, StateError> {
    let modules = top
        .decode::<Vec<ModuleV3>>("modules", DocumentKind::Plain)?
        .unwrap_or_default();
    let root = modules.into_iter().find(|module| module.path == ["root"]);
    let outputs = root.and_then(|module| module.outputs).unwrap_or_default();
    Ok(outputs
        .into_iter()
        .map(|(name, output)| OutputValue {
            name,
            value: output.value,
            type_json: None,
            sensitive: output.sensitive,
        })
        .collect())
}
