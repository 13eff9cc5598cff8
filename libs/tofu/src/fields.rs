//! Splits a state document into its top-level fields without decoding their values, so
//! large `resources` arrays are scanned (and so validated as JSON) but never materialised
//! or copied: each field borrows its raw JSON text from the document.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::{DocumentKind, StateError, message_without_position};

/// The top-level fields of a JSON object, each kept as its raw JSON text (borrowed).
pub(crate) struct TopLevel<'a> {
    fields: BTreeMap<String, &'a RawValue>,
}

impl<'a> TopLevel<'a> {
    /// Parses `bytes` as a JSON object. A repeated key keeps its last value, as Go's
    /// `encoding/json` (and so OpenTofu) does.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Self, StateError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(StateError::Empty);
        }
        match serde_json::from_slice::<BTreeMap<String, &'a RawValue>>(bytes) {
            Ok(fields) => Ok(Self { fields }),
            Err(error) if error.is_data() => Err(not_an_object(bytes)),
            Err(error) => Err(not_json(&error)),
        }
    }

    pub(crate) fn contains(&self, field: &str) -> bool {
        self.fields.contains_key(field)
    }

    /// Decodes one field. An absent field and an explicit `null` are both `Ok(None)`.
    pub(crate) fn decode<T: DeserializeOwned>(
        &self,
        field: &'static str,
        kind: DocumentKind,
    ) -> Result<Option<T>, StateError> {
        let Some(raw) = self.fields.get(field) else {
            return Ok(None);
        };
        let invalid = |error: serde_json::Error| StateError::InvalidField {
            kind,
            field,
            message: message_without_position(&error),
        };
        // Through `Value`, so a repeated key inside the field keeps its last value instead of
        // failing as a duplicate field.
        let value: Value = serde_json::from_str(raw.get()).map_err(invalid)?;
        Option::<T>::deserialize(&value).map_err(invalid)
    }
}

pub(crate) fn not_json(error: &serde_json::Error) -> StateError {
    StateError::NotJson {
        line: error.line(),
        column: error.column(),
        message: message_without_position(error),
    }
}

/// serde reports a type mismatch as soon as it sees the first token, even when the rest of
/// the input is not JSON at all; decode the whole value to tell the two apart.
fn not_an_object(bytes: &[u8]) -> StateError {
    match serde_json::from_slice::<Value>(bytes) {
        Err(error) => not_json(&error),
        Ok(value) => StateError::NotAnObject {
            found: json_type_name(&value),
        },
    }
}

fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
