//! Static contract of the AWS module family (modules/aws/<kind>): no AWS provider can run
//! here, so what these modules promise is checked from their text.
//!
//! - The library loads as the templates service loads it, with every aws kind.
//! - `module.cairn.json` agrees with the module: kind = directory = the literal `kind`
//!   output; wiring variables exist, are objects, and each attribute is an output of the
//!   upstream kind with a fitting type (output types inferred from their expressions).
//! - Variables are typed and described; required strings and numbers are validated; none is
//!   `sensitive` and none holds a password (secrets only by ARN, or ephemeral).
//! - Outputs are described, none is sensitive and none reaches an ephemeral value.
//! - Ephemeral values reach only write-only (`*_wo`) arguments; `aws_db_instance` and
//!   `aws_secretsmanager_secret_version` use `password_wo`/`secret_string_wo`, never
//!   `password`/`secret_string`.
//! - Providers pinned: hashicorp/aws 6.25.0 (and hashicorp/random 3.7.2 where the ephemeral
//!   password is used); no provider blocks.
//! - Every taggable resource carries `local.tags`, which holds the instance and the
//!   resource name.
//! - README tables list exactly the inputs and outputs, with their types and defaults.
//!
//! The language-subset rules of the local family (tofu-sim) do not apply here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use hcl::expr::{Expression, ObjectKey, TraversalOperator};
use hcl::template::{Element, Template};
use hcl::{Block, Body};

/// Every kind the family provides.
const KINDS: [&str; 12] = [
    "network",
    "security-group",
    "registry",
    "queue",
    "bucket",
    "secret",
    "database",
    "cache",
    "load-balancer",
    "service",
    "dns-record",
    "certificate",
];
const FILES: [&str; 6] = [
    "main.tf",
    "variables.tf",
    "outputs.tf",
    "versions.tf",
    "module.cairn.json",
    "README.md",
];
const AWS: (&str, &str) = ("hashicorp/aws", "6.25.0");
const RANDOM: (&str, &str) = ("hashicorp/random", "3.7.2");
/// AWS resource types that take no `tags` argument.
const UNTAGGABLE: [&str; 14] = [
    "aws_route",
    "aws_route_table_association",
    "aws_security_group_rule",
    "aws_ecr_lifecycle_policy",
    "aws_sqs_queue_redrive_policy",
    "aws_sqs_queue_redrive_allow_policy",
    "aws_s3_bucket_ownership_controls",
    "aws_s3_bucket_public_access_block",
    "aws_s3_bucket_versioning",
    "aws_s3_bucket_server_side_encryption_configuration",
    "aws_s3_bucket_lifecycle_configuration",
    "aws_s3_bucket_policy",
    "aws_secretsmanager_secret_version",
    "aws_iam_role_policy",
];
const UNTAGGABLE_MORE: [&str; 4] = [
    "aws_iam_role_policy_attachment",
    "aws_route53_record",
    "aws_acm_certificate_validation",
    "aws_ecs_cluster_capacity_providers",
];
/// Arguments that would put a secret into state; their write-only forms are `<name>_wo`.
const SECRET_ARGUMENTS: [&str; 5] = [
    "password",
    "secret_string",
    "master_password",
    "auth_token",
    "secret_binary",
];
/// Words that make a variable name a secret's, unless it names a reference.
const SECRET_WORDS: [&str; 5] = ["password", "secret", "token", "private_key", "access_key"];
const REFERENCE_SUFFIXES: [&str; 4] = ["_arn", "_arns", "_version", "_ref"];
/// Attributes of AWS resources that are numbers (the rest the modules output are strings).
const NUMBER_ATTRIBUTES: [&str; 1] = ["port"];

// ---------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Ty {
    String,
    Number,
    Bool,
    Any,
    List(Box<Ty>),
    Set(Box<Ty>),
    Map(Box<Ty>),
    /// Attributes: name, type, `optional(...)` with its default if any.
    Object(Vec<(String, Ty, Option<Option<String>>)>),
}

impl Ty {
    fn parse(expr: &Expression) -> Result<Ty, String> {
        match expr {
            Expression::Variable(v) => match v.as_str() {
                "string" => Ok(Ty::String),
                "number" => Ok(Ty::Number),
                "bool" => Ok(Ty::Bool),
                "any" => Ok(Ty::Any),
                other => Err(format!("unknown type {other}")),
            },
            Expression::FuncCall(call) => {
                let [arg] = call.args.as_slice() else {
                    return Err(format!("{}() takes one argument", call.name.name));
                };
                match call.name.name.as_str() {
                    "list" => Ok(Ty::List(Box::new(Ty::parse(arg)?))),
                    "set" => Ok(Ty::Set(Box::new(Ty::parse(arg)?))),
                    "map" => Ok(Ty::Map(Box::new(Ty::parse(arg)?))),
                    "object" => {
                        let Expression::Object(fields) = arg else {
                            return Err("object() takes attribute types".into());
                        };
                        let mut attrs = Vec::new();
                        for (k, v) in fields {
                            let name = key(k)?;
                            match v {
                                Expression::FuncCall(c) if c.name.name.as_str() == "optional" => {
                                    let ty = Ty::parse(c.args.first().ok_or("optional()")?)?;
                                    let default = c.args.get(1).map(render_literal);
                                    attrs.push((name, ty, Some(default)));
                                }
                                other => attrs.push((name, Ty::parse(other)?, None)),
                            }
                        }
                        Ok(Ty::Object(attrs))
                    }
                    other => Err(format!("unsupported type constructor {other}")),
                }
            }
            other => Err(format!("not a type: {other:?}")),
        }
    }

    fn attr(&self, name: &str) -> Option<&Ty> {
        match self {
            Ty::Object(attrs) => attrs.iter().find(|a| a.0 == name).map(|a| &a.1),
            _ => None,
        }
    }
}

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
                for (i, (n, t, opt)) in attrs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match opt {
                        None => write!(f, "{n} = {t}")?,
                        Some(None) => write!(f, "{n} = optional({t})")?,
                        Some(Some(d)) => write!(f, "{n} = optional({t}, {d})")?,
                    }
                }
                f.write_str("})")
            }
        }
    }
}

/// `actual` (an upstream output) fits `wanted` (a wiring attribute).
fn assignable(actual: &Ty, wanted: &Ty) -> bool {
    match (actual, wanted) {
        (_, Ty::Any) => true,
        (Ty::List(a), Ty::List(w)) | (Ty::Set(a), Ty::Set(w)) | (Ty::Map(a), Ty::Map(w)) => {
            assignable(a, w)
        }
        (a, w) => a == w,
    }
}

fn key(k: &ObjectKey) -> Result<String, String> {
    match k {
        ObjectKey::Identifier(id) => Ok(id.as_str().to_owned()),
        ObjectKey::Expression(Expression::String(s)) => Ok(s.clone()),
        other => Err(format!("computed key {other:?}")),
    }
}

fn render_literal(e: &Expression) -> String {
    match e {
        Expression::String(s) => format!("{s:?}"),
        Expression::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(render_literal)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => hcl::format::to_string(other).unwrap_or_default(),
    }
}

fn literal_json(e: &Expression) -> Option<serde_json::Value> {
    Some(match e {
        Expression::Null => serde_json::Value::Null,
        Expression::Bool(b) => serde_json::Value::Bool(*b),
        Expression::Number(n) => serde_json::to_value(n).ok()?,
        Expression::String(s) => serde_json::Value::String(s.clone()),
        Expression::Array(items) => {
            serde_json::Value::Array(items.iter().map(literal_json).collect::<Option<_>>()?)
        }
        Expression::Object(fields) => {
            let mut m = serde_json::Map::new();
            for (k, v) in fields {
                m.insert(key(k).ok()?, literal_json(v)?);
            }
            serde_json::Value::Object(m)
        }
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------
// A module's text
// ---------------------------------------------------------------------------------------

struct Variable {
    ty: Ty,
    default: Option<serde_json::Value>,
    sensitive: bool,
    description: Option<String>,
    validations: usize,
}

struct Output {
    expr: Expression,
    sensitive: bool,
    description: Option<String>,
}

/// A `resource`, `data` or `ephemeral` block.
struct Block3 {
    what: &'static str,
    ty: String,
    name: String,
    body: Body,
}

struct Module {
    kind: String,
    variables: BTreeMap<String, Variable>,
    outputs: BTreeMap<String, Output>,
    locals: BTreeMap<String, Expression>,
    blocks: Vec<Block3>,
    provider_blocks: usize,
    providers: BTreeMap<String, (String, String)>,
    meta: serde_json::Value,
    readme: String,
}

fn attr<'a>(body: &'a Body, k: &str) -> Option<&'a Expression> {
    body.attributes().find(|a| a.key() == k).map(|a| a.expr())
}

fn label(b: &Block, i: usize) -> String {
    b.labels()
        .get(i)
        .map(|l| l.as_str().to_owned())
        .unwrap_or_default()
}

impl Module {
    fn load(dir: &Path) -> Result<Module, String> {
        let kind = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut m = Module {
            kind,
            variables: BTreeMap::new(),
            outputs: BTreeMap::new(),
            locals: BTreeMap::new(),
            blocks: Vec::new(),
            provider_blocks: 0,
            providers: BTreeMap::new(),
            meta: serde_json::Value::Null,
            readme: fs::read_to_string(dir.join("README.md")).unwrap_or_default(),
        };
        let mut files: Vec<PathBuf> = fs::read_dir(dir)
            .map_err(|e| e.to_string())?
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "tf"))
            .collect();
        files.sort();
        for f in files {
            let text = fs::read_to_string(&f).map_err(|e| e.to_string())?;
            let body = hcl::parse(&text).map_err(|e| format!("{}: {e}", f.display()))?;
            m.add(&body)?;
        }
        let meta = fs::read_to_string(dir.join("module.cairn.json")).map_err(|e| e.to_string())?;
        m.meta = serde_json::from_str(&meta).map_err(|e| e.to_string())?;
        Ok(m)
    }

    fn add(&mut self, body: &Body) -> Result<(), String> {
        for block in body.blocks() {
            let b = block.body();
            match block.identifier() {
                "variable" => {
                    let name = label(block, 0);
                    let ty = attr(b, "type")
                        .map(Ty::parse)
                        .transpose()
                        .map_err(|e| format!("variable {name}: {e}"))?
                        .ok_or_else(|| format!("variable {name} has no type"))?;
                    self.variables.insert(
                        name,
                        Variable {
                            ty,
                            default: attr(b, "default").and_then(literal_json),
                            sensitive: matches!(attr(b, "sensitive"), Some(Expression::Bool(true))),
                            description: match attr(b, "description") {
                                Some(Expression::String(s)) if !s.is_empty() => Some(s.clone()),
                                _ => None,
                            },
                            validations: b
                                .blocks()
                                .filter(|x| x.identifier() == "validation")
                                .count(),
                        },
                    );
                }
                "output" => {
                    let name = label(block, 0);
                    self.outputs.insert(
                        name.clone(),
                        Output {
                            expr: attr(b, "value")
                                .cloned()
                                .ok_or_else(|| format!("output {name} has no value"))?,
                            sensitive: matches!(attr(b, "sensitive"), Some(Expression::Bool(true))),
                            description: match attr(b, "description") {
                                Some(Expression::String(s)) if !s.is_empty() => Some(s.clone()),
                                _ => None,
                            },
                        },
                    );
                }
                "locals" => {
                    for a in b.attributes() {
                        self.locals.insert(a.key().to_owned(), a.expr().clone());
                    }
                }
                what @ ("resource" | "data" | "ephemeral") => self.blocks.push(Block3 {
                    what: match what {
                        "resource" => "resource",
                        "data" => "data",
                        _ => "ephemeral",
                    },
                    ty: label(block, 0),
                    name: label(block, 1),
                    body: b.clone(),
                }),
                "provider" => self.provider_blocks += 1,
                "terraform" => {
                    for rp in b
                        .blocks()
                        .filter(|x| x.identifier() == "required_providers")
                    {
                        for a in rp.body().attributes() {
                            let Expression::Object(fields) = a.expr() else {
                                return Err(format!(
                                    "required_providers.{} is not an object",
                                    a.key()
                                ));
                            };
                            let get = |k: &str| {
                                fields
                                    .iter()
                                    .find_map(|(key, v)| match (key, v) {
                                        (ObjectKey::Identifier(id), Expression::String(s))
                                            if id.as_str() == k =>
                                        {
                                            Some(s.clone())
                                        }
                                        _ => None,
                                    })
                                    .unwrap_or_default()
                            };
                            self.providers
                                .insert(a.key().to_owned(), (get("source"), get("version")));
                        }
                    }
                }
                other => return Err(format!("unexpected top-level block {other}")),
            }
        }
        Ok(())
    }

    fn wiring(&self) -> BTreeMap<String, String> {
        self.meta["wiring"]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn resource(&self, ty: &str, name: &str) -> Option<&Block3> {
        self.blocks
            .iter()
            .find(|b| b.what == "resource" && b.ty == ty && b.name == name)
    }
}

// ---------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------

/// Every traversal in an expression (with nested blocks' attributes for bodies).
fn traversals<'a>(e: &'a Expression, out: &mut Vec<&'a hcl::expr::Traversal>) {
    match e {
        Expression::Traversal(t) => {
            out.push(t);
            traversals(&t.expr, out);
            for op in &t.operators {
                if let TraversalOperator::Index(i) = op {
                    traversals(i, out);
                }
            }
        }
        Expression::Array(items) => items.iter().for_each(|i| traversals(i, out)),
        Expression::Object(fields) => fields.iter().for_each(|(k, v)| {
            if let ObjectKey::Expression(k) = k {
                traversals(k, out);
            }
            traversals(v, out);
        }),
        Expression::FuncCall(c) => c.args.iter().for_each(|a| traversals(a, out)),
        Expression::Parenthesis(p) => traversals(p, out),
        Expression::Conditional(c) => {
            traversals(&c.cond_expr, out);
            traversals(&c.true_expr, out);
            traversals(&c.false_expr, out);
        }
        Expression::Operation(op) => match op.as_ref() {
            hcl::expr::Operation::Unary(u) => traversals(&u.expr, out),
            hcl::expr::Operation::Binary(b) => {
                traversals(&b.lhs_expr, out);
                traversals(&b.rhs_expr, out);
            }
        },
        Expression::ForExpr(f) => {
            traversals(&f.collection_expr, out);
            if let Some(k) = &f.key_expr {
                traversals(k, out);
            }
            traversals(&f.value_expr, out);
            if let Some(c) = &f.cond_expr {
                traversals(c, out);
            }
        }
        Expression::TemplateExpr(t) => {
            if let Ok(template) = Template::from_expr(t) {
                for el in template.elements() {
                    if let Element::Interpolation(i) = el {
                        // Interpolations own their expressions: collect into a leaked copy.
                        let boxed: &'a Expression = Box::leak(Box::new(i.expr.clone()));
                        traversals(boxed, out);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The dotted names of a traversal's root and attribute steps (`ephemeral.random_password.x`).
fn path_of(t: &hcl::expr::Traversal) -> Vec<String> {
    let mut names = Vec::new();
    if let Expression::Variable(v) = &t.expr {
        names.push(v.as_str().to_owned());
    }
    for op in &t.operators {
        if let TraversalOperator::GetAttr(id) = op {
            names.push(id.as_str().to_owned());
        }
    }
    names
}

/// Whether `e` reaches an ephemeral value, directly or through locals.
fn reaches_ephemeral(m: &Module, e: &Expression, depth: usize) -> bool {
    if depth > 16 {
        return true;
    }
    let mut ts = Vec::new();
    traversals(e, &mut ts);
    ts.iter().any(|t| {
        let p = path_of(t);
        match p.first().map(String::as_str) {
            Some("ephemeral") => true,
            Some("local") => p
                .get(1)
                .and_then(|l| m.locals.get(l))
                .is_some_and(|le| reaches_ephemeral(m, le, depth + 1)),
            _ => false,
        }
    })
}

/// Every attribute of a body and its nested blocks (dynamic blocks' content too).
fn all_attributes<'a>(body: &'a Body, prefix: &str, out: &mut Vec<(String, &'a Expression)>) {
    for a in body.attributes() {
        out.push((format!("{prefix}{}", a.key()), a.expr()));
    }
    for b in body.blocks() {
        all_attributes(b.body(), &format!("{prefix}{}.", b.identifier()), out);
    }
}

/// The type of an output expression, from the forms the family uses.
fn infer(m: &Module, e: &Expression, depth: usize) -> Result<Ty, String> {
    if depth > 16 {
        return Err("too deep".into());
    }
    match e {
        Expression::String(_) | Expression::TemplateExpr(_) => Ok(Ty::String),
        Expression::Number(_) => Ok(Ty::Number),
        Expression::Bool(_) => Ok(Ty::Bool),
        Expression::Conditional(c) => {
            let (a, b) = (
                infer(m, &c.true_expr, depth + 1)?,
                infer(m, &c.false_expr, depth + 1)?,
            );
            if a == b {
                Ok(a)
            } else {
                Err(format!("conditional of {a} and {b}"))
            }
        }
        Expression::ForExpr(f) if f.key_expr.is_some() => {
            // `{ for k, x in <resource> : k => x.<attr> }`
            let value = match &f.value_expr {
                Expression::Traversal(t) => path_of(t),
                _ => return Err("for expression value is not an attribute".into()),
            };
            match value.as_slice() {
                [v, a] if *v == f.value_var.as_str() => Ok(Ty::Map(Box::new(attr_ty(a)))),
                _ => Err("for expression value is not <value var>.<attribute>".into()),
            }
        }
        Expression::Traversal(t) => {
            let Expression::Variable(root) = &t.expr else {
                return Err("traversal of a non-reference".into());
            };
            let ops = &t.operators;
            let names: Vec<&str> = ops
                .iter()
                .filter_map(|o| match o {
                    TraversalOperator::GetAttr(id) => Some(id.as_str()),
                    _ => None,
                })
                .collect();
            let splat = ops.iter().any(|o| {
                matches!(
                    o,
                    TraversalOperator::FullSplat | TraversalOperator::AttrSplat
                )
            });
            match root.as_str() {
                "var" => {
                    let mut ty = m
                        .variables
                        .get(names[0])
                        .ok_or_else(|| format!("no variable {}", names[0]))?
                        .ty
                        .clone();
                    for n in &names[1..] {
                        ty = ty
                            .attr(n)
                            .cloned()
                            .ok_or_else(|| format!("no attribute {n}"))?;
                    }
                    Ok(ty)
                }
                "local" => infer(
                    m,
                    m.locals
                        .get(names[0])
                        .ok_or_else(|| format!("no local {}", names[0]))?,
                    depth + 1,
                ),
                "data" | "ephemeral" | "module" | "each" | "count" | "path" => {
                    Err(format!("cannot type {}.*", root.as_str()))
                }
                ty => {
                    let [name, attribute] = names.as_slice() else {
                        return Err(format!("{ty}: expected <type>.<name>.<attribute>"));
                    };
                    if m.resource(ty, name).is_none() {
                        return Err(format!("no resource {ty}.{name}"));
                    }
                    let t = attr_ty(attribute);
                    Ok(if splat { Ty::List(Box::new(t)) } else { t })
                }
            }
        }
        other => Err(format!("cannot type {other:?}")),
    }
}

fn attr_ty(attribute: &str) -> Ty {
    if NUMBER_ATTRIBUTES.contains(&attribute) {
        Ty::Number
    } else {
        Ty::String
    }
}

// ---------------------------------------------------------------------------------------
// README
// ---------------------------------------------------------------------------------------

fn table(readme: &str, section: &str) -> Vec<Vec<String>> {
    let heading = format!("## {section}");
    let mut rows = Vec::new();
    let mut started = false;
    for line in readme.lines().skip_while(|l| l.trim() != heading).skip(1) {
        let t = line.trim();
        if t.starts_with("## ") || (started && !t.starts_with('|')) {
            break;
        }
        if !t.starts_with('|') {
            continue;
        }
        started = true;
        let cells: Vec<String> = t
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().replace('`', ""))
            .collect();
        if cells
            .iter()
            .all(|c| c.chars().all(|ch| ch == '-' || ch == ':'))
        {
            continue;
        }
        rows.push(cells);
    }
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
// The checks
// ---------------------------------------------------------------------------------------

fn modules_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("modules/aws").is_dir())
        .map(|d| d.join("modules"))
        .expect("no modules/aws above the crate")
}

fn load_family(dir: &Path) -> BTreeMap<String, Module> {
    let mut out = BTreeMap::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        // `schema/` holds the provider's argument index, not a module.
        if p.join("module.cairn.json").is_file() {
            let m = Module::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            out.insert(m.kind.clone(), m);
        }
    }
    out
}

/// Every rule above, for the modules of one family directory; the broken rules, each named.
fn violations(dir: &Path) -> Vec<String> {
    let family = load_family(dir);
    let mut v = Vec::new();
    for (kind, m) in &family {
        let d = kind;
        for f in FILES {
            check(
                &mut v,
                dir.join(d).join(f).is_file(),
                format!("{d}: {f} is missing"),
            );
        }
        // The manifest.
        let keys: BTreeSet<&str> = m
            .meta
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        check(
            &mut v,
            keys == BTreeSet::from(["kind", "wiring", "target_inputs"]),
            format!("{d}: module.cairn.json keys are {keys:?}"),
        );
        check(
            &mut v,
            m.meta["kind"] == serde_json::json!(d),
            format!("{d}: module.cairn.json kind differs from the directory"),
        );
        check(
            &mut v,
            matches!(m.outputs.get("kind").map(|o| &o.expr), Some(Expression::String(s)) if s == d),
            format!("{d}: output kind must be the literal {d:?}"),
        );
        for t in m.meta["target_inputs"].as_array().into_iter().flatten() {
            let t = t.as_str().unwrap_or_default();
            check(
                &mut v,
                m.variables.contains_key(t),
                format!("{d}: target input {t} is not a variable"),
            );
        }
        for (name, ty) in [("name", Ty::String), ("instance", Ty::String)] {
            check(
                &mut v,
                m.variables
                    .get(name)
                    .is_some_and(|x| x.ty == ty && x.default.is_none() && x.validations > 0),
                format!("{d}: needs a required, validated string variable {name}"),
            );
        }
        check(
            &mut v,
            m.variables
                .get("tags")
                .is_some_and(|x| x.ty == Ty::Map(Box::new(Ty::String))),
            format!("{d}: needs a variable tags of type map(string)"),
        );

        // Variables.
        let wiring = m.wiring();
        for (name, var) in &m.variables {
            check(
                &mut v,
                var.description.is_some(),
                format!("{d}: variable {name} has no description"),
            );
            check(
                &mut v,
                !var.sensitive,
                format!("{d}: variable {name} is sensitive (secrets go by ARN or ephemeral)"),
            );
            let lower = name.to_ascii_lowercase();
            let secretish = SECRET_WORDS.iter().any(|w| lower.contains(w))
                && !REFERENCE_SUFFIXES.iter().any(|s| lower.ends_with(s));
            // `secrets` is a map of ARNs, validated as such.
            let arn_map =
                name == "secrets" && var.ty == Ty::Map(Box::new(Ty::String)) && var.validations > 0;
            check(
                &mut v,
                !secretish || arn_map,
                format!("{d}: variable {name} looks like it holds a secret"),
            );
            let scalar = matches!(var.ty, Ty::String | Ty::Number);
            let nullable = var.default == Some(serde_json::Value::Null);
            if scalar && !nullable && !wiring.contains_key(name) {
                check(
                    &mut v,
                    var.validations > 0,
                    format!("{d}: variable {name} has no validation block"),
                );
            }
        }

        // Outputs.
        for (name, out) in &m.outputs {
            check(
                &mut v,
                out.description.is_some(),
                format!("{d}: output {name} has no description"),
            );
            check(
                &mut v,
                !out.sensitive,
                format!("{d}: output {name} is sensitive"),
            );
            check(
                &mut v,
                !reaches_ephemeral(m, &out.expr, 0),
                format!("{d}: output {name} reaches an ephemeral value"),
            );
            if let Err(e) = infer(m, &out.expr, 0) {
                v.push(format!("{d}: output {name}: {e}"));
            }
        }

        // Providers.
        let mut want = BTreeMap::from([("aws".to_owned(), (AWS.0.to_owned(), AWS.1.to_owned()))]);
        if m.blocks.iter().any(|b| b.what == "ephemeral") {
            want.insert(
                "random".to_owned(),
                (RANDOM.0.to_owned(), RANDOM.1.to_owned()),
            );
        }
        check(
            &mut v,
            m.providers == want,
            format!(
                "{d}: required_providers must be {want:?}, are {:?}",
                m.providers
            ),
        );
        check(
            &mut v,
            m.provider_blocks == 0,
            format!("{d}: has provider blocks"),
        );

        // Blocks: ephemeral values only in write-only arguments, no secret arguments, tags.
        for b in &m.blocks {
            let at = format!("{d}: {} {}.{}", b.what, b.ty, b.name);
            if b.what == "ephemeral" {
                check(
                    &mut v,
                    b.ty == "random_password",
                    format!("{at}: only random_password is ephemeral here"),
                );
            }
            let mut attrs = Vec::new();
            all_attributes(&b.body, "", &mut attrs);
            for (path, expr) in &attrs {
                let leaf = path.rsplit('.').next().unwrap_or_default();
                check(
                    &mut v,
                    !SECRET_ARGUMENTS.contains(&leaf),
                    format!("{at}: sets {path}, which puts a secret in state (use {leaf}_wo)"),
                );
                if b.what != "ephemeral" && reaches_ephemeral(m, expr, 0) {
                    check(
                        &mut v,
                        leaf.ends_with("_wo"),
                        format!("{at}: {path} takes an ephemeral value but is not write-only"),
                    );
                }
            }
            if b.what == "resource"
                && b.ty.starts_with("aws_")
                && !UNTAGGABLE.contains(&b.ty.as_str())
                && !UNTAGGABLE_MORE.contains(&b.ty.as_str())
            {
                let tagged = attr(&b.body, "tags").is_some_and(|t| {
                    let mut ts = Vec::new();
                    traversals(t, &mut ts);
                    ts.iter().any(|t| path_of(t) == ["local", "tags"])
                });
                check(
                    &mut v,
                    tagged,
                    format!("{at}: has no tags = local.tags (or a merge of it)"),
                );
            }
        }
        let tags_local = m.locals.get("tags").map(|e| {
            let mut ts = Vec::new();
            traversals(e, &mut ts);
            let refs: BTreeSet<Vec<String>> = ts.iter().map(|t| path_of(t)).collect();
            let text = hcl::format::to_string(e).unwrap_or_default();
            refs.contains(&vec!["var".to_owned(), "instance".to_owned()])
                && refs.contains(&vec!["var".to_owned(), "name".to_owned()])
                && text.contains("cairn:instance")
                && text.contains("cairn:resource")
        });
        check(
            &mut v,
            tags_local == Some(true),
            format!(
                "{d}: local.tags must tag cairn:instance = var.instance and cairn:resource = var.name"
            ),
        );

        // Wiring.
        for (var_name, upstream_kind) in &wiring {
            let Some(var) = m.variables.get(var_name) else {
                v.push(format!("{d}: wiring variable {var_name} is not declared"));
                continue;
            };
            let Some(up) = family.get(upstream_kind) else {
                v.push(format!(
                    "{d}: wiring {var_name} expects unknown kind {upstream_kind}"
                ));
                continue;
            };
            let Ty::Object(attrs) = &var.ty else {
                v.push(format!("{d}: wiring variable {var_name} is not an object"));
                continue;
            };
            for (attr_name, want, optional) in attrs {
                match up.outputs.get(attr_name) {
                    None => {
                        if optional.is_none() {
                            v.push(format!(
                                "{d}: {var_name}.{attr_name} is not an output of {upstream_kind}"
                            ));
                        }
                    }
                    Some(out) => match infer(up, &out.expr, 0) {
                        Ok(actual) if assignable(&actual, want) => {}
                        Ok(actual) => v.push(format!(
                            "{d}: {var_name}.{attr_name} is {want}, {upstream_kind}'s output is {actual}"
                        )),
                        Err(e) => v.push(format!("{upstream_kind}: output {attr_name}: {e}")),
                    },
                }
            }
        }

        // README tables.
        let inputs = table(&m.readme, "Inputs");
        let names: BTreeSet<&str> = inputs.iter().map(|r| r[0].as_str()).collect();
        let declared: BTreeSet<&str> = m.variables.keys().map(String::as_str).collect();
        if names != declared || names.len() != inputs.len() {
            v.push(format!(
                "{d}: README inputs {names:?} are not the variables {declared:?}"
            ));
        }
        for row in &inputs {
            let (Some(var), [_, ty, default, _sensitive, _desc]) =
                (m.variables.get(&row[0]), row.as_slice())
            else {
                continue;
            };
            if squash(ty) != squash(&var.ty.to_string()) {
                v.push(format!(
                    "{d}: input {} is {ty} in README, {} in variables.tf",
                    row[0], var.ty
                ));
            }
            let same = match &var.default {
                None => default == "required",
                Some(x) => {
                    serde_json::from_str::<serde_json::Value>(default).is_ok_and(|r| r == *x)
                }
            };
            if !same {
                v.push(format!("{d}: input {} default differs in README", row[0]));
            }
        }
        let outputs = table(&m.readme, "Outputs");
        let names: BTreeSet<&str> = outputs.iter().map(|r| r[0].as_str()).collect();
        let declared: BTreeSet<&str> = m.outputs.keys().map(String::as_str).collect();
        if names != declared || names.len() != outputs.len() {
            v.push(format!(
                "{d}: README outputs {names:?} are not the outputs {declared:?}"
            ));
        }
        for row in &outputs {
            let (Some(out), [_, ty, _]) = (m.outputs.get(&row[0]), row.as_slice()) else {
                continue;
            };
            if let Ok(actual) = infer(m, &out.expr, 0)
                && squash(ty) != squash(&actual.to_string())
            {
                v.push(format!(
                    "{d}: output {} is {ty} in README, {actual} by its value",
                    row[0]
                ));
            }
        }
    }
    v
}

/// Records `msg` when `ok` is false.
fn check(v: &mut Vec<String>, ok: bool, msg: String) {
    if !ok {
        v.push(msg);
    }
}

#[test]
fn the_aws_family_keeps_the_module_contract() {
    let dir = modules_root().join("aws");
    let family = load_family(&dir);
    let kinds: BTreeSet<&str> = family.keys().map(String::as_str).collect();
    assert_eq!(kinds, BTreeSet::from(KINDS), "the aws kinds");
    let v = violations(&dir);
    assert!(
        v.is_empty(),
        "{} violation(s):\n  {}",
        v.len(),
        v.join("\n  ")
    );
}

#[test]
fn the_library_loads_the_aws_family_as_the_templates_service_does() {
    let library = cairn_templating::Library::load_dir(&modules_root()).unwrap();
    for kind in KINDS {
        let spec = library
            .get(&format!("aws/{kind}"))
            .unwrap_or_else(|| panic!("aws/{kind} not in the library"));
        assert_eq!(spec.kind, kind);
        assert!(spec.variables.contains_key("name"));
        assert!(spec.public_outputs().contains(&"kind".to_owned()));
    }
    let db = library.get("aws/database").unwrap();
    assert_eq!(
        db.wiring.get("network").map(String::as_str),
        Some("network")
    );
    assert!(db.public_outputs().contains(&"secret_arn".to_owned()));
    // The local family is still there.
    assert!(library.get("local/database").is_some());
}

#[test]
fn the_database_writes_its_password_only_through_write_only_arguments() {
    let m = Module::load(&modules_root().join("aws/database")).unwrap();
    let db = m.resource("aws_db_instance", "this").unwrap();
    assert!(attr(&db.body, "password").is_none());
    let wo = attr(&db.body, "password_wo").unwrap();
    assert!(reaches_ephemeral(&m, wo, 0));
    assert!(attr(&db.body, "password_wo_version").is_some());
    let version = m
        .resource("aws_secretsmanager_secret_version", "master")
        .unwrap();
    assert!(attr(&version.body, "secret_string").is_none());
    assert!(reaches_ephemeral(
        &m,
        attr(&version.body, "secret_string_wo").unwrap(),
        0
    ));
    assert!(m.outputs.contains_key("secret_arn") && m.outputs.contains_key("endpoint"));
}

/// Every rule can fail: a copy of a module broken one way at a time is caught.
#[test]
fn the_checks_catch_broken_modules() {
    let breakages: [(&str, &str, &str, &str); 7] = [
        (
            "outputs.tf",
            "output \"kind\" {",
            "output \"leak\" {\n  value = ephemeral.random_password.master.result\n  sensitive = true\n  description = \"x\"\n}\n\noutput \"kind\" {",
            "sensitive",
        ),
        (
            "main.tf",
            "password_wo                         = ephemeral",
            "password                            = ephemeral",
            "puts a secret in state",
        ),
        (
            "variables.tf",
            "variable \"tags\" {",
            "variable \"admin_password\" {\n  type = string\n  description = \"x\"\n  sensitive = true\n}\n\nvariable \"tags\" {",
            "looks like it holds a secret",
        ),
        (
            "versions.tf",
            "version = \"6.25.0\"",
            "version = \">= 6.0\"",
            "required_providers",
        ),
        (
            "main.tf",
            "  tags        = local.tags\n}\n\nresource \"aws_security_group\"",
            "}\n\nresource \"aws_security_group\"",
            "has no tags",
        ),
        (
            "variables.tf",
            "type        = object({vpc_id = string, cidr = string, private_subnet_ids = list(string)})",
            "type        = object({vpc_id = number, cidr = string, private_subnet_ids = list(string)})",
            "network.vpc_id is number",
        ),
        (
            "README.md",
            "| `port` | `number` |",
            "| `port` | `string` |",
            "README",
        ),
    ];
    for (file, from, to, expect) in breakages {
        let scratch = tempfile::tempdir().unwrap();
        // The broken database beside the real network it is wired to.
        let family = scratch.path();
        for kind in ["database", "network"] {
            let dst = family.join(kind);
            fs::create_dir(&dst).unwrap();
            let src = modules_root().join("aws").join(kind);
            for f in FILES {
                fs::copy(src.join(f), dst.join(f)).unwrap();
            }
        }
        let path = family.join("database").join(file);
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} has no {from:?}");
        fs::write(&path, text.replacen(from, to, 1)).unwrap();
        let v = violations(family);
        assert!(
            v.iter().any(|x| x.contains(expect)),
            "breaking {file} ({expect}) went unnoticed: {v:?}"
        );
    }
    // The untouched pair passes.
    let scratch = tempfile::tempdir().unwrap();
    for kind in ["database", "network"] {
        let dst = scratch.path().join(kind);
        fs::create_dir(&dst).unwrap();
        for f in FILES {
            fs::copy(modules_root().join("aws").join(kind).join(f), dst.join(f)).unwrap();
        }
    }
    assert_eq!(violations(scratch.path()), Vec::<String>::new());
}

/// The aws example's rendered root configs (the golden files of `tests/golden.rs`, which
/// keep them in step with the template) hold no literal secret: no root variable (so no
/// `TF_VAR_*` secret), no secret-looking input other than references (ARNs) and versions,
/// and nothing shaped like an AWS key; its database uses the write-only module.
#[test]
fn the_aws_example_renders_no_literal_secret() {
    fn walk(path: &str, v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let lower = k.to_ascii_lowercase();
                    let secretish = SECRET_WORDS.iter().any(|w| lower.contains(w))
                        && !REFERENCE_SUFFIXES.iter().any(|s| lower.ends_with(s));
                    if secretish {
                        out.push(format!("{path}.{k}"));
                    }
                    walk(&format!("{path}.{k}"), x, out);
                }
            }
            serde_json::Value::Array(items) => {
                for (i, x) in items.iter().enumerate() {
                    walk(&format!("{path}[{i}]"), x, out);
                }
            }
            serde_json::Value::String(s) => {
                let key_like = (s.starts_with("AKIA") || s.starts_with("ASIA")) && s.len() == 20;
                if key_like || s.contains("BEGIN") && s.contains("PRIVATE KEY") {
                    out.push(format!("{path} = {s}"));
                }
            }
            _ => {}
        }
    }
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden");
    for env in ["development", "production"] {
        let path = golden.join(format!("examples.aws-web-stack.{env}.json"));
        let doc: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        let configs = doc["root_configs"].as_object().unwrap();
        assert_eq!(configs.len(), 8, "{env}: every resource rendered");
        let mut found = Vec::new();
        for (resource, config) in configs {
            let tf = &config["tf_json"];
            assert!(
                tf.get("variable").is_none(),
                "{env}: {resource} declares root variables (a secret would arrive as TF_VAR_*)"
            );
            let source = tf["module"]["this"]["source"].as_str().unwrap();
            assert!(source.starts_with("./modules/aws/"), "{source}");
            walk(resource, &tf["module"]["this"], &mut found);
            // Outputs of the root pass the module's through, none sensitive.
            for (name, out) in tf["output"].as_object().unwrap() {
                assert_eq!(out["sensitive"], false, "{env}: {resource} output {name}");
            }
        }
        // `password_version` is a version, `secret_arn` a reference: both pass `walk`.
        assert!(found.is_empty(), "{env}: secret-looking values: {found:?}");
        let db = &configs["database"]["tf_json"]["module"]["this"];
        assert_eq!(db["source"], "./modules/aws/database");
        assert!(db.get("password_version").is_some());
        let web = &configs["web"]["tf_json"]["module"]["this"];
        assert_eq!(web["database"]["secret_arn"], "database.secret_arn");
    }
    // And the module it renders writes the password only write-only.
    let m = Module::load(&modules_root().join("aws/database")).unwrap();
    let db = m.resource("aws_db_instance", "this").unwrap();
    assert!(attr(&db.body, "password").is_none() && attr(&db.body, "password_wo").is_some());
}
