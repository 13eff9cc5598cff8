//! The template document: its model and the parser from YAML, which reports every shape
//! problem at once with a path and a line/column.
use std::collections::BTreeMap;

use crate::expr::{Expr, ExprKind, parse_expr};
use crate::problem::{ProblemKind, Problems};
use crate::yaml::{self, Key, Loc, Node, Value};

/// Bounds on what a document may contain.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_document_bytes: usize,
    pub max_resources: usize,
    pub max_parameters: usize,
    pub max_outputs: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_document_bytes: 1024 * 1024,
            max_resources: 2_000,
            max_parameters: 500,
            max_outputs: 500,
        }
    }
}

/// A parsed template document.
#[derive(Debug, Clone)]
pub struct Template {
    pub name: String,
    pub description: String,
    pub parameters: Vec<Parameter>,
    pub environments: Vec<Environment>,
    pub resources: Vec<Resource>,
    /// The instance's outputs, in document order.
    pub outputs: Vec<Output>,
}

impl Template {
    /// The overrides for `environment`, matched after normalisation: a request for `prod`
    /// gets the template's `production:` overrides, as it gets the coordinator's and the
    /// runner's production rules.
    pub fn environment(&self, environment: &cairn_contract::Environment) -> Option<&Environment> {
        self.environments
            .iter()
            .find(|e| e.canonical.as_ref() == Some(environment))
    }
}

/// The type of a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    String,
    Number,
    Bool,
    List,
    Map,
}

impl ParamType {
    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Number => "number",
            ParamType::Bool => "bool",
            ParamType::List => "list",
            ParamType::Map => "map",
        }
    }

    fn parse(s: &str) -> Option<ParamType> {
        Some(match s {
            "string" => ParamType::String,
            "number" => ParamType::Number,
            "bool" => ParamType::Bool,
            "list" => ParamType::List,
            "map" => ParamType::Map,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Parameter {
    pub name: String,
    pub loc: Loc,
    pub ty: ParamType,
    pub description: String,
    pub default: Option<serde_json::Value>,
    pub allowed: Option<Vec<serde_json::Value>>,
    pub pattern: Option<regex::Regex>,
    /// For numbers: the value; for strings: the length; for lists and maps: the size.
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// The value is a reference resolved by the runner into `TF_VAR_<name>`.
    pub sensitive: bool,
}

/// The overrides of one environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Environment {
    /// The name as written (problem paths use it).
    pub name: String,
    /// The name normalised by the one environment rule (`prod`, `Production` →
    /// `production`); `None` when it cannot be (that is reported as a problem).
    pub canonical: Option<cairn_contract::Environment>,
    pub loc: Loc,
    pub parameters: Vec<(Key, Node)>,
    pub resources: Vec<ResourceOverride>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResourceOverride {
    pub name: String,
    pub loc: Loc,
    pub inputs: Vec<Input>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub name: String,
    pub loc: Loc,
    pub module: String,
    pub module_loc: Loc,
    pub depends_on: Vec<(String, Loc)>,
    pub inputs: Vec<Input>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub name: String,
    pub key_loc: Loc,
    pub expr: Expr,
}

/// One entry of `outputs:`: an output of the instance, the value of one module output of
/// one resource (`${resources.<resource>.<output>}`).
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub name: String,
    pub loc: Loc,
    pub description: String,
    pub resource: String,
    pub output: String,
    /// Where the `${resources…}` reference is written.
    pub value_loc: Loc,
    /// Declared `sensitive: true` (a sensitive module output makes it sensitive anyway).
    pub sensitive: bool,
}

/// Names of templates and resources: lowercase letter, then lowercase letters, digits, `-`
/// or `_`; at most 63 characters.
pub fn valid_resource_name(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 63
        && matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Parameter names become OpenTofu variable names: lowercase letter, then lowercase
/// letters, digits or `_`; at most 63 characters.
pub fn valid_param_name(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 63
        && matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

struct Cx {
    problems: Problems,
}

impl Cx {
    fn shape(&mut self, path: &str, loc: Loc, msg: impl Into<String>) {
        self.problems.push(ProblemKind::Shape, path, loc, msg);
    }

    /// The entries of a mapping, or a problem.
    fn map<'n>(&mut self, node: &'n Node, path: &str) -> Option<&'n [(Key, Node)]> {
        match &node.value {
            Value::Map(entries) => Some(entries),
            other => {
                self.shape(
                    path,
                    node.loc,
                    format!("expected a map, found {}", other.type_name()),
                );
                None
            }
        }
    }

    fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            other => {
                self.shape(
                    path,
                    node.loc,
                    format!("expected a string, found {}", other.type_name()),
                );
                None
            }
        }
    }

    fn number(&mut self, node: &Node, path: &str) -> Option<f64> {
        match &node.value {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) if f.is_finite() => Some(*f),
            other => {
                self.shape(
                    path,
                    node.loc,
                    format!("expected a number, found {}", other.type_name()),
                );
                None
            }
        }
    }

    fn unknown_keys(&mut self, entries: &[(Key, Node)], path: &str, known: &[&str]) {
        for (k, _) in entries {
            if !known.contains(&k.name.as_str()) {
                self.shape(
                    &join(path, &k.name),
                    k.loc,
                    format!(
                        "unknown field {:?} (expected one of: {})",
                        k.name,
                        known.join(", ")
                    ),
                );
            }
        }
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn get<'n>(entries: &'n [(Key, Node)], name: &str) -> Option<&'n Node> {
    entries.iter().find(|(k, _)| k.name == name).map(|(_, v)| v)
}

/// Parses a template document. Every problem is reported at once; nothing is returned
/// unless the document is well formed (module and reference checks are in `validate`).
pub fn parse(text: &str, limits: &Limits) -> Result<Template, Problems> {
    let (template, problems) = parse_lenient(text, limits);
    match template {
        Some(t) if problems.is_empty() => Ok(t),
        _ => Err(problems.sorted()),
    }
}

/// Parses as much as can be parsed: the template (missing when the text is not a YAML
/// mapping) and every problem found, so validation can still run on the rest.
pub fn parse_lenient(text: &str, limits: &Limits) -> (Option<Template>, Problems) {
    match parse_inner(text, limits) {
        Ok(t) => (Some(t.0), t.1),
        Err(p) => (None, p),
    }
}

fn parse_inner(text: &str, limits: &Limits) -> Result<(Template, Problems), Problems> {
    let mut cx = Cx {
        problems: Problems::default(),
    };
    if text.len() > limits.max_document_bytes {
        cx.problems.push(
            ProblemKind::TooLarge,
            "",
            Loc::default(),
            format!(
                "document is {} bytes, the limit is {}",
                text.len(),
                limits.max_document_bytes
            ),
        );
        return Err(cx.problems);
    }
    let root = match yaml::parse(text) {
        Ok(n) => n,
        Err(e) => {
            cx.problems.push(ProblemKind::Syntax, "", e.loc, e.message);
            return Err(cx.problems);
        }
    };
    let Some(top) = cx.map(&root, "") else {
        return Err(cx.problems);
    };
    cx.unknown_keys(
        top,
        "",
        &[
            "name",
            "description",
            "parameters",
            "environments",
            "resources",
            "outputs",
        ],
    );

    let name = match get(top, "name") {
        Some(n) => cx.string(n, "name").inspect(|s| {
            if !valid_resource_name(s) {
                cx.problems.push(
                    ProblemKind::InvalidName,
                    "name",
                    n.loc,
                    format!("invalid template name {s:?}: use a lowercase letter, then lowercase letters, digits, '-' or '_' (at most 63)"),
                );
            }
        }),
        None => {
            cx.shape("name", root.loc, "missing field \"name\"");
            None
        }
    };
    let description = get(top, "description")
        .and_then(|n| cx.string(n, "description"))
        .unwrap_or_default();

    let mut parameters = Vec::new();
    if let Some(node) = get(top, "parameters")
        && let Some(entries) = cx.map(node, "parameters")
    {
        if entries.len() > limits.max_parameters {
            cx.problems.push(
                ProblemKind::TooLarge,
                "parameters",
                node.loc,
                format!(
                    "{} parameters, the limit is {}",
                    entries.len(),
                    limits.max_parameters
                ),
            );
        }
        for (k, v) in entries {
            if let Some(p) = parse_parameter(&mut cx, k, v) {
                parameters.push(p);
            }
        }
    }

    let mut resources = Vec::new();
    match get(top, "resources") {
        Some(node) => {
            if let Some(entries) = cx.map(node, "resources") {
                if entries.len() > limits.max_resources {
                    cx.problems.push(
                        ProblemKind::TooLarge,
                        "resources",
                        node.loc,
                        format!(
                            "{} resources, the limit is {}",
                            entries.len(),
                            limits.max_resources
                        ),
                    );
                } else if entries.is_empty() {
                    cx.shape(
                        "resources",
                        node.loc,
                        "a template needs at least one resource",
                    );
                }
                for (k, v) in entries {
                    if let Some(r) = parse_resource(&mut cx, k, v) {
                        resources.push(r);
                    }
                }
            }
        }
        None => cx.shape("resources", root.loc, "missing field \"resources\""),
    }

    let mut environments = Vec::new();
    if let Some(node) = get(top, "environments")
        && let Some(entries) = cx.map(node, "environments")
    {
        for (k, v) in entries {
            if let Some(e) = parse_environment(&mut cx, k, v) {
                environments.push(e);
            }
        }
        duplicate_environments(&mut cx, &environments);
    }

    let mut outputs = Vec::new();
    if let Some(node) = get(top, "outputs")
        && let Some(entries) = cx.map(node, "outputs")
    {
        if entries.len() > limits.max_outputs {
            cx.problems.push(
                ProblemKind::TooLarge,
                "outputs",
                node.loc,
                format!(
                    "{} outputs, the limit is {}",
                    entries.len(),
                    limits.max_outputs
                ),
            );
        }
        for (k, v) in entries {
            if let Some(o) = parse_output(&mut cx, k, v) {
                outputs.push(o);
            }
        }
    }

    Ok((
        Template {
            name: name.unwrap_or_default(),
            description,
            parameters,
            environments,
            resources,
            outputs,
        },
        cx.problems,
    ))
}

fn parse_parameter(cx: &mut Cx, key: &Key, node: &Node) -> Option<Parameter> {
    let path = format!("parameters.{}", key.name);
    if !valid_param_name(&key.name) {
        cx.problems.push(
            ProblemKind::InvalidName,
            &path,
            key.loc,
            format!("invalid parameter name {:?}: use a lowercase letter, then lowercase letters, digits or '_' (at most 63)", key.name),
        );
    }
    let entries = cx.map(node, &path)?;
    cx.unknown_keys(
        entries,
        &path,
        &[
            "type",
            "description",
            "default",
            "enum",
            "pattern",
            "min",
            "max",
            "sensitive",
        ],
    );
    let ty = match get(entries, "type") {
        Some(n) => {
            let s = cx.string(n, &join(&path, "type"))?;
            match ParamType::parse(&s) {
                Some(t) => t,
                None => {
                    cx.shape(
                        &join(&path, "type"),
                        n.loc,
                        format!("unknown type {s:?} (expected string, number, bool, list or map)"),
                    );
                    return None;
                }
            }
        }
        None => {
            cx.shape(&path, node.loc, "missing field \"type\"");
            return None;
        }
    };
    let sensitive = match get(entries, "sensitive") {
        Some(Node {
            value: Value::Bool(b),
            ..
        }) => *b,
        Some(n) => {
            cx.shape(&join(&path, "sensitive"), n.loc, "expected true or false");
            false
        }
        None => false,
    };
    let pattern = get(entries, "pattern").and_then(|n| {
        let s = cx.string(n, &join(&path, "pattern"))?;
        match regex::Regex::new(&s) {
            Ok(r) => Some(r),
            Err(e) => {
                cx.shape(
                    &join(&path, "pattern"),
                    n.loc,
                    format!("invalid pattern: {e}"),
                );
                None
            }
        }
    });
    let min = get(entries, "min").and_then(|n| cx.number(n, &join(&path, "min")));
    let max = get(entries, "max").and_then(|n| cx.number(n, &join(&path, "max")));
    let allowed = get(entries, "enum").and_then(|n| match &n.value {
        Value::Seq(items) if !items.is_empty() => Some(items.iter().map(Node::to_json).collect()),
        _ => {
            cx.shape(
                &join(&path, "enum"),
                n.loc,
                "expected a non-empty list of allowed values",
            );
            None
        }
    });
    let description = get(entries, "description")
        .and_then(|n| cx.string(n, &join(&path, "description")))
        .unwrap_or_default();
    let default = get(entries, "default").map(|n| (n.to_json(), n.loc));
    let p = Parameter {
        name: key.name.clone(),
        loc: key.loc,
        ty,
        description,
        default: default.as_ref().map(|(v, _)| v.clone()),
        allowed,
        pattern,
        min,
        max,
        sensitive,
    };
    if sensitive {
        if let Some((_, loc)) = default {
            cx.problems.push(
                ProblemKind::InvalidParameter,
                join(&path, "default"),
                loc,
                "a sensitive parameter is a reference supplied at deploy time and cannot have a default",
            );
        }
        if ty != ParamType::String {
            cx.problems.push(
                ProblemKind::InvalidParameter,
                join(&path, "type"),
                key.loc,
                "a sensitive parameter must be of type string (its value is a reference)",
            );
        }
    } else if let Some((v, loc)) = &default
        && let Err(m) = crate::params::check_value(&p, v)
    {
        cx.problems.push(
            ProblemKind::InvalidParameter,
            join(&path, "default"),
            *loc,
            m,
        );
    }
    Some(p)
}

fn parse_output(cx: &mut Cx, key: &Key, node: &Node) -> Option<Output> {
    let path = format!("outputs.{}", key.name);
    if !valid_param_name(&key.name) {
        cx.problems.push(
            ProblemKind::InvalidName,
            &path,
            key.loc,
            format!("invalid output name {:?}: use a lowercase letter, then lowercase letters, digits or '_' (at most 63)", key.name),
        );
    }
    let entries = cx.map(node, &path)?;
    cx.unknown_keys(entries, &path, &["value", "description", "sensitive"]);
    let description = get(entries, "description")
        .and_then(|n| cx.string(n, &join(&path, "description")))
        .unwrap_or_default();
    let sensitive = match get(entries, "sensitive") {
        Some(Node {
            value: Value::Bool(b),
            ..
        }) => *b,
        Some(n) => {
            cx.shape(&join(&path, "sensitive"), n.loc, "expected true or false");
            false
        }
        None => false,
    };
    let Some(value) = get(entries, "value") else {
        cx.shape(&path, node.loc, "missing field \"value\"");
        return None;
    };
    // The value is exactly `${resources.<name>.<output>}`: anything else (a whole
    // upstream, a parameter, a literal, a reference inside a string or a list) is refused
    // with the one message saying what to write.
    let mut errors = Vec::new();
    let expr = parse_expr(value, "", &mut errors);
    let (ExprKind::Output(resource, output), true) = (expr.kind, errors.is_empty()) else {
        cx.problems.push(
            ProblemKind::InvalidExpression,
            join(&path, "value"),
            value.loc,
            "an instance output is one module output of one resource: write ${resources.<name>.<output>}",
        );
        return None;
    };
    Some(Output {
        name: key.name.clone(),
        loc: key.loc,
        description,
        resource,
        output,
        value_loc: value.loc,
        sensitive,
    })
}

fn parse_inputs(cx: &mut Cx, node: &Node, path: &str) -> Vec<Input> {
    let mut inputs = Vec::new();
    let Some(entries) = cx.map(node, path) else {
        return inputs;
    };
    for (k, v) in entries {
        let ipath = join(path, &k.name);
        let mut errors = Vec::new();
        let expr = parse_expr(v, "", &mut errors);
        for e in errors {
            cx.problems.push(
                ProblemKind::InvalidExpression,
                format!("{ipath}{}", e.subpath),
                e.loc,
                e.message,
            );
        }
        inputs.push(Input {
            name: k.name.clone(),
            key_loc: k.loc,
            expr,
        });
    }
    inputs
}

fn parse_resource(cx: &mut Cx, key: &Key, node: &Node) -> Option<Resource> {
    let path = format!("resources.{}", key.name);
    if !valid_resource_name(&key.name) {
        cx.problems.push(
            ProblemKind::InvalidName,
            &path,
            key.loc,
            format!("invalid resource name {:?}: use a lowercase letter, then lowercase letters, digits, '-' or '_' (at most 63)", key.name),
        );
    }
    let entries = cx.map(node, &path)?;
    cx.unknown_keys(entries, &path, &["module", "inputs", "depends_on"]);
    let (module, module_loc) = match get(entries, "module") {
        Some(n) => (cx.string(n, &join(&path, "module"))?, n.loc),
        None => {
            cx.shape(&path, node.loc, "missing field \"module\"");
            return None;
        }
    };
    let inputs = match get(entries, "inputs") {
        Some(n) => parse_inputs(cx, n, &join(&path, "inputs")),
        None => Vec::new(),
    };
    let mut depends_on = Vec::new();
    if let Some(n) = get(entries, "depends_on") {
        match &n.value {
            Value::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let Some(s) = cx.string(item, &format!("{path}.depends_on[{i}]")) {
                        depends_on.push((s, item.loc));
                    }
                }
            }
            other => cx.shape(
                &join(&path, "depends_on"),
                n.loc,
                format!(
                    "expected a list of resource names, found {}",
                    other.type_name()
                ),
            ),
        }
    }
    Some(Resource {
        name: key.name.clone(),
        loc: key.loc,
        module,
        module_loc,
        depends_on,
        inputs,
    })
}

/// Two names that normalise to the same environment (`prod:` and `production:`) would make
/// the overrides a request gets depend on which one is found first.
fn duplicate_environments(cx: &mut Cx, environments: &[Environment]) {
    let mut seen: BTreeMap<&cairn_contract::Environment, &str> = BTreeMap::new();
    for e in environments {
        let Some(canonical) = &e.canonical else {
            continue;
        };
        if let Some(first) = seen.get(canonical).copied() {
            cx.problems.push(
                ProblemKind::InvalidName,
                format!("environments.{}", e.name),
                e.loc,
                format!(
                    "duplicate environment: {:?} and {first:?} are both {canonical:?} after normalisation; declare it once",
                    e.name,
                    canonical = canonical.as_str()
                ),
            );
        } else {
            seen.insert(canonical, &e.name);
        }
    }
}

fn parse_environment(cx: &mut Cx, key: &Key, node: &Node) -> Option<Environment> {
    let path = format!("environments.{}", key.name);
    let canonical = match cairn_contract::Environment::parse(&key.name) {
        Ok(c) => Some(c),
        Err(e) => {
            cx.problems
                .push(ProblemKind::InvalidName, &path, key.loc, e.to_string());
            None
        }
    };
    let entries = cx.map(node, &path)?;
    cx.unknown_keys(entries, &path, &["parameters", "resources"]);
    let parameters = match get(entries, "parameters") {
        Some(n) => cx
            .map(n, &join(&path, "parameters"))
            .map(<[_]>::to_vec)
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut resources = Vec::new();
    if let Some(n) = get(entries, "resources")
        && let Some(res) = cx.map(n, &join(&path, "resources"))
    {
        for (rk, rv) in res {
            let rpath = format!("{path}.resources.{}", rk.name);
            let Some(re) = cx.map(rv, &rpath) else {
                continue;
            };
            cx.unknown_keys(re, &rpath, &["inputs"]);
            let inputs = match get(re, "inputs") {
                Some(i) => parse_inputs(cx, i, &join(&rpath, "inputs")),
                None => Vec::new(),
            };
            resources.push(ResourceOverride {
                name: rk.name.clone(),
                loc: rk.loc,
                inputs,
            });
        }
    }
    Some(Environment {
        name: key.name.clone(),
        canonical,
        loc: key.loc,
        parameters,
        resources,
    })
}
