//! The one renderer: a resolved resource plus its upstreams' outputs → the final root
//! config (`.tf.json`) and its hash. Every literal string (and object key) it writes is
//! escaped (`${` → `$${`, `%{` → `%%{`), so no parameter or output value can become an
//! expression; the only expressions are the ones written here (`var.*`, `module.this.*`).
use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::hash::{canonical_json, sha256_hex};
use crate::snapshot::{Binding, ResolvedResource};

/// Upstream resource name → its outputs (as `tofu output -json` values).
pub type UpstreamOutputs = BTreeMap<String, BTreeMap<String, Value>>;

/// A rendered root config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedConfig {
    /// Canonical JSON (sorted keys), newline-terminated.
    pub tf_json: String,
    /// sha256 of `tf_json`; sensitive values are never in the file, so never in the hash.
    pub config_hash: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("resource {resource:?} needs the outputs of {upstream:?}, which were not given")]
    MissingUpstream { resource: String, upstream: String },
    #[error(
        "resource {resource:?} needs output {output:?} of {upstream:?}, which it does not have"
    )]
    MissingOutput {
        resource: String,
        upstream: String,
        output: String,
    },
}

/// Makes a literal inert inside an OpenTofu string template.
pub fn escape_template(s: &str) -> String {
    s.replace("${", "$${").replace("%{", "%%{")
}

/// Escapes every string and object key of a literal value.
pub fn escape_value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(escape_template(s)),
        Value::Array(items) => Value::Array(items.iter().map(escape_value).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (escape_template(k), escape_value(v)))
                .collect(),
        ),
        Value::Null | Value::Bool(_) | Value::Number(_) => v.clone(),
    }
}

/// The module source path inside the run's work dir.
pub fn module_source(module: &str) -> String {
    format!("./modules/{module}")
}

pub fn render(
    resource: &ResolvedResource,
    upstream: &UpstreamOutputs,
) -> Result<RenderedConfig, RenderError> {
    let outputs_of = |up: &str| {
        upstream
            .get(up)
            .ok_or_else(|| RenderError::MissingUpstream {
                resource: resource.name.clone(),
                upstream: up.to_owned(),
            })
    };
    let output_of = |up: &str, out: &str| -> Result<&Value, RenderError> {
        outputs_of(up)?
            .get(out)
            .ok_or_else(|| RenderError::MissingOutput {
                resource: resource.name.clone(),
                upstream: up.to_owned(),
                output: out.to_owned(),
            })
    };

    let mut module = Map::new();
    module.insert(
        "source".to_owned(),
        Value::String(module_source(&resource.module)),
    );
    for (name, binding) in &resource.inputs {
        let value = match binding {
            Binding::Literal { value } => escape_value(value),
            Binding::Output {
                resource: up,
                output,
            } => escape_value(output_of(up, output)?),
            Binding::Outputs {
                resource: up,
                outputs,
            } => {
                let mut obj = Map::new();
                for out in outputs {
                    obj.insert(escape_template(out), escape_value(output_of(up, out)?));
                }
                Value::Object(obj)
            }
            // The one expression a root config takes from outside: a sensitive variable.
            Binding::Sensitive { variable } => Value::String(format!("${{var.{variable}}}")),
        };
        module.insert(name.clone(), value);
    }

    let mut root = Map::new();
    root.insert("terraform".to_owned(), json!({"backend": {"http": {}}}));
    if !resource.sensitive_variables.is_empty() {
        let vars: Map<String, Value> = resource
            .sensitive_variables
            .keys()
            .map(|v| (v.clone(), json!({"type": "string", "sensitive": true})))
            .collect();
        root.insert("variable".to_owned(), Value::Object(vars));
    }
    root.insert(
        "module".to_owned(),
        json!({ "this": Value::Object(module) }),
    );
    if !resource.outputs.is_empty() {
        let outs: Map<String, Value> = resource
            .outputs
            .iter()
            .map(|(name, sensitive)| {
                (
                    name.clone(),
                    json!({"value": format!("${{module.this.{name}}}"), "sensitive": sensitive}),
                )
            })
            .collect();
        root.insert("output".to_owned(), Value::Object(outs));
    }
    let mut tf_json = canonical_json(&Value::Object(root));
    tf_json.push('\n');
    let config_hash = sha256_hex(tf_json.as_bytes());
    Ok(RenderedConfig {
        tf_json,
        config_hash,
    })
}
