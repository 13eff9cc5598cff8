//! Loads a module directory (`*.tf` through hcl-rs and `*.tf.json`, where every string is a
//! template) into a small configuration model, and walks `module` calls with local sources.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use hcl::{Expression, Template};
use serde_json::Value as Json;

use crate::types::parse_type;
use crate::value::{Ty, V};

/// A configuration problem, reported as an OpenTofu diagnostic.
#[derive(Debug, thiserror::Error)]
#[error("{summary}: {detail}")]
pub struct ConfigError {
    pub summary: String,
    pub detail: String,
}

pub fn cerr(summary: impl Into<String>, detail: impl Into<String>) -> ConfigError {
    ConfigError {
        summary: summary.into(),
        detail: detail.into(),
    }
}

/// A generic block of either syntax.
#[derive(Clone, Debug, Default)]
pub struct RawBlock {
    pub kind: String,
    pub labels: Vec<String>,
    pub attrs: BTreeMap<String, Expression>,
    pub blocks: Vec<RawBlock>,
}

#[derive(Clone, Debug)]
pub struct Variable {
    pub ty: Ty,
    pub type_given: bool,
    pub default: Option<V>,
    pub sensitive: bool,
    pub nullable: bool,
    pub description: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Output {
    pub expr: Expression,
    pub depends_on: Vec<Expression>,
    pub sensitive: bool,
    pub description: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Resource {
    pub rtype: String,
    pub name: String,
    pub attrs: BTreeMap<String, Expression>,
    pub depends_on: Vec<Expression>,
    pub ignore_changes: Vec<String>,
    pub create_before_destroy: bool,
    pub provider_key: String,
}

#[derive(Clone, Debug)]
pub struct ModuleCall {
    pub source: String,
    pub args: BTreeMap<String, Expression>,
    pub module: Box<Module>,
}

#[derive(Clone, Debug)]
pub struct RequiredProvider {
    pub source: String,
    pub version: Option<String>,
}

/// One module (the root or a child).
#[derive(Clone, Debug, Default)]
pub struct Module {
    pub dir: PathBuf,
    /// `path.module` as OpenTofu shows it ("." for the root).
    pub path_module: String,
    pub variables: BTreeMap<String, Variable>,
    pub locals: BTreeMap<String, Expression>,
    pub outputs: BTreeMap<String, Output>,
    /// Keyed by "type.name".
    pub resources: BTreeMap<String, Resource>,
    pub calls: BTreeMap<String, ModuleCall>,
    pub required_providers: BTreeMap<String, RequiredProvider>,
    pub provider_blocks: Vec<String>,
    pub backend: Option<String>,
}

/// The provider each emulated resource type belongs to.
pub fn provider_of(rtype: &str) -> Option<(&'static str, &'static str)> {
    match rtype {
        "terraform_data" => Some(("terraform", "terraform.io/builtin/terraform")),
        "local_file" => Some(("local", "registry.opentofu.org/hashicorp/local")),
        _ => None,
    }
}

fn config_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let rd = std::fs::read_dir(dir).map_err(|e| {
        cerr(
            "Failed to read module directory",
            format!(
                "Module directory {} does not exist or cannot be read: {e}",
                dir.display()
            ),
        )
    })?;
    let mut files: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    (n.ends_with(".tf") || n.ends_with(".tf.json"))
                        && !n.starts_with('.')
                        && !n.ends_with('~')
                        && !n.starts_with('#')
                })
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Whether the directory holds any configuration file.
pub fn has_config(dir: &Path) -> bool {
    config_files(dir).map(|f| !f.is_empty()).unwrap_or(false)
}

/// Loads the module in `dir` and all its local child modules.
pub fn load(dir: &Path, path_module: &str, depth: usize) -> Result<Module, ConfigError> {
    if depth > 16 {
        return Err(cerr("Module nesting too deep", dir.display().to_string()));
    }
    let mut blocks = Vec::new();
    for f in config_files(dir)? {
        let text = std::fs::read_to_string(&f)
            .map_err(|e| cerr("Failed to read file", format!("{}: {e}", f.display())))?;
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.ends_with(".tf.json") {
            let j: Json = serde_json::from_str(&text)
                .map_err(|e| cerr("Invalid JSON syntax", format!("{}: {e}", f.display())))?;
            blocks.extend(json_blocks(&j, name)?);
        } else {
            let body: hcl::Body = hcl::parse(&text)
                .map_err(|e| cerr("Invalid HCL syntax", format!("{}: {e}", f.display())))?;
            blocks.extend(hcl_blocks(&body, name)?);
        }
    }
    let mut m = Module {
        dir: dir.to_path_buf(),
        path_module: path_module.to_owned(),
        ..Module::default()
    };
    for b in blocks {
        add_block(&mut m, b, depth)?;
    }
    Ok(m)
}

fn label(b: &RawBlock, n: usize) -> Result<String, ConfigError> {
    b.labels.get(n).cloned().ok_or_else(|| {
        cerr(
            "Missing name for block",
            format!("All {} blocks must have {} labels.", b.kind, n + 1),
        )
    })
}

fn literal_string(e: &Expression) -> Option<String> {
    match e {
        Expression::String(s) => Some(s.clone()),
        Expression::TemplateExpr(t) => {
            let tpl = Template::from_expr(t).ok()?;
            match tpl.elements() {
                [hcl::template::Element::Literal(s)] => Some(s.clone()),
                [] => Some(String::new()),
                _ => None,
            }
        }
        _ => None,
    }
}

fn literal_bool(e: &Expression) -> Option<bool> {
    match e {
        Expression::Bool(b) => Some(*b),
        other => literal_string(other).and_then(|s| s.parse().ok()),
    }
}

fn add_block(m: &mut Module, b: RawBlock, depth: usize) -> Result<(), ConfigError> {
    match b.kind.as_str() {
        "terraform" => {
            for inner in &b.blocks {
                match inner.kind.as_str() {
                    "required_providers" => {
                        for (name, e) in &inner.attrs {
                            let (source, version) = match e {
                                Expression::Object(o) => {
                                    let mut source = None;
                                    let mut version = None;
                                    for (k, v) in o {
                                        let key = object_key(k);
                                        if key == "source" {
                                            source = literal_string(v);
                                        } else if key == "version" {
                                            version = literal_string(v);
                                        }
                                    }
                                    (
                                        source.unwrap_or_else(|| format!("hashicorp/{name}")),
                                        version,
                                    )
                                }
                                other => (format!("hashicorp/{name}"), literal_string(other)),
                            };
                            m.required_providers
                                .insert(name.clone(), RequiredProvider { source, version });
                        }
                    }
                    "backend" => {
                        let kind = label(inner, 0)?;
                        if kind != "http" && kind != "local" {
                            return Err(cerr(
                                "Unsupported backend type",
                                format!(
                                    "There is no backend type named \"{kind}\" in this emulator (only \"http\" and \"local\")."
                                ),
                            ));
                        }
                        m.backend = Some(kind);
                    }
                    _ => {}
                }
            }
        }
        "provider" => m.provider_blocks.push(label(&b, 0)?),
        "variable" => {
            let name = label(&b, 0)?;
            let (ty, type_given, defaults_ty) = match b.attrs.get("type") {
                Some(e) => {
                    let t = parse_type(e).map_err(|d| cerr("Invalid type specification", d))?;
                    (t.clone(), true, t)
                }
                None => (Ty::Dynamic, false, Ty::Dynamic),
            };
            let default = match b.attrs.get("default") {
                Some(e) => {
                    let raw = crate::eval::const_value(e).map_err(|d| {
                        cerr("Variables not allowed", format!("variable {name:?}: {d}"))
                    })?;
                    let v = crate::value::convert(&raw, &defaults_ty).map_err(|d| {
                        cerr(
                            "Invalid default value for variable",
                            format!("This default value is not compatible with the variable's type constraint: {d}."),
                        )
                    })?;
                    Some(v)
                }
                None => None,
            };
            let var = Variable {
                ty,
                type_given,
                default,
                sensitive: b
                    .attrs
                    .get("sensitive")
                    .and_then(literal_bool)
                    .unwrap_or(false),
                nullable: b
                    .attrs
                    .get("nullable")
                    .and_then(literal_bool)
                    .unwrap_or(true),
                description: b.attrs.get("description").and_then(literal_string),
            };
            if m.variables.insert(name.clone(), var).is_some() {
                return Err(cerr(
                    "Duplicate variable declaration",
                    format!("A variable named \"{name}\" was already declared."),
                ));
            }
        }
        "locals" => {
            for (k, e) in b.attrs {
                if m.locals.insert(k.clone(), e).is_some() {
                    return Err(cerr(
                        "Duplicate local value definition",
                        format!("A local value named \"{k}\" was already defined."),
                    ));
                }
            }
        }
        "output" => {
            let name = label(&b, 0)?;
            let expr = b.attrs.get("value").cloned().ok_or_else(|| {
                cerr(
                    "Missing required argument",
                    format!("The argument \"value\" is required in output \"{name}\"."),
                )
            })?;
            let out = Output {
                expr,
                depends_on: match b.attrs.get("depends_on") {
                    Some(Expression::Array(xs)) => xs.clone(),
                    _ => Vec::new(),
                },
                sensitive: b
                    .attrs
                    .get("sensitive")
                    .and_then(literal_bool)
                    .unwrap_or(false),
                description: b.attrs.get("description").and_then(literal_string),
            };
            if m.outputs.insert(name.clone(), out).is_some() {
                return Err(cerr(
                    "Duplicate output definition",
                    format!("An output named \"{name}\" was already defined."),
                ));
            }
        }
        "resource" => {
            let rtype = label(&b, 0)?;
            let name = label(&b, 1)?;
            let Some((provider_key, _)) = provider_of(&rtype) else {
                return Err(cerr(
                    "Invalid resource type",
                    format!(
                        "The provider does not support resource type \"{rtype}\" (this emulator supports terraform_data and local_file)."
                    ),
                ));
            };
            if b.attrs.contains_key("count") || b.attrs.contains_key("for_each") {
                return Err(cerr(
                    "Unsupported argument",
                    "count and for_each are not emulated by tofu-sim.",
                ));
            }
            let mut attrs = b.attrs.clone();
            let depends_on = match attrs.remove("depends_on") {
                Some(Expression::Array(xs)) => xs,
                Some(_) => return Err(cerr("Invalid depends_on", "depends_on must be a list")),
                None => Vec::new(),
            };
            attrs.remove("provider");
            let mut ignore_changes = Vec::new();
            let mut create_before_destroy = false;
            for inner in &b.blocks {
                if inner.kind == "lifecycle" {
                    if let Some(Expression::Array(xs)) = inner.attrs.get("ignore_changes") {
                        for x in xs {
                            if let Some(p) = crate::eval::traversal_path(x) {
                                ignore_changes.push(p.join("."));
                            }
                        }
                    }
                    create_before_destroy = inner
                        .attrs
                        .get("create_before_destroy")
                        .and_then(literal_bool)
                        .unwrap_or(false);
                }
            }
            let key = format!("{rtype}.{name}");
            let res = Resource {
                rtype,
                name,
                attrs,
                depends_on,
                ignore_changes,
                create_before_destroy,
                provider_key: provider_key.to_owned(),
            };
            crate::providers::check_schema(&res)?;
            if m.resources.insert(key.clone(), res).is_some() {
                return Err(cerr(
                    "Duplicate resource configuration",
                    format!("A resource named {key} was already declared."),
                ));
            }
        }
        "module" => {
            let name = label(&b, 0)?;
            let mut args = b.attrs.clone();
            let source = args
                .remove("source")
                .as_ref()
                .and_then(literal_string)
                .ok_or_else(|| {
                    cerr(
                        "Missing required argument",
                        format!("The argument \"source\" is required in module \"{name}\"."),
                    )
                })?;
            args.remove("version");
            args.remove("depends_on");
            args.remove("providers");
            if !(source.starts_with("./") || source.starts_with("../")) {
                return Err(cerr(
                    "Module not installed",
                    format!(
                        "Module source {source:?} is not a local path; tofu-sim only installs local modules."
                    ),
                ));
            }
            let child_dir = m.dir.join(&source);
            let child_path = if m.path_module == "." {
                source.trim_start_matches("./").to_owned()
            } else {
                format!("{}/{}", m.path_module, source.trim_start_matches("./"))
            };
            if !child_dir.is_dir() {
                return Err(cerr(
                    "Unreadable module directory",
                    format!("The directory {} does not exist.", child_dir.display()),
                ));
            }
            let child = load(&child_dir, &child_path, depth + 1)?;
            m.calls.insert(
                name,
                ModuleCall {
                    source,
                    args,
                    module: Box::new(child),
                },
            );
        }
        "data" | "check" | "import" | "moved" | "removed" => {
            return Err(cerr(
                "Unsupported block type",
                format!(
                    "Blocks of type \"{}\" are not emulated by tofu-sim.",
                    b.kind
                ),
            ));
        }
        other => {
            return Err(cerr(
                "Unsupported block type",
                format!("Blocks of type \"{other}\" are not expected here."),
            ));
        }
    }
    Ok(())
}

pub fn object_key(k: &hcl::ObjectKey) -> String {
    match k {
        hcl::ObjectKey::Identifier(i) => i.to_string(),
        hcl::ObjectKey::Expression(e) => literal_string(e).unwrap_or_default(),
        _ => String::new(),
    }
}

fn hcl_blocks(body: &hcl::Body, file: &str) -> Result<Vec<RawBlock>, ConfigError> {
    let mut out = Vec::new();
    for s in body.iter() {
        match s {
            hcl::Structure::Attribute(a) => {
                return Err(cerr(
                    "Unsupported argument",
                    format!(
                        "{file}: An argument named \"{}\" is not expected here.",
                        a.key
                    ),
                ));
            }
            hcl::Structure::Block(b) => out.push(raw_from_hcl(b)),
        }
    }
    Ok(out)
}

fn raw_from_hcl(b: &hcl::Block) -> RawBlock {
    let mut raw = RawBlock {
        kind: b.identifier.to_string(),
        labels: b.labels.iter().map(|l| l.as_str().to_owned()).collect(),
        ..RawBlock::default()
    };
    for s in b.body.iter() {
        match s {
            hcl::Structure::Attribute(a) => {
                raw.attrs.insert(a.key.to_string(), a.expr.clone());
            }
            hcl::Structure::Block(inner) => raw.blocks.push(raw_from_hcl(inner)),
        }
    }
    raw
}

/// A JSON value where strings are templates (`$${`/`%%{` are escapes).
pub fn json_expr(j: &Json) -> Result<Expression, ConfigError> {
    Ok(match j {
        Json::Null => Expression::Null,
        Json::Bool(b) => Expression::Bool(*b),
        Json::Number(n) => Expression::Number(
            hcl::Number::from_f64(n.as_f64().unwrap_or(0.0))
                .unwrap_or_else(|| hcl::Number::from(0)),
        ),
        Json::String(s) => {
            Template::from_str(s).map_err(|e| cerr("Invalid template", format!("{s:?}: {e}")))?;
            Expression::TemplateExpr(Box::new(hcl::TemplateExpr::QuotedString(s.clone())))
        }
        Json::Array(xs) => Expression::Array(xs.iter().map(json_expr).collect::<Result<_, _>>()?),
        Json::Object(m) => {
            let mut o = hcl::Object::new();
            for (k, v) in m {
                o.insert(
                    hcl::ObjectKey::Expression(Expression::String(k.clone())),
                    json_expr(v)?,
                );
            }
            Expression::Object(o)
        }
    })
}

fn json_literal(j: &Json) -> Expression {
    match j {
        Json::String(s) => Expression::String(s.clone()),
        Json::Array(xs) => Expression::Array(xs.iter().map(json_literal).collect()),
        Json::Object(m) => {
            let mut o = hcl::Object::new();
            for (k, v) in m {
                o.insert(
                    hcl::ObjectKey::Expression(Expression::String(k.clone())),
                    json_literal(v),
                );
            }
            Expression::Object(o)
        }
        other => json_expr(other).unwrap_or(Expression::Null),
    }
}

fn json_bare_expr(j: &Json) -> Result<Expression, ConfigError> {
    match j {
        Json::String(s) => {
            Expression::from_str(s).map_err(|e| cerr("Invalid expression", format!("{s:?}: {e}")))
        }
        Json::Array(xs) => Ok(Expression::Array(
            xs.iter().map(json_bare_expr).collect::<Result<_, _>>()?,
        )),
        other => json_expr(other),
    }
}

fn json_objects(j: &Json) -> Vec<&serde_json::Map<String, Json>> {
    match j {
        Json::Object(m) => vec![m],
        Json::Array(xs) => xs.iter().filter_map(Json::as_object).collect(),
        _ => Vec::new(),
    }
}

fn json_body(
    kind: &str,
    labels: Vec<String>,
    body: &serde_json::Map<String, Json>,
) -> Result<RawBlock, ConfigError> {
    let mut raw = RawBlock {
        kind: kind.to_owned(),
        labels,
        ..RawBlock::default()
    };
    for (k, v) in body {
        if k == "//" {
            continue;
        }
        match (kind, k.as_str()) {
            ("variable", "type") => {
                raw.attrs.insert(k.clone(), json_bare_expr(v)?);
            }
            ("variable", "default" | "description") | ("output", "description") => {
                raw.attrs.insert(k.clone(), json_literal(v));
            }
            (_, "depends_on") => {
                raw.attrs.insert(k.clone(), json_bare_expr(v)?);
            }
            ("resource", "lifecycle") => {
                for o in json_objects(v) {
                    let mut lc = RawBlock {
                        kind: "lifecycle".into(),
                        ..RawBlock::default()
                    };
                    for (lk, lv) in o {
                        let e = if lk == "ignore_changes" || lk == "replace_triggered_by" {
                            json_bare_expr(lv)?
                        } else {
                            json_expr(lv)?
                        };
                        lc.attrs.insert(lk.clone(), e);
                    }
                    raw.blocks.push(lc);
                }
            }
            ("resource", "provisioner" | "connection") => {}
            _ => {
                raw.attrs.insert(k.clone(), json_expr(v)?);
            }
        }
    }
    Ok(raw)
}

fn json_blocks(j: &Json, file: &str) -> Result<Vec<RawBlock>, ConfigError> {
    let top = j.as_object().ok_or_else(|| {
        cerr(
            "Invalid JSON configuration",
            format!("{file}: the root must be an object"),
        )
    })?;
    let mut out = Vec::new();
    for (kind, v) in top {
        match kind.as_str() {
            "//" => {}
            "terraform" => {
                for o in json_objects(v) {
                    let mut tb = RawBlock {
                        kind: "terraform".into(),
                        ..RawBlock::default()
                    };
                    for (k, inner) in o {
                        match k.as_str() {
                            "required_providers" => {
                                for rp in json_objects(inner) {
                                    let mut b = RawBlock {
                                        kind: "required_providers".into(),
                                        ..RawBlock::default()
                                    };
                                    for (name, spec) in rp {
                                        b.attrs.insert(name.clone(), json_literal(spec));
                                    }
                                    tb.blocks.push(b);
                                }
                            }
                            "backend" => {
                                for bo in json_objects(inner) {
                                    for (bk, _) in bo {
                                        tb.blocks.push(RawBlock {
                                            kind: "backend".into(),
                                            labels: vec![bk.clone()],
                                            ..RawBlock::default()
                                        });
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                    out.push(tb);
                }
            }
            "locals" => {
                for o in json_objects(v) {
                    out.push(json_body("locals", vec![], o)?);
                }
            }
            "variable" | "output" | "module" | "provider" => {
                for o in json_objects(v) {
                    for (name, body) in o {
                        for b in json_objects(body) {
                            out.push(json_body(kind, vec![name.clone()], b)?);
                        }
                    }
                }
            }
            "resource" | "data" => {
                for o in json_objects(v) {
                    for (rtype, byname) in o {
                        for bn in json_objects(byname) {
                            for (name, body) in bn {
                                for b in json_objects(body) {
                                    out.push(json_body(
                                        kind,
                                        vec![rtype.clone(), name.clone()],
                                        b,
                                    )?);
                                }
                            }
                        }
                    }
                }
            }
            other => out.push(RawBlock {
                kind: other.to_owned(),
                ..RawBlock::default()
            }),
        }
    }
    Ok(out)
}
