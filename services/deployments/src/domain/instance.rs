//! Instances: their names, how a request names one (id or name), their statuses and their
//! parameters (a JSON object; an update is a merge patch).
use serde_json::{Map, Value};
use uuid::Uuid;

use super::named_enum;

/// How a request names an instance, template or target: its id, or its name in the tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ref {
    Id(Uuid),
    Name(String),
}

impl Ref {
    /// A UUID is an id, anything else a name; empty is refused (the message names `field`).
    pub fn parse(field: &str, s: &str) -> Result<Ref, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err(format!("{field} is required (an id or a name)"));
        }
        Ok(match Uuid::parse_str(s) {
            Ok(id) => Ref::Id(id),
            Err(_) => Ref::Name(s.to_owned()),
        })
    }
}

impl std::fmt::Display for Ref {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ref::Id(id) => write!(f, "{id}"),
            Ref::Name(n) => write!(f, "{n:?}"),
        }
    }
}

/// An instance name: a lowercase letter, then lowercase letters, digits or '-' (at most 63).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceName(String);

impl InstanceName {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut chars = s.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
        let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if first_ok && rest_ok && s.len() <= 63 {
            Ok(InstanceName(s.to_owned()))
        } else {
            Err(format!(
                "invalid instance name {s:?}: use a lowercase letter, then lowercase letters, digits or '-' (at most 63)"
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

named_enum!(
    /// Where an instance is in its life.
    InstanceStatus("instance status") {
        Pending = "pending",
        Deploying = "deploying",
        Active = "active",
        Failed = "failed",
        Destroying = "destroying",
        Destroyed = "destroyed",
    }
);

impl InstanceStatus {
    /// May the instance be deleted? Only before anything was deployed, or once destroyed.
    pub fn deletable(self) -> bool {
        matches!(self, InstanceStatus::Pending | InstanceStatus::Destroyed)
    }
}

/// An instance's parameter values: a JSON object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parameters(Map<String, Value>);

impl Parameters {
    /// Parses `json` (empty is `{}`); anything but a JSON object is refused with a message
    /// that names `field` and the problem.
    pub fn parse(field: &str, json: &str) -> Result<Self, String> {
        if json.trim().is_empty() {
            return Ok(Parameters::default());
        }
        match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(map)) => Ok(Parameters(map)),
            Ok(other) => Err(format!(
                "{field}: expected a JSON object of parameter values, got {}",
                json_type(&other)
            )),
            Err(e) => Err(format!("{field}: not valid JSON: {e}")),
        }
    }

    /// Parameters read back from the database (a JSON object by its CHECK).
    pub fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Object(map) => Ok(Parameters(map)),
            other => Err(format!("stored parameters are {}", json_type(&other))),
        }
    }

    /// Applies a merge patch: each key of `patch` replaces the value, a JSON null removes it.
    pub fn merged(&self, patch: &Parameters) -> Parameters {
        let mut out = self.0.clone();
        for (k, v) in &patch.0 {
            if v.is_null() {
                out.remove(k);
            } else {
                out.insert(k.clone(), v.clone());
            }
        }
        Parameters(out)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn to_value(&self) -> Value {
        Value::Object(self.0.clone())
    }

    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_ids_or_names() {
        let id = Uuid::now_v7();
        assert_eq!(Ref::parse("x", &id.to_string()), Ok(Ref::Id(id)));
        assert_eq!(Ref::parse("x", " shop "), Ok(Ref::Name("shop".into())));
        assert!(
            Ref::parse("instance_ref", "")
                .unwrap_err()
                .contains("instance_ref")
        );
    }

    #[test]
    fn names() {
        assert!(InstanceName::parse("shop-1").is_ok());
        for bad in ["", "1shop", "Shop", "shop_1", &"a".repeat(64)] {
            assert!(InstanceName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn parameters_are_an_object_and_patches_merge() {
        assert!(Parameters::parse("p", "").unwrap().is_empty());
        let e = Parameters::parse("parameters_json", "[1]").unwrap_err();
        assert!(
            e.contains("parameters_json") && e.contains("an array"),
            "{e}"
        );
        let e = Parameters::parse("parameters_json", "{").unwrap_err();
        assert!(e.contains("not valid JSON"), "{e}");
        let p = Parameters::parse("p", r#"{"a": 1, "b": 2}"#).unwrap();
        let patch = Parameters::parse("p", r#"{"a": null, "c": 3}"#).unwrap();
        assert_eq!(p.merged(&patch).to_json(), r#"{"b":2,"c":3}"#);
    }

    #[test]
    fn statuses_round_trip() {
        for s in InstanceStatus::ALL {
            assert_eq!(InstanceStatus::parse(s.as_str()), Ok(*s));
        }
        assert!(InstanceStatus::parse("gone").is_err());
        assert!(InstanceStatus::Pending.deletable());
        assert!(!InstanceStatus::Active.deletable());
    }
}
