//! What the resolver knows about a module: its variables and outputs (from its `.tf` files,
//! parsed with hcl-rs) and its `module.cairn.json` (kind, wiring, target inputs).
use std::collections::BTreeMap;

use hcl::{Expression, ObjectKey};
use serde::Deserialize;

/// An OpenTofu type constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeSpec {
    Any,
    String,
    Number,
    Bool,
    List(Box<TypeSpec>),
    Set(Box<TypeSpec>),
    Map(Box<TypeSpec>),
    /// Attributes with whether each is optional.
    Object(BTreeMap<String, (TypeSpec, bool)>),
    Tuple(Vec<TypeSpec>),
}

impl std::fmt::Display for TypeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TypeSpec::Any => f.write_str("any"),
            TypeSpec::String => f.write_str("string"),
            TypeSpec::Number => f.write_str("number"),
            TypeSpec::Bool => f.write_str("bool"),
            TypeSpec::List(t) => write!(f, "list({t})"),
            TypeSpec::Set(t) => write!(f, "set({t})"),
            TypeSpec::Map(t) => write!(f, "map({t})"),
            TypeSpec::Object(attrs) => {
                f.write_str("object({")?;
                for (i, (k, (t, opt))) in attrs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    if *opt {
                        write!(f, "{k}=optional({t})")?;
                    } else {
                        write!(f, "{k}={t}")?;
                    }
                }
                f.write_str("})")
            }
            TypeSpec::Tuple(ts) => {
                f.write_str("tuple([")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str("])")
            }
        }
    }
}

impl TypeSpec {
    /// Whether a JSON value conforms (with OpenTofu's primitive conversions: numbers and
    /// bools convert to strings, numeric strings to numbers, "true"/"false" to bools).
    pub fn accepts(&self, v: &serde_json::Value) -> Result<(), String> {
        use serde_json::Value as J;
        let mismatch = || {
            Err(format!(
                "expected {self}, found {}",
                crate::params::json_type(v)
            ))
        };
        match (self, v) {
            (TypeSpec::Any, _) | (_, J::Null) => Ok(()),
            (TypeSpec::String, J::String(_) | J::Number(_) | J::Bool(_)) => Ok(()),
            (TypeSpec::Number, J::Number(_)) => Ok(()),
            (TypeSpec::Number, J::String(s)) if s.parse::<f64>().is_ok() => Ok(()),
            (TypeSpec::Bool, J::Bool(_)) => Ok(()),
            (TypeSpec::Bool, J::String(s)) if s == "true" || s == "false" => Ok(()),
            (TypeSpec::List(t) | TypeSpec::Set(t), J::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    t.accepts(item).map_err(|m| format!("[{i}]: {m}"))?;
                }
                Ok(())
            }
            (TypeSpec::Tuple(ts), J::Array(items)) => {
                if ts.len() != items.len() {
                    return Err(format!(
                        "expected {} elements, found {}",
                        ts.len(),
                        items.len()
                    ));
                }
                for (i, (t, item)) in ts.iter().zip(items).enumerate() {
                    t.accepts(item).map_err(|m| format!("[{i}]: {m}"))?;
                }
                Ok(())
            }
            (TypeSpec::Map(t), J::Object(o)) => {
                for (k, item) in o {
                    t.accepts(item).map_err(|m| format!(".{k}: {m}"))?;
                }
                Ok(())
            }
            (TypeSpec::Object(attrs), J::Object(o)) => {
                for (k, (t, optional)) in attrs {
                    match o.get(k) {
                        Some(item) => t.accepts(item).map_err(|m| format!(".{k}: {m}"))?,
                        None if *optional => {}
                        None => return Err(format!("missing attribute {k:?} (expected {self})")),
                    }
                }
                Ok(())
            }
            _ => mismatch(),
        }
    }

    /// Whether a parameter of type `p` can be passed to a variable of this type.
    pub fn accepts_param(&self, p: crate::document::ParamType) -> bool {
        use crate::document::ParamType as P;
        matches!(
            (self, p),
            (TypeSpec::Any, _)
                | (TypeSpec::String, P::String | P::Number | P::Bool)
                | (TypeSpec::Number, P::Number | P::String)
                | (TypeSpec::Bool, P::Bool | P::String)
                | (
                    TypeSpec::List(_) | TypeSpec::Set(_) | TypeSpec::Tuple(_),
                    P::List
                )
                | (TypeSpec::Map(_) | TypeSpec::Object(_), P::Map)
        )
    }
}

/// A module variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    pub ty: TypeSpec,
    /// No default: the template (or the target, or the physical name) must supply it.
    pub required: bool,
    pub sensitive: bool,
}

/// A module output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub sensitive: bool,
}

/// A module of the library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleSpec {
    /// `<family>/<kind dir>`, e.g. `local/database`; the root config uses
    /// `./modules/<source>`.
    pub source: String,
    /// The logical kind from `module.cairn.json` (what wiring matches on).
    pub kind: String,
    pub variables: BTreeMap<String, Variable>,
    pub outputs: BTreeMap<String, Output>,
    /// Wiring variable → the upstream kind it expects.
    pub wiring: BTreeMap<String, String>,
    /// Variables filled from the target's settings.
    pub target_inputs: Vec<String>,
}

/// Why a module cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    #[error("{file}: {message}")]
    Hcl { file: String, message: String },
    #[error("module.cairn.json: {0}")]
    Manifest(String),
    #[error("variable {variable:?}: {message}")]
    Variable { variable: String, message: String },
    #[error("module.cairn.json names variable {0:?}, which the module does not declare")]
    UndeclaredVariable(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    kind: String,
    #[serde(default)]
    wiring: BTreeMap<String, String>,
    #[serde(default)]
    target_inputs: Vec<String>,
}

fn type_of(expr: &Expression) -> Result<TypeSpec, String> {
    match expr {
        Expression::Variable(v) => match v.as_str() {
            "string" => Ok(TypeSpec::String),
            "number" => Ok(TypeSpec::Number),
            "bool" => Ok(TypeSpec::Bool),
            "any" => Ok(TypeSpec::Any),
            "list" => Ok(TypeSpec::List(Box::new(TypeSpec::Any))),
            "map" => Ok(TypeSpec::Map(Box::new(TypeSpec::Any))),
            "set" => Ok(TypeSpec::Set(Box::new(TypeSpec::Any))),
            other => Err(format!("unknown type {other:?}")),
        },
        Expression::FuncCall(call) => {
            let name = call.name.name.as_str();
            let arg = |i: usize| {
                call.args
                    .get(i)
                    .ok_or_else(|| format!("{name}() needs an argument"))
            };
            match name {
                "list" => Ok(TypeSpec::List(Box::new(type_of(arg(0)?)?))),
                "set" => Ok(TypeSpec::Set(Box::new(type_of(arg(0)?)?))),
                "map" => Ok(TypeSpec::Map(Box::new(type_of(arg(0)?)?))),
                "tuple" => match arg(0)? {
                    Expression::Array(items) => Ok(TypeSpec::Tuple(
                        items.iter().map(type_of).collect::<Result<_, _>>()?,
                    )),
                    _ => Err("tuple() takes a list of types".to_owned()),
                },
                "object" => match arg(0)? {
                    Expression::Object(attrs) => {
                        let mut out = BTreeMap::new();
                        for (k, v) in attrs {
                            let key = match k {
                                ObjectKey::Identifier(i) => i.as_str().to_owned(),
                                ObjectKey::Expression(Expression::String(s)) => s.clone(),
                                other => {
                                    return Err(format!("unsupported object key {other:?}"));
                                }
                            };
                            let (ty, optional) = match v {
                                Expression::FuncCall(c) if c.name.name.as_str() == "optional" => {
                                    let inner = c
                                        .args
                                        .first()
                                        .ok_or_else(|| "optional() needs a type".to_owned())?;
                                    (type_of(inner)?, true)
                                }
                                other => (type_of(other)?, false),
                            };
                            out.insert(key, (ty, optional));
                        }
                        Ok(TypeSpec::Object(out))
                    }
                    _ => Err("object() takes a map of attribute types".to_owned()),
                },
                other => Err(format!("unknown type constructor {other}()")),
            }
        }
        Expression::Parenthesis(inner) => type_of(inner),
        other => Err(format!("unsupported type expression {other:?}")),
    }
}

fn bool_attr(body: &hcl::Body, name: &str) -> bool {
    body.attributes()
        .find(|a| a.key() == name)
        .is_some_and(|a| matches!(a.expr(), Expression::Bool(true)))
}

fn label(block: &hcl::Block) -> Option<String> {
    block.labels().first().map(|l| l.as_str().to_owned())
}

impl ModuleSpec {
    /// Builds the spec from the module's `.tf` files (name, text) and its `module.cairn.json`.
    pub fn from_sources(
        source: &str,
        tf_files: &[(String, String)],
        manifest_json: &str,
    ) -> Result<ModuleSpec, ModuleError> {
        let manifest: Manifest = serde_json::from_str(manifest_json)
            .map_err(|e| ModuleError::Manifest(e.to_string()))?;
        let mut variables = BTreeMap::new();
        let mut outputs = BTreeMap::new();
        for (file, text) in tf_files {
            let body = hcl::parse(text).map_err(|e| ModuleError::Hcl {
                file: file.clone(),
                message: e.to_string(),
            })?;
            for block in body.blocks() {
                let Some(name) = label(block) else { continue };
                match block.identifier() {
                    "variable" => {
                        let b = block.body();
                        let ty = match b.attributes().find(|a| a.key() == "type") {
                            Some(a) => {
                                type_of(a.expr()).map_err(|message| ModuleError::Variable {
                                    variable: name.clone(),
                                    message,
                                })?
                            }
                            None => TypeSpec::Any,
                        };
                        let required = !b.attributes().any(|a| a.key() == "default");
                        variables.insert(
                            name,
                            Variable {
                                ty,
                                required,
                                sensitive: bool_attr(b, "sensitive"),
                            },
                        );
                    }
                    "output" => {
                        outputs.insert(
                            name,
                            Output {
                                sensitive: bool_attr(block.body(), "sensitive"),
                            },
                        );
                    }
                    _ => {}
                }
            }
        }
        for v in manifest.wiring.keys().chain(manifest.target_inputs.iter()) {
            if !variables.contains_key(v) {
                return Err(ModuleError::UndeclaredVariable(v.clone()));
            }
        }
        Ok(ModuleSpec {
            source: source.to_owned(),
            kind: manifest.kind,
            variables,
            outputs,
            wiring: manifest.wiring,
            target_inputs: manifest.target_inputs,
        })
    }

    /// The outputs passed downstream when this module is wired as a whole object.
    pub fn public_outputs(&self) -> Vec<String> {
        self.outputs
            .iter()
            .filter(|(_, o)| !o.sensitive)
            .map(|(k, _)| k.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_variables_outputs_and_manifest() {
        let tf = r#"
variable "network" {
  type = object({ id = string, cidr = string, tags = optional(map(string)) })
}
variable "size" {
  type    = number
  default = 1
}
variable "base_dir" { type = string }
variable "secret_ref" {
  type      = string
  sensitive = true
}
output "host" { value = "x" }
output "password" {
  value     = "y"
  sensitive = true
}
"#;
        let m = ModuleSpec::from_sources(
            "local/database",
            &[("main.tf".into(), tf.into())],
            r#"{"kind":"database","wiring":{"network":"network"},"target_inputs":["base_dir"]}"#,
        )
        .unwrap();
        assert_eq!(m.kind, "database");
        assert!(m.variables["network"].required);
        assert!(!m.variables["size"].required);
        assert!(m.variables["secret_ref"].sensitive);
        assert!(m.outputs["password"].sensitive);
        assert_eq!(m.public_outputs(), vec!["host".to_owned()]);
        let TypeSpec::Object(attrs) = &m.variables["network"].ty else {
            panic!()
        };
        assert!(attrs["tags"].1);
        assert!(!attrs["id"].1);
    }

    #[test]
    fn manifest_must_name_declared_variables() {
        let e = ModuleSpec::from_sources(
            "local/x",
            &[("main.tf".into(), "variable \"a\" {}\n".into())],
            r#"{"kind":"x","target_inputs":["base_dir"]}"#,
        )
        .unwrap_err();
        assert!(matches!(e, ModuleError::UndeclaredVariable(v) if v == "base_dir"));
    }

    #[test]
    fn type_acceptance() {
        let t = TypeSpec::List(Box::new(TypeSpec::Number));
        assert!(t.accepts(&serde_json::json!([1, "2"])).is_ok());
        assert!(t.accepts(&serde_json::json!(["x"])).is_err());
        assert!(TypeSpec::Bool.accepts(&serde_json::json!("yes")).is_err());
    }
}
