//! Contract test of the module library (modules/local/<kind>): every module parses with
//! hcl-rs, its module.cairn.json agrees with its variables and outputs, wiring variables fit
//! the upstream module's outputs, secrets never reach an output, it uses only the language
//! subset the emulator implements, and its README table lists exactly its inputs and outputs.
//!
//! Standalone on purpose: it needs only hcl-rs and serde_json, and finds the library by
//! walking up from the crate directory to the first directory holding `modules/local`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use hcl::expr::{Expression, ObjectKey, Operation, TraversalOperator};
use hcl::template::{Directive, Element, Template};
use hcl::{Block, Body};

/// The kinds the library must provide at least.
const REQUIRED_KINDS: [&str; 4] = ["network", "database", "queue", "service"];
/// The only resource types a local module may use.
const RESOURCE_TYPES: [&str; 2] = ["terraform_data", "local_file"];
/// The only functions a module may call (the emulator implements these).
const FUNCTIONS: [&str; 1] = ["jsonencode"];
/// The files every module directory holds.
const MODULE_FILES: [&str; 6] = [
    "main.tf",
    "variables.tf",
    "outputs.tf",
    "versions.tf",
    "module.cairn.json",
    "README.md",
];

// ---------------------------------------------------------------------------------------
// Type constraints
// ---------------------------------------------------------------------------------------

/// An OpenTofu type constraint as written in a `variable` block.
#[derive(Debug, Clone, PartialEq)]
enum Ty {
    String,
    Number,
    Bool,
    Any,
    List(Box<Ty>),
    Set(Box<Ty>),
    Map(Box<Ty>),
    Object(Vec<Attr>),
}

/// One attribute of an object type; `optional` holds the default of `optional(T, d)`
/// (`Some(None)` for `optional(T)`).
#[derive(Debug, Clone, PartialEq)]
struct Attr {
    name: String,
    ty: Ty,
    optional: Option<Option<serde_json::Value>>,
}

impl Ty {
    fn parse(expr: &Expression) -> Result<Ty, String> {
        match expr {
            Expression::Variable(v) => match v.as_str() {
                "string" => Ok(Ty::String),
                "number" => Ok(Ty::Number),
                "bool" => Ok(Ty::Bool),
                "any" => Ok(Ty::Any),
                other => Err(format!("unknown primitive type `{other}`")),
            },
            Expression::FuncCall(call) => {
                let name = call.name.name.as_str();
                let [arg] = call.args.as_slice() else {
                    return Err(format!("`{name}(…)` takes exactly one argument"));
                };
                match name {
                    "list" => Ok(Ty::List(Box::new(Ty::parse(arg)?))),
                    "set" => Ok(Ty::Set(Box::new(Ty::parse(arg)?))),
                    "map" => Ok(Ty::Map(Box::new(Ty::parse(arg)?))),
                    "object" => {
                        let Expression::Object(fields) = arg else {
                            return Err("object(…) needs an object of attribute types".into());
                        };
                        let mut attrs = Vec::new();
                        for (key, value) in fields {
                            attrs.push(Attr::parse(object_key(key)?, value)?);
                        }
                        Ok(Ty::Object(attrs))
                    }
                    other => Err(format!("unsupported type constructor `{other}`")),
                }
            }
            other => Err(format!("not a type constraint: {other:?}")),
        }
    }

    /// The type of a value after conversion: `optional(...)` attributes are always present.
    fn concrete(&self) -> Ty {
        match self {
            Ty::List(t) => Ty::List(Box::new(t.concrete())),
            Ty::Set(t) => Ty::Set(Box::new(t.concrete())),
            Ty::Map(t) => Ty::Map(Box::new(t.concrete())),
            Ty::Object(attrs) => Ty::Object(
                attrs
                    .iter()
                    .map(|a| Attr {
                        name: a.name.clone(),
                        ty: a.ty.concrete(),
                        optional: None,
                    })
                    .collect(),
            ),
            t => t.clone(),
        }
    }

    fn attr(&self, name: &str) -> Option<&Attr> {
        match self {
            Ty::Object(attrs) => attrs.iter().find(|a| a.name == name),
            _ => None,
        }
    }
}

impl Attr {
    fn parse(name: String, expr: &Expression) -> Result<Attr, String> {
        if let Expression::FuncCall(call) = expr
            && call.name.name.as_str() == "optional"
        {
            return match call.args.as_slice() {
                [ty] => Ok(Attr {
                    name,
                    ty: Ty::parse(ty)?,
                    optional: Some(None),
                }),
                [ty, default] => Ok(Attr {
                    name,
                    ty: Ty::parse(ty)?,
                    optional: Some(Some(literal(default)?)),
                }),
                _ => Err("optional(…) takes one or two arguments".into()),
            };
        }
        Ok(Attr {
            name,
            ty: Ty::parse(expr)?,
            optional: None,
        })
    }
}

/// Canonical rendering, the form README tables use (compared with whitespace removed).
impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::String => f.write_str("string"),
            Ty::Number => f.write_str("number"),
            Ty::Bool => f.write_str("bool"),
            Ty::Any => f.write_str("any"),
            Ty::List(t) => write!(f, "list({t})"),
            Ty::Set(t) => write!(f, "set({t})"),
            Ty::Map(t) => write!(f, "map({t})"),
            Ty::Object(attrs) => {
                f.write_str("object({")?;
                for (i, a) in attrs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match &a.optional {
                        None => write!(f, "{} = {}", a.name, a.ty)?,
                        Some(None) => write!(f, "{} = optional({})", a.name, a.ty)?,
                        Some(Some(d)) => write!(f, "{} = optional({}, {d})", a.name, a.ty)?,
                    }
                }
                f.write_str("})")
            }
        }
    }
}

fn object_key(key: &ObjectKey) -> Result<String, String> {
    match key {
        ObjectKey::Identifier(id) => Ok(id.as_str().to_owned()),
        ObjectKey::Expression(Expression::String(s)) => Ok(s.clone()),
        other => Err(format!("computed object key {other:?}")),
    }
}

/// A literal expression (a default value) as JSON.
fn literal(expr: &Expression) -> Result<serde_json::Value, String> {
    Ok(match expr {
        Expression::Null => serde_json::Value::Null,
        Expression::Bool(b) => serde_json::Value::Bool(*b),
        Expression::Number(n) => serde_json::to_value(n).map_err(|e| e.to_string())?,
        Expression::String(s) => serde_json::Value::String(s.clone()),
        Expression::Array(items) => {
            serde_json::Value::Array(items.iter().map(literal).collect::<Result<_, _>>()?)
        }
        Expression::Object(fields) => {
            let mut map = serde_json::Map::new();
            for (k, v) in fields {
                map.insert(object_key(k)?, literal(v)?);
            }
            serde_json::Value::Object(map)
        }
        other => return Err(format!("not a literal: {other:?}")),
    })
}

// ---------------------------------------------------------------------------------------
// A parsed module
// ---------------------------------------------------------------------------------------

struct Variable {
    ty: Ty,
    default: Option<serde_json::Value>,
    sensitive: bool,
    description: Option<String>,
}

struct Output {
    expr: Expression,
    sensitive: bool,
    description: Option<String>,
}

struct Module {
    dir: PathBuf,
    dir_name: String,
    variables: BTreeMap<String, Variable>,
    outputs: BTreeMap<String, Output>,
    locals: BTreeMap<String, Expression>,
    /// (type, name) → body.
    resources: BTreeMap<(String, String), Body>,
    /// Blocks other than variable/output/locals/resource/terraform, by identifier.
    other_blocks: Vec<String>,
    /// required_providers entries as (local name → source, version).
    providers: BTreeMap<String, (Option<String>, Option<String>)>,
    meta: serde_json::Value,
    readme: String,
}

fn attr_expr<'a>(body: &'a Body, key: &str) -> Option<&'a Expression> {
    body.attributes().find(|a| a.key() == key).map(|a| a.expr())
}

fn label(block: &Block, i: usize) -> String {
    block
        .labels()
        .get(i)
        .map(|l| l.as_str().to_owned())
        .unwrap_or_default()
}

fn string_attr(body: &Body, key: &str) -> Option<String> {
    match attr_expr(body, key) {
        Some(Expression::String(s)) => Some(s.clone()),
        _ => None,
    }
}

fn bool_attr(body: &Body, key: &str) -> bool {
    matches!(attr_expr(body, key), Some(Expression::Bool(true)))
}

impl Module {
    fn load(dir: &Path) -> Module {
        let dir_name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut module = Module {
            dir: dir.to_owned(),
            dir_name,
            variables: BTreeMap::new(),
            outputs: BTreeMap::new(),
            locals: BTreeMap::new(),
            resources: BTreeMap::new(),
            other_blocks: Vec::new(),
            providers: BTreeMap::new(),
            meta: serde_json::Value::Null,
            readme: String::new(),
        };
        let mut tf_files: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "tf"))
            .collect();
        tf_files.sort();
        for file in tf_files {
            let text = fs::read_to_string(&file).unwrap();
            let body = hcl::parse(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
            module.add_body(&file, &body);
        }
        let meta_path = dir.join("module.cairn.json");
        let meta_text = fs::read_to_string(&meta_path)
            .unwrap_or_else(|e| panic!("read {}: {e}", meta_path.display()));
        module.meta = serde_json::from_str(&meta_text)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", meta_path.display()));
        module.readme = fs::read_to_string(dir.join("README.md")).unwrap_or_default();
        module
    }

    fn add_body(&mut self, file: &Path, body: &Body) {
        let here = file.display();
        assert!(
            body.attributes().next().is_none(),
            "{here}: top-level attributes are not allowed"
        );
        for block in body.blocks() {
            let b = block.body();
            match block.identifier() {
                "variable" => {
                    let name = label(block, 0);
                    let ty_expr = attr_expr(b, "type")
                        .unwrap_or_else(|| panic!("{here}: variable {name} has no type"));
                    let ty = Ty::parse(ty_expr)
                        .unwrap_or_else(|e| panic!("{here}: variable {name}: {e}"));
                    let default = attr_expr(b, "default").map(|d| {
                        literal(d).unwrap_or_else(|e| panic!("{here}: variable {name}: {e}"))
                    });
                    let var = Variable {
                        ty,
                        default,
                        sensitive: bool_attr(b, "sensitive"),
                        description: string_attr(b, "description"),
                    };
                    assert!(
                        self.variables.insert(name.clone(), var).is_none(),
                        "{here}: variable {name} declared twice"
                    );
                }
                "output" => {
                    let name = label(block, 0);
                    let expr = attr_expr(b, "value")
                        .unwrap_or_else(|| panic!("{here}: output {name} has no value"))
                        .clone();
                    let out = Output {
                        expr,
                        sensitive: bool_attr(b, "sensitive"),
                        description: string_attr(b, "description"),
                    };
                    assert!(
                        self.outputs.insert(name.clone(), out).is_none(),
                        "{here}: output {name} declared twice"
                    );
                }
                "locals" => {
                    for a in b.attributes() {
                        assert!(
                            self.locals
                                .insert(a.key().to_owned(), a.expr().clone())
                                .is_none(),
                            "{here}: local {} declared twice",
                            a.key()
                        );
                    }
                }
                "resource" => {
                    let key = (label(block, 0), label(block, 1));
                    assert!(
                        self.resources.insert(key.clone(), b.clone()).is_none(),
                        "{here}: resource {}.{} declared twice",
                        key.0,
                        key.1
                    );
                }
                "terraform" => {
                    for rp in b
                        .blocks()
                        .filter(|x| x.identifier() == "required_providers")
                    {
                        for a in rp.body().attributes() {
                            let Expression::Object(fields) = a.expr() else {
                                panic!("{here}: required_providers.{} is not an object", a.key());
                            };
                            let get = |k: &str| {
                                fields.iter().find_map(|(key, v)| match (key, v) {
                                    (ObjectKey::Identifier(id), Expression::String(s))
                                        if id.as_str() == k =>
                                    {
                                        Some(s.clone())
                                    }
                                    _ => None,
                                })
                            };
                            self.providers
                                .insert(a.key().to_owned(), (get("source"), get("version")));
                        }
                    }
                }
                other => self.other_blocks.push(other.to_owned()),
            }
        }
    }

    fn kind(&self) -> &str {
        self.meta["kind"].as_str().unwrap_or("")
    }

    fn wiring(&self) -> BTreeMap<String, String> {
        self.meta["wiring"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn target_inputs(&self) -> Vec<String> {
        self.meta["target_inputs"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn sensitive_variables(&self) -> BTreeSet<String> {
        self.variables
            .iter()
            .filter(|(_, v)| v.sensitive)
            .map(|(n, _)| n.clone())
            .collect()
    }
}

// ---------------------------------------------------------------------------------------
// References and the language subset
// ---------------------------------------------------------------------------------------

/// A reference found in an expression: `var.x`, `local.x`, `path.x` or `<type>.<name>[.attr]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Ref {
    Var(String),
    Local(String),
    Path(String),
    Resource(String, String, Option<String>),
}

/// Walks an expression, collecting references and reporting constructs outside the
/// emulated subset (conditionals, operators, for expressions, template directives,
/// functions other than [`FUNCTIONS`], splats).
fn walk(expr: &Expression, refs: &mut Vec<Ref>, problems: &mut Vec<String>) {
    match expr {
        Expression::Null | Expression::Bool(_) | Expression::Number(_) | Expression::String(_) => {}
        Expression::Array(items) => items.iter().for_each(|e| walk(e, refs, problems)),
        Expression::Object(fields) => {
            for (k, v) in fields {
                if let ObjectKey::Expression(e) = k {
                    walk(e, refs, problems);
                }
                walk(v, refs, problems);
            }
        }
        Expression::TemplateExpr(t) => match Template::from_expr(t) {
            Ok(template) => walk_template(&template, refs, problems),
            Err(e) => problems.push(format!("template does not parse: {e}")),
        },
        Expression::Variable(v) => problems.push(format!("bare reference `{}`", v.as_str())),
        Expression::Traversal(t) => {
            let Expression::Variable(root) = &t.expr else {
                problems.push(format!("traversal of a non-reference: {:?}", t.expr));
                return;
            };
            let mut names = Vec::new();
            for op in &t.operators {
                match op {
                    TraversalOperator::GetAttr(id) => names.push(id.as_str().to_owned()),
                    TraversalOperator::Index(e) => walk(e, refs, problems),
                    _ => problems.push(format!("splat or legacy index on `{}`", root.as_str())),
                }
            }
            let first = names.first().cloned().unwrap_or_default();
            match root.as_str() {
                "var" => refs.push(Ref::Var(first)),
                "local" => refs.push(Ref::Local(first)),
                "path" => refs.push(Ref::Path(first)),
                "count" | "each" | "self" | "data" | "module" | "terraform" => {
                    problems.push(format!("reference to `{}`", root.as_str()))
                }
                ty => refs.push(Ref::Resource(ty.to_owned(), first, names.get(1).cloned())),
            }
        }
        Expression::FuncCall(call) => {
            let name = call.name.name.as_str();
            if call.name.is_namespaced() || !FUNCTIONS.contains(&name) {
                problems.push(format!("function `{name}` is outside the emulated subset"));
            }
            call.args.iter().for_each(|e| walk(e, refs, problems));
        }
        Expression::Parenthesis(e) => walk(e, refs, problems),
        Expression::Conditional(c) => {
            problems.push("conditional expression".into());
            walk(&c.cond_expr, refs, problems);
            walk(&c.true_expr, refs, problems);
            walk(&c.false_expr, refs, problems);
        }
        Expression::Operation(op) => {
            problems.push("operator expression".into());
            match op.as_ref() {
                Operation::Unary(u) => walk(&u.expr, refs, problems),
                Operation::Binary(b) => {
                    walk(&b.lhs_expr, refs, problems);
                    walk(&b.rhs_expr, refs, problems);
                }
            }
        }
        Expression::ForExpr(f) => {
            problems.push("for expression".into());
            walk(&f.collection_expr, refs, problems);
        }
        other => problems.push(format!("unsupported expression {other:?}")),
    }
}

fn walk_template(template: &Template, refs: &mut Vec<Ref>, problems: &mut Vec<String>) {
    for element in template.elements() {
        match element {
            Element::Literal(_) => {}
            Element::Interpolation(i) => walk(&i.expr, refs, problems),
            Element::Directive(d) => {
                problems.push("template directive".into());
                match d.as_ref() {
                    Directive::If(i) => {
                        walk(&i.cond_expr, refs, problems);
                        walk_template(&i.true_template, refs, problems);
                        if let Some(f) = &i.false_template {
                            walk_template(f, refs, problems);
                        }
                    }
                    Directive::For(f) => walk(&f.collection_expr, refs, problems),
                }
            }
        }
    }
}

fn refs_of(expr: &Expression) -> Vec<Ref> {
    let mut refs = Vec::new();
    let mut problems = Vec::new();
    walk(expr, &mut refs, &mut problems);
    refs
}

/// Every variable an expression depends on, following locals and resource attributes
/// (a computed attribute such as `id` depends on all of its resource's arguments).
fn variables_reached(module: &Module, expr: &Expression) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut vars = BTreeSet::new();
    let mut stack = refs_of(expr);
    while let Some(r) = stack.pop() {
        if !seen.insert(r.clone()) {
            continue;
        }
        match &r {
            Ref::Var(v) => {
                vars.insert(v.clone());
            }
            Ref::Local(l) => {
                if let Some(e) = module.locals.get(l) {
                    stack.extend(refs_of(e));
                }
            }
            Ref::Path(_) => {}
            Ref::Resource(ty, name, attr) => {
                if let Some(body) = module.resources.get(&(ty.clone(), name.clone())) {
                    match attr.as_deref().and_then(|a| attr_expr(body, a)) {
                        Some(e) => stack.extend(refs_of(e)),
                        None => body
                            .attributes()
                            .for_each(|a| stack.extend(refs_of(a.expr()))),
                    }
                }
            }
        }
    }
    vars
}

// ---------------------------------------------------------------------------------------
// Output types
// ---------------------------------------------------------------------------------------

/// The type of an output value, inferred from the expressions the library uses.
fn infer(module: &Module, expr: &Expression, depth: usize) -> Result<Ty, String> {
    if depth > 32 {
        return Err("reference chain too deep".into());
    }
    match expr {
        Expression::String(_) | Expression::TemplateExpr(_) => Ok(Ty::String),
        Expression::Number(_) => Ok(Ty::Number),
        Expression::Bool(_) => Ok(Ty::Bool),
        Expression::Parenthesis(e) => infer(module, e, depth + 1),
        Expression::FuncCall(c) if c.name.name.as_str() == "jsonencode" => Ok(Ty::String),
        Expression::Object(fields) => {
            let mut attrs = Vec::new();
            for (k, v) in fields {
                attrs.push(Attr {
                    name: object_key(k)?,
                    ty: infer(module, v, depth + 1)?,
                    optional: None,
                });
            }
            Ok(Ty::Object(attrs))
        }
        Expression::Traversal(t) => {
            let Expression::Variable(root) = &t.expr else {
                return Err("traversal of a non-reference".into());
            };
            let names: Vec<&str> = t
                .operators
                .iter()
                .map(|op| match op {
                    TraversalOperator::GetAttr(id) => Ok(id.as_str()),
                    _ => Err("only attribute access is inferred".to_owned()),
                })
                .collect::<Result<_, _>>()?;
            let Some((first, rest)) = names.split_first() else {
                return Err("empty traversal".into());
            };
            let (mut ty, rest) = match root.as_str() {
                "var" => {
                    let v = module
                        .variables
                        .get(*first)
                        .ok_or_else(|| format!("undeclared variable {first}"))?;
                    (v.ty.concrete(), rest)
                }
                "local" => {
                    let e = module
                        .locals
                        .get(*first)
                        .ok_or_else(|| format!("undeclared local {first}"))?;
                    (infer(module, e, depth + 1)?, rest)
                }
                "local_file" => {
                    let [attr] = rest else {
                        return Err("local_file attributes are strings".into());
                    };
                    if !module
                        .resources
                        .contains_key(&("local_file".to_owned(), (*first).to_owned()))
                    {
                        return Err(format!("undeclared local_file.{first}"));
                    }
                    const STRING_ATTRS: [&str; 8] = [
                        "id",
                        "filename",
                        "content",
                        "content_base64",
                        "sensitive_content",
                        "source",
                        "file_permission",
                        "directory_permission",
                    ];
                    if !STRING_ATTRS.contains(attr) {
                        return Err(format!("local_file has no attribute {attr}"));
                    }
                    return Ok(Ty::String);
                }
                "terraform_data" => {
                    let body = module
                        .resources
                        .get(&("terraform_data".to_owned(), (*first).to_owned()))
                        .ok_or_else(|| format!("undeclared terraform_data.{first}"))?;
                    match rest.split_first() {
                        Some((&"id", [])) => return Ok(Ty::String),
                        Some((&"output", more)) => {
                            let input = attr_expr(body, "input")
                                .ok_or("terraform_data.output without input")?;
                            (infer(module, input, depth + 1)?, more)
                        }
                        _ => return Err("terraform_data exposes id and output".into()),
                    }
                }
                other => return Err(format!("cannot infer the type of {other}.*")),
            };
            for name in rest {
                ty = ty
                    .attr(name)
                    .map(|a| a.ty.clone())
                    .ok_or_else(|| format!("no attribute {name}"))?;
            }
            Ok(ty)
        }
        other => Err(format!("cannot infer the type of {other:?}")),
    }
}

/// `actual` (an upstream output) can be passed where `wanted` (a wiring attribute) is
/// declared: the same type, or an object with at least the wanted attributes.
fn assignable(actual: &Ty, wanted: &Ty) -> bool {
    match (actual, wanted) {
        (_, Ty::Any) => true,
        (Ty::List(a), Ty::List(w)) | (Ty::Set(a), Ty::Set(w)) | (Ty::Map(a), Ty::Map(w)) => {
            assignable(a, w)
        }
        (Ty::Object(_), Ty::Object(want)) => want.iter().all(|w| match actual.attr(&w.name) {
            Some(a) => assignable(&a.ty, &w.ty),
            None => w.optional.is_some(),
        }),
        (a, w) => a == w,
    }
}

// ---------------------------------------------------------------------------------------
// README tables
// ---------------------------------------------------------------------------------------

/// The rows of the first Markdown table after the heading `## <section>`, as cells with
/// backticks and surrounding whitespace removed.
fn readme_table(readme: &str, section: &str) -> Vec<Vec<String>> {
    let heading = format!("## {section}");
    let mut lines = readme.lines().skip_while(|l| l.trim() != heading).skip(1);
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in lines.by_ref() {
        let t = line.trim();
        if t.starts_with("## ") {
            break;
        }
        if !t.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let cells: Vec<String> = t
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().replace('`', ""))
            .collect();
        if cells
            .iter()
            .all(|c| c.chars().all(|ch| ch == '-' || ch == ':'))
        {
            continue; // the separator row
        }
        rows.push(cells);
    }
    // The first row is the header.
    if rows.is_empty() {
        rows
    } else {
        rows.split_off(1)
    }
}

fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

// ---------------------------------------------------------------------------------------
// Loading the library
// ---------------------------------------------------------------------------------------

fn library_root() -> PathBuf {
    let start = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    start
        .ancestors()
        .find(|d| d.join("modules/local").is_dir())
        .map(|d| d.join("modules"))
        .unwrap_or_else(|| panic!("no modules/local above {}", start.display()))
}

fn load_library() -> BTreeMap<String, Module> {
    let local = library_root().join("local");
    let mut modules = BTreeMap::new();
    for entry in fs::read_dir(&local).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let m = Module::load(&path);
            modules.insert(m.dir_name.clone(), m);
        }
    }
    modules
}

/// Collects failures so one run reports every broken rule.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, ok: bool, msg: impl FnOnce() -> String) {
        if !ok {
            self.0.push(msg());
        }
    }
    fn assert_none(self) {
        assert!(
            self.0.is_empty(),
            "{} contract violation(s):\n  {}",
            self.0.len(),
            self.0.join("\n  ")
        );
    }
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[test]
fn every_tf_file_in_the_library_parses() {
    let mut count = 0;
    let mut stack = vec![library_root()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "tf") {
                let text = fs::read_to_string(&path).unwrap();
                if let Err(e) = hcl::parse(&text) {
                    panic!("{} does not parse: {e}", path.display());
                }
                count += 1;
            }
        }
    }
    assert!(
        count >= 4 * 4,
        "expected the .tf files of at least 4 modules, found {count}"
    );
}

#[test]
fn the_library_has_the_required_kinds_with_their_files() {
    let modules = load_library();
    let mut f = Failures::default();
    for kind in REQUIRED_KINDS {
        f.check(modules.contains_key(kind), || {
            format!("modules/local/{kind} is missing")
        });
    }
    for m in modules.values() {
        for file in MODULE_FILES {
            f.check(m.dir.join(file).is_file(), || {
                format!("{}: {file} is missing", m.dir_name)
            });
        }
    }
    f.assert_none();
}

#[test]
fn metadata_matches_kind_output_and_variables() {
    let modules = load_library();
    let mut f = Failures::default();
    for m in modules.values() {
        let d = &m.dir_name;
        let keys: BTreeSet<&str> = m
            .meta
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        f.check(keys == BTreeSet::from(["kind", "wiring", "target_inputs"]), || {
            format!("{d}: module.cairn.json must have exactly kind, wiring, target_inputs, has {keys:?}")
        });
        f.check(m.kind() == d, || {
            format!(
                "{d}: module.cairn.json kind {:?} differs from the directory name",
                m.kind()
            )
        });
        let kind_output = m.outputs.get("kind").map(|o| &o.expr);
        f.check(
            matches!(kind_output, Some(Expression::String(s)) if s == m.kind()),
            || {
                format!(
                    "{d}: output kind must be the literal {:?}, is {kind_output:?}",
                    m.kind()
                )
            },
        );
        f.check(
            m.variables
                .get("name")
                .is_some_and(|v| v.ty == Ty::String && v.default.is_none()),
            || format!("{d}: needs a required string variable `name`"),
        );
        f.check(m.meta["wiring"].is_object(), || {
            format!("{d}: wiring is not an object")
        });
        f.check(m.meta["target_inputs"].is_array(), || {
            format!("{d}: target_inputs is not an array")
        });
        for t in m.target_inputs() {
            f.check(m.variables.contains_key(&t), || {
                format!("{d}: target input {t:?} is not a variable")
            });
            f.check(!m.wiring().contains_key(&t), || {
                format!("{d}: {t:?} is both a wiring variable and a target input")
            });
        }
    }
    f.assert_none();
}

#[test]
fn wiring_variables_fit_the_upstream_outputs() {
    let modules = load_library();
    let by_kind: BTreeMap<&str, &Module> = modules.values().map(|m| (m.kind(), m)).collect();
    let mut f = Failures::default();
    for m in modules.values() {
        let d = &m.dir_name;
        for (var_name, upstream_kind) in m.wiring() {
            let Some(var) = m.variables.get(&var_name) else {
                f.0.push(format!("{d}: wiring variable {var_name} is not declared"));
                continue;
            };
            let Some(upstream) = by_kind.get(upstream_kind.as_str()) else {
                f.0.push(format!(
                    "{d}: wiring {var_name} expects unknown kind {upstream_kind:?}"
                ));
                continue;
            };
            f.check(!var.sensitive, || {
                format!("{d}: wiring variable {var_name} is sensitive")
            });
            let Ty::Object(attrs) = &var.ty else {
                f.0.push(format!(
                    "{d}: wiring variable {var_name} is not an object type"
                ));
                continue;
            };
            for attr in attrs {
                let Some(out) = upstream.outputs.get(&attr.name) else {
                    f.check(attr.optional.is_some(), || {
                        format!(
                            "{d}: {var_name}.{} is not an output of {upstream_kind}",
                            attr.name
                        )
                    });
                    continue;
                };
                match infer(upstream, &out.expr, 0) {
                    Ok(actual) => f.check(assignable(&actual, &attr.ty), || {
                        format!(
                            "{d}: {var_name}.{} is {} but {upstream_kind}'s output is {actual}",
                            attr.name, attr.ty
                        )
                    }),
                    Err(e) => {
                        f.0.push(format!("{upstream_kind}: output {}: {e}", attr.name))
                    }
                }
            }
        }
    }
    f.assert_none();
}

#[test]
fn every_output_is_typed_and_no_secret_reaches_an_output() {
    let modules = load_library();
    let mut f = Failures::default();
    let mut sensitive_inputs = 0;
    for m in modules.values() {
        let d = &m.dir_name;
        let secret = m.sensitive_variables();
        sensitive_inputs += secret.len();
        for (name, out) in &m.outputs {
            f.check(!out.sensitive, || {
                format!("{d}: output {name} is sensitive")
            });
            if let Err(e) = infer(m, &out.expr, 0) {
                f.0.push(format!("{d}: output {name} has no inferable type: {e}"));
            }
            let reached = variables_reached(m, &out.expr);
            let leaked: Vec<_> = reached.intersection(&secret).collect();
            f.check(leaked.is_empty(), || {
                format!("{d}: output {name} depends on sensitive variable(s) {leaked:?}")
            });
        }
    }
    f.check(sensitive_inputs > 0, || {
        "no module has a sensitive input: sensitive handling is not exercised".into()
    });
    f.assert_none();
}

#[test]
fn every_module_pins_hashicorp_local_2_2_3() {
    let modules = load_library();
    let mut f = Failures::default();
    for m in modules.values() {
        let d = &m.dir_name;
        let expected = BTreeMap::from([(
            "local".to_owned(),
            (Some("hashicorp/local".to_owned()), Some("2.2.3".to_owned())),
        )]);
        f.check(m.providers == expected, || {
            format!(
                "{d}: required_providers must be exactly local = hashicorp/local 2.2.3, is {:?}",
                m.providers
            )
        });
    }
    f.assert_none();
}

#[test]
fn modules_use_only_the_emulated_language_subset() {
    let modules = load_library();
    let mut f = Failures::default();
    for m in modules.values() {
        let d = &m.dir_name;
        f.check(m.other_blocks.is_empty(), || {
            format!("{d}: blocks outside the subset: {:?}", m.other_blocks)
        });
        let mut exprs: Vec<(String, &Expression)> = Vec::new();
        for (n, e) in &m.locals {
            exprs.push((format!("local.{n}"), e));
        }
        for (n, o) in &m.outputs {
            exprs.push((format!("output.{n}"), &o.expr));
        }
        for ((ty, name), body) in &m.resources {
            f.check(RESOURCE_TYPES.contains(&ty.as_str()), || {
                format!("{d}: resource type {ty} is outside the subset")
            });
            let blocks: Vec<&str> = body.blocks().map(Block::identifier).collect();
            f.check(blocks.is_empty(), || {
                format!("{d}: {ty}.{name} has nested blocks {blocks:?} (lifecycle, provisioner, dynamic…)")
            });
            for a in body.attributes() {
                f.check(
                    !["count", "for_each", "depends_on", "provider"].contains(&a.key()),
                    || format!("{d}: {ty}.{name} uses meta-argument {}", a.key()),
                );
                exprs.push((format!("{ty}.{name}.{}", a.key()), a.expr()));
            }
        }
        for (place, expr) in exprs {
            let mut refs = Vec::new();
            let mut problems = Vec::new();
            walk(expr, &mut refs, &mut problems);
            for p in problems {
                f.0.push(format!("{d}: {place}: {p}"));
            }
            for r in refs {
                let known = match &r {
                    Ref::Var(v) => m.variables.contains_key(v),
                    Ref::Local(l) => m.locals.contains_key(l),
                    Ref::Path(p) => p == "module",
                    Ref::Resource(t, n, _) => m.resources.contains_key(&(t.clone(), n.clone())),
                };
                f.check(known, || format!("{d}: {place}: unknown reference {r:?}"));
            }
        }
    }
    f.assert_none();
}

#[test]
fn local_files_are_written_under_base_dir() {
    let modules = load_library();
    let mut f = Failures::default();
    for m in modules.values() {
        let d = &m.dir_name;
        f.check(m.target_inputs().contains(&"base_dir".to_owned()), || {
            format!("{d}: base_dir must be a target input")
        });
        for ((ty, name), body) in &m.resources {
            if ty != "local_file" {
                continue;
            }
            let Some(filename) = attr_expr(body, "filename") else {
                f.0.push(format!("{d}: local_file.{name} has no filename"));
                continue;
            };
            f.check(variables_reached(m, filename).contains("base_dir"), || {
                format!("{d}: local_file.{name} is not written under var.base_dir")
            });
            let mut refs = Vec::new();
            walk(filename, &mut refs, &mut Vec::new());
            f.check(!refs.iter().any(|r| matches!(r, Ref::Path(_))), || {
                format!("{d}: local_file.{name} uses path.* (the run's scratch dir)")
            });
        }
    }
    f.assert_none();
}

#[test]
fn readme_tables_list_exactly_the_inputs_and_outputs() {
    let modules = load_library();
    let mut f = Failures::default();
    for m in modules.values() {
        let d = &m.dir_name;
        let inputs = readme_table(&m.readme, "Inputs");
        let names: BTreeSet<&str> = inputs.iter().map(|r| r[0].as_str()).collect();
        let declared: BTreeSet<&str> = m.variables.keys().map(String::as_str).collect();
        f.check(names == declared, || {
            format!("{d}: README inputs {names:?} differ from variables {declared:?}")
        });
        f.check(names.len() == inputs.len(), || {
            format!("{d}: README lists an input twice")
        });
        for row in &inputs {
            let Some(var) = m.variables.get(&row[0]) else {
                continue;
            };
            let [_, ty, default, sensitive, description] = row.as_slice() else {
                f.0.push(format!(
                    "{d}: input row {:?} needs name | type | default | sensitive | description",
                    row[0]
                ));
                continue;
            };
            f.check(squash(ty) == squash(&var.ty.to_string()), || {
                format!(
                    "{d}: input {} type is {} in README, {} in variables.tf",
                    row[0], ty, var.ty
                )
            });
            // "required" for no default, else the default as JSON (compared as values, so
            // the order of object keys does not matter).
            let matches_default = match &var.default {
                None => default == "required",
                Some(v) => {
                    serde_json::from_str::<serde_json::Value>(default).is_ok_and(|d| d == *v)
                }
            };
            f.check(matches_default, || {
                let want = var
                    .default
                    .as_ref()
                    .map_or("required".to_owned(), |v| v.to_string());
                format!(
                    "{d}: input {} default is {default} in README, {want} in variables.tf",
                    row[0]
                )
            });
            let want_sensitive = if var.sensitive { "yes" } else { "no" };
            f.check(sensitive == want_sensitive, || {
                format!("{d}: input {} sensitive is {sensitive} in README, {want_sensitive} in variables.tf", row[0])
            });
            f.check(!description.is_empty() && var.description.is_some(), || {
                format!(
                    "{d}: input {} needs a description in README and variables.tf",
                    row[0]
                )
            });
        }

        let outputs = readme_table(&m.readme, "Outputs");
        let names: BTreeSet<&str> = outputs.iter().map(|r| r[0].as_str()).collect();
        let declared: BTreeSet<&str> = m.outputs.keys().map(String::as_str).collect();
        f.check(names == declared, || {
            format!("{d}: README outputs {names:?} differ from outputs {declared:?}")
        });
        f.check(names.len() == outputs.len(), || {
            format!("{d}: README lists an output twice")
        });
        for row in &outputs {
            let Some(out) = m.outputs.get(&row[0]) else {
                continue;
            };
            let [_, ty, description] = row.as_slice() else {
                f.0.push(format!(
                    "{d}: output row {:?} needs name | type | description",
                    row[0]
                ));
                continue;
            };
            match infer(m, &out.expr, 0) {
                Ok(actual) => f.check(squash(ty) == squash(&actual.to_string()), || {
                    format!(
                        "{d}: output {} type is {ty} in README, {actual} in outputs.tf",
                        row[0]
                    )
                }),
                Err(e) => f.0.push(format!("{d}: output {}: {e}", row[0])),
            }
            f.check(!description.is_empty() && out.description.is_some(), || {
                format!(
                    "{d}: output {} needs a description in README and outputs.tf",
                    row[0]
                )
            });
        }
    }
    f.assert_none();
}

#[test]
fn examples_use_only_library_modules() {
    let modules = load_library();
    let examples = library_root().join("examples");
    let mut f = Failures::default();
    let mut templates = 0;
    for entry in fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path().join("template.yaml");
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        templates += 1;
        for line in text.lines() {
            let Some(module) = line.trim().strip_prefix("module:") else {
                continue;
            };
            let module = module.trim().trim_matches('"');
            // The aws family has a contract test of its own (libs/templating/tests/aws_modules.rs).
            let known = match module.split_once('/') {
                Some(("local", kind)) => modules.contains_key(kind),
                Some(("aws", kind)) => library_root()
                    .join("aws")
                    .join(kind)
                    .join("module.cairn.json")
                    .is_file(),
                _ => false,
            };
            f.check(known, || {
                format!("{}: unknown module {module:?}", path.display())
            });
        }
    }
    f.check(templates > 0, || {
        "modules/examples holds no template.yaml".into()
    });
    f.assert_none();
}

/// The checks above must be able to fail: a sensitive output, a leaked secret, a wrong
/// wiring type and a README row too many are each caught.
#[test]
fn the_checks_catch_broken_modules() {
    let dir = std::env::temp_dir().join(format!("cairn-contract-{}", std::process::id()));
    let bad = |files: &[(&str, &str)]| {
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            fs::write(dir.join(name), text).unwrap();
        }
        Module::load(&dir)
    };
    let meta = (
        "module.cairn.json",
        r#"{"kind":"x","wiring":{},"target_inputs":[]}"#,
    );

    let m = bad(&[
        meta,
        (
            "main.tf",
            r#"
variable "pw" {
  type      = string
  sensitive = true
}
locals { wrapped = jsonencode({ p = var.pw }) }
resource "terraform_data" "t" { input = local.wrapped }
output "leak" { value = terraform_data.t.output }
output "hidden" {
  value     = "x"
  sensitive = true
}
"#,
        ),
    ]);
    let leak = variables_reached(&m, &m.outputs["leak"].expr);
    assert!(
        leak.contains("pw"),
        "a secret through a local and a resource is traced"
    );
    assert!(m.outputs["hidden"].sensitive);

    let m = bad(&[
        meta,
        (
            "main.tf",
            "output \"n\" { value = var.count > 1 ? 1 : 2 }\n",
        ),
    ]);
    let mut problems = Vec::new();
    walk(&m.outputs["n"].expr, &mut Vec::new(), &mut problems);
    assert!(
        problems.iter().any(|p| p.contains("conditional")),
        "{problems:?}"
    );

    let wanted = Ty::parse(
        &hcl::parse("t = object({ port = number })")
            .unwrap()
            .attributes()
            .next()
            .unwrap()
            .expr()
            .clone(),
    )
    .unwrap();
    let actual = Ty::Object(vec![Attr {
        name: "port".into(),
        ty: Ty::String,
        optional: None,
    }]);
    assert!(
        !assignable(&actual, &wanted),
        "a string output does not fit a number input"
    );

    let readme = "## Inputs\n\n| Name | Type | Default | Sensitive | Description |\n|---|---|---|---|---|\n| `a` | `string` | required | no | x |\n| `b` | `number` | `1` | no | y |\n\n## Outputs\n";
    let rows = readme_table(readme, "Inputs");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1][0], "b");
    assert!(readme_table(readme, "Outputs").is_empty());
    let _ = fs::remove_dir_all(&dir);
}
