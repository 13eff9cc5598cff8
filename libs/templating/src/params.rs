//! Parameter values: checking a value against its declaration, and the effective values of
//! a resolve (request, then environment override, then default).
use std::collections::BTreeMap;

use crate::document::{ParamType, Parameter, Template};
use crate::problem::{ProblemKind, Problems};

/// A parameter's effective value.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    Plain(serde_json::Value),
    /// A sensitive parameter: the reference the runner resolves into `TF_VAR_<name>`.
    Reference(String),
}

fn size_of(p: &Parameter, v: &serde_json::Value) -> Option<f64> {
    match (p.ty, v) {
        (ParamType::Number, serde_json::Value::Number(n)) => n.as_f64(),
        (ParamType::String, serde_json::Value::String(s)) => Some(s.chars().count() as f64),
        (ParamType::List, serde_json::Value::Array(a)) => Some(a.len() as f64),
        (ParamType::Map, serde_json::Value::Object(o)) => Some(o.len() as f64),
        _ => None,
    }
}

/// Checks a (non-sensitive) value against the parameter's type, enum, pattern and bounds.
pub fn check_value(p: &Parameter, v: &serde_json::Value) -> Result<(), String> {
    let type_ok = matches!(
        (p.ty, v),
        (ParamType::String, serde_json::Value::String(_))
            | (ParamType::Number, serde_json::Value::Number(_))
            | (ParamType::Bool, serde_json::Value::Bool(_))
            | (ParamType::List, serde_json::Value::Array(_))
            | (ParamType::Map, serde_json::Value::Object(_))
    );
    if !type_ok {
        return Err(format!(
            "expected a {}, found {}",
            p.ty.as_str(),
            json_type(v)
        ));
    }
    if let Some(allowed) = &p.allowed
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
        return Err(format!("{v} is not one of [{}]", list.join(", ")));
    }
    if let (Some(re), serde_json::Value::String(s)) = (&p.pattern, v)
        && !re.is_match(s)
    {
        return Err(format!(
            "{s:?} does not match the pattern {:?}",
            re.as_str()
        ));
    }
    let what = match p.ty {
        ParamType::Number => "value",
        ParamType::String => "length",
        ParamType::List | ParamType::Map | ParamType::Bool => "size",
    };
    if let Some(n) = size_of(p, v) {
        if let Some(min) = p.min
            && n < min
        {
            return Err(format!("{what} {n} is below the minimum {min}"));
        }
        if let Some(max) = p.max
            && n > max
        {
            return Err(format!("{what} {n} is above the maximum {max}"));
        }
    }
    Ok(())
}

/// A given value converted to the parameter's type where OpenTofu converts it: a number or a
/// bool given for a string parameter is its string form (`--param db_engine_version=17` is
/// `"17"`, as `-var` would make it). Every other value is taken as it is.
fn converted(p: &Parameter, v: &serde_json::Value) -> serde_json::Value {
    match (p.ty, v) {
        (ParamType::String, serde_json::Value::Number(n)) => {
            serde_json::Value::String(n.to_string())
        }
        (ParamType::String, serde_json::Value::Bool(b)) => serde_json::Value::String(b.to_string()),
        _ => v.clone(),
    }
}

/// The JSON type name of a value.
pub fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "list",
        serde_json::Value::Object(_) => "map",
    }
}

/// A reference to a secret: non-empty, printable, no whitespace, bounded.
fn valid_reference(s: &str) -> bool {
    !s.is_empty() && s.len() <= 2048 && s.chars().all(|c| c.is_ascii_graphic())
}

/// The effective parameter values: the request's, else the environment's override (matched
/// after normalisation, see [`Template::environment`]), else the default. Unknown names,
/// missing values and invalid values are all reported.
pub fn effective(
    template: &Template,
    environment: &cairn_contract::Environment,
    given: &BTreeMap<String, serde_json::Value>,
) -> Result<BTreeMap<String, ParamValue>, Problems> {
    let mut problems = Problems::default();
    let env = template.environment(environment);
    for name in given.keys() {
        if !template.parameters.iter().any(|p| &p.name == name) {
            problems.push(
                ProblemKind::UnknownParameter,
                format!("parameters.{name}"),
                Default::default(),
                format!("the template has no parameter {name:?}"),
            );
        }
    }
    let mut out = BTreeMap::new();
    for p in &template.parameters {
        let path = format!("parameters.{}", p.name);
        let env_value = env
            .and_then(|e| e.parameters.iter().find(|(k, _)| k.name == p.name))
            .map(|(_, n)| n.to_json());
        let value = given
            .get(&p.name)
            .map(|v| converted(p, v))
            .or(env_value)
            .or_else(|| p.default.clone());
        let Some(value) = value else {
            problems.push(
                ProblemKind::InvalidParameter,
                &path,
                p.loc,
                format!(
                    "parameter {:?} has no default and no value was given",
                    p.name
                ),
            );
            continue;
        };
        if p.sensitive {
            match &value {
                serde_json::Value::String(s) if valid_reference(s) => {
                    out.insert(p.name.clone(), ParamValue::Reference(s.clone()));
                }
                _ => problems.push(
                    ProblemKind::InvalidParameter,
                    &path,
                    p.loc,
                    "a sensitive parameter takes a reference (a non-empty string without whitespace, e.g. a secret ARN), never the secret",
                ),
            }
            continue;
        }
        match check_value(p, &value) {
            Ok(()) => {
                out.insert(p.name.clone(), ParamValue::Plain(value));
            }
            Err(m) => problems.push(ProblemKind::InvalidParameter, &path, p.loc, m),
        }
    }
    problems.into_result(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "name: t
parameters:
  version:
    type: string
    enum: [\"15\", \"16\"]
  replicas:
    type: number
    default: 1
resources:
  net:
    module: local/network
    inputs:
      name: n
";

    fn given(pairs: &[(&str, serde_json::Value)]) -> BTreeMap<String, serde_json::Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn a_number_given_for_a_string_parameter_is_its_string_form_and_nothing_else_converts() {
        let t = crate::document::parse(DOC, &crate::Limits::default()).expect("parses");
        let env = cairn_contract::Environment::parse("staging").unwrap();
        let out = effective(&t, &env, &given(&[("version", serde_json::json!(16))])).unwrap();
        assert_eq!(out["version"], ParamValue::Plain(serde_json::json!("16")));
        // Still checked after the conversion: 17 is not allowed.
        let p = effective(&t, &env, &given(&[("version", serde_json::json!(17))])).unwrap_err();
        assert!(p.to_string().contains("not one of"), "{p}");
        // A string is never made a number.
        let p = effective(
            &t,
            &env,
            &given(&[
                ("version", serde_json::json!("16")),
                ("replicas", serde_json::json!("2")),
            ]),
        )
        .unwrap_err();
        assert!(
            p.to_string().contains("expected a number, found string"),
            "{p}"
        );
    }
}
