//! Evaluates HCL expressions against a resolver of references (`var.`, `local.`,
//! resources, `module.`, `path.`), with unknown values and sensitive marks; also lists the
//! references of an expression as plan JSON's `configuration` shows them.

use std::collections::BTreeMap;
use std::str::FromStr;

use hcl::expr::{BinaryOperator, Operation, TraversalOperator, UnaryOperator};
use hcl::template::{Directive, Element};
use hcl::{Expression, Template};

use crate::functions;
use crate::value::{Ty, V, convert};

/// What references resolve to.
pub trait Resolver {
    fn var(&self, name: &str) -> Result<V, String>;
    fn local(&self, name: &str) -> Result<V, String>;
    fn resource(&self, rtype: &str, name: &str) -> Result<V, String>;
    fn module(&self, name: &str) -> Result<V, String>;
    fn path_module(&self) -> String;
    fn path_root(&self) -> String;
    fn path_cwd(&self) -> String;
    /// True while planning: `timestamp()` and `uuid()` are unknown.
    fn planning(&self) -> bool;
}

/// Evaluates one expression.
pub fn eval(e: &Expression, r: &dyn Resolver) -> Result<V, String> {
    Ctx {
        r: Some(r),
        scopes: Vec::new(),
    }
    .expr(e)
}

/// Evaluates an expression that may not reference anything (defaults, constants).
pub fn const_value(e: &Expression) -> Result<V, String> {
    Ctx {
        r: None,
        scopes: Vec::new(),
    }
    .expr(e)
}

/// The constant value of an expression for plan JSON, when it has one.
pub fn constant_json(e: &Expression) -> Option<serde_json::Value> {
    if !references(e).is_empty() || has_call(e) {
        return None;
    }
    const_value(e).ok().map(|v| v.to_json())
}

fn has_call(e: &Expression) -> bool {
    let mut found = false;
    walk(e, &mut |x| {
        if matches!(x, Expression::FuncCall(_)) {
            found = true;
        }
    });
    found
}

/// `a.b.c` as parts, for `ignore_changes` and `depends_on`.
pub fn traversal_path(e: &Expression) -> Option<Vec<String>> {
    match e {
        Expression::Variable(v) => Some(vec![v.as_str().to_owned()]),
        Expression::Traversal(t) => {
            let mut parts = traversal_path(&t.expr)?;
            for op in &t.operators {
                match op {
                    TraversalOperator::GetAttr(i) => parts.push(i.to_string()),
                    _ => return Some(parts),
                }
            }
            Some(parts)
        }
        Expression::String(s) => Some(s.split('.').map(str::to_owned).collect()),
        _ => None,
    }
}

struct Ctx<'a> {
    r: Option<&'a dyn Resolver>,
    scopes: Vec<BTreeMap<String, V>>,
}

fn num(n: &hcl::Number) -> V {
    V::Num(n.as_f64().unwrap_or(0.0))
}

impl Ctx<'_> {
    fn resolver(&self) -> Result<&dyn Resolver, String> {
        self.r
            .ok_or_else(|| "Variables may not be used here.".to_owned())
    }

    fn lookup_scope(&self, name: &str) -> Option<V> {
        self.scopes.iter().rev().find_map(|s| s.get(name).cloned())
    }

    fn expr(&mut self, e: &Expression) -> Result<V, String> {
        match e {
            Expression::Null => Ok(V::null()),
            Expression::Bool(b) => Ok(V::Bool(*b)),
            Expression::Number(n) => Ok(num(n)),
            Expression::String(s) => Ok(V::Str(s.clone())),
            Expression::Array(xs) => Ok(V::Tuple(
                xs.iter().map(|x| self.expr(x)).collect::<Result<_, _>>()?,
            )),
            Expression::Object(o) => {
                let mut m = BTreeMap::new();
                let mut sens = false;
                for (k, v) in o {
                    let key = match k {
                        hcl::ObjectKey::Identifier(i) => i.to_string(),
                        hcl::ObjectKey::Expression(Expression::Variable(var)) => {
                            var.as_str().to_owned()
                        }
                        hcl::ObjectKey::Expression(ke) => {
                            let kv = self.expr(ke)?;
                            if matches!(kv.unmark().0, V::Unknown(_)) {
                                return Ok(V::Unknown(Ty::Dynamic));
                            }
                            sens |= kv.unmark().1;
                            kv.as_template_str()
                                .ok_or("Object key must be a string.".to_owned())?
                        }
                        _ => return Err("Unsupported object key".into()),
                    };
                    m.insert(key, self.expr(v)?);
                }
                Ok(V::Object(m).mark(sens))
            }
            Expression::TemplateExpr(t) => {
                let tpl = Template::from_expr(t).map_err(|e| e.to_string())?;
                self.template(&tpl, true)
            }
            Expression::Variable(v) => self
                .lookup_scope(v.as_str())
                .ok_or_else(|| match v.as_str() {
                    "var" | "local" | "module" | "path" | "terraform" | "each" | "count"
                    | "self" => format!("Invalid reference: a bare \"{}\" is not valid.", v.as_str()),
                    other => format!(
                        "A reference to a resource type must be followed by at least one attribute access, specifying the resource name (\"{other}\")."
                    ),
                }),
            Expression::Traversal(t) => self.traversal(&t.expr, &t.operators),
            Expression::FuncCall(f) => {
                let name = f.name.name.as_str();
                if !f.name.namespace.is_empty() {
                    return Err(format!("There is no function named \"{}\".", f.name));
                }
                if self.r.is_none() {
                    return Err("Functions may not be called here.".into());
                }
                if name == "try" || name == "can" {
                    for a in &f.args {
                        if let Ok(v) = self.expr(a) {
                            return Ok(if name == "can" { V::Bool(true) } else { v });
                        }
                    }
                    return if name == "can" {
                        Ok(V::Bool(false))
                    } else {
                        Err("no expression succeeded".into())
                    };
                }
                let mut args = f
                    .args
                    .iter()
                    .map(|a| self.expr(a))
                    .collect::<Result<Vec<_>, _>>()?;
                if f.expand_final
                    && let Some(last) = args.pop()
                {
                    match last.unmark().0 {
                        V::List(_, xs) | V::Tuple(xs) | V::Set(_, xs) => {
                            args.extend(xs.iter().cloned())
                        }
                        _ => return Err("Invalid expanding argument value".into()),
                    }
                }
                let r = self.resolver()?;
                functions::call(name, args, r)
                    .map_err(|m| format!("Error in function call \"{name}\": {m}"))
            }
            Expression::Parenthesis(inner) => self.expr(inner),
            Expression::Conditional(c) => {
                let cond = self.expr(&c.cond_expr)?;
                let (cv, sens) = cond.unmark();
                match cv {
                    V::Bool(true) => Ok(self.expr(&c.true_expr)?.mark(sens)),
                    V::Bool(false) => Ok(self.expr(&c.false_expr)?.mark(sens)),
                    V::Unknown(_) => Ok(V::Unknown(Ty::Dynamic)),
                    V::Str(s) if s == "true" || s == "false" => {
                        if s == "true" {
                            self.expr(&c.true_expr)
                        } else {
                            self.expr(&c.false_expr)
                        }
                    }
                    _ => Err("The condition value is not a bool.".into()),
                }
            }
            Expression::Operation(op) => self.operation(op),
            Expression::ForExpr(f) => {
                let coll = self.expr(&f.collection_expr)?;
                let (cv, sens) = coll.unmark();
                let items: Vec<(V, V)> = match cv {
                    V::List(_, xs) | V::Tuple(xs) | V::Set(_, xs) => xs
                        .iter()
                        .enumerate()
                        .map(|(i, x)| (V::Num(i as f64), x.clone()))
                        .collect(),
                    V::Map(_, m) | V::Object(m) => m
                        .iter()
                        .map(|(k, x)| (V::Str(k.clone()), x.clone()))
                        .collect(),
                    V::Unknown(_) => return Ok(V::Unknown(Ty::Dynamic)),
                    _ => return Err("A for expression needs a collection.".into()),
                };
                let mut list = Vec::new();
                let mut map: BTreeMap<String, V> = BTreeMap::new();
                for (k, v) in items {
                    let mut scope = BTreeMap::new();
                    if let Some(kv) = &f.key_var {
                        scope.insert(kv.to_string(), k);
                    }
                    scope.insert(f.value_var.to_string(), v);
                    self.scopes.push(scope);
                    let res = (|| -> Result<(), String> {
                        if let Some(ce) = &f.cond_expr {
                            match self.expr(ce)?.unmark().0 {
                                V::Bool(true) => {}
                                V::Bool(false) => return Ok(()),
                                _ => return Err("for condition must be bool".into()),
                            }
                        }
                        let val = self.expr(&f.value_expr)?;
                        match &f.key_expr {
                            Some(ke) => {
                                let key = self
                                    .expr(ke)?
                                    .as_template_str()
                                    .ok_or("for key must be a string")?;
                                if f.grouping {
                                    match map.entry(key).or_insert_with(|| V::Tuple(Vec::new())) {
                                        V::Tuple(xs) => xs.push(val),
                                        _ => unreachable!("grouping entries are tuples"),
                                    }
                                } else if map.insert(key.clone(), val).is_some() {
                                    return Err(format!("Duplicate object key {key:?}"));
                                }
                            }
                            None => list.push(val),
                        }
                        Ok(())
                    })();
                    self.scopes.pop();
                    res?;
                }
                Ok(if f.key_expr.is_some() {
                    V::Object(map)
                } else {
                    V::Tuple(list)
                }
                .mark(sens))
            }
            _ => Err("Unsupported expression".into()),
        }
    }

    fn template(&mut self, tpl: &Template, single_unwrap: bool) -> Result<V, String> {
        if single_unwrap && let [Element::Interpolation(i)] = tpl.elements() {
            return self.expr(&i.expr);
        }
        let mut out = String::new();
        let mut sens = false;
        let mut unknown = false;
        for el in tpl.elements() {
            match el {
                Element::Literal(s) => out.push_str(s),
                Element::Interpolation(i) => {
                    let v = self.expr(&i.expr)?;
                    let (inner, s) = v.unmark();
                    sens |= s || inner.has_sensitive();
                    match inner {
                        V::Unknown(_) => unknown = true,
                        V::Null(_) => {
                            return Err("The expression result is null. Cannot include a null value in a string template.".into());
                        }
                        other => out.push_str(&other.as_template_str().ok_or(
                            "Cannot include the given value in a string template: string required.",
                        )?),
                    }
                }
                Element::Directive(d) => match &**d {
                    Directive::If(ifd) => {
                        let c = self.expr(&ifd.cond_expr)?;
                        match c.unmark().0 {
                            V::Bool(true) => push_sub(
                                &mut out,
                                self.template(&ifd.true_template, false)?,
                                &mut sens,
                                &mut unknown,
                            ),
                            V::Bool(false) => {
                                if let Some(ft) = &ifd.false_template {
                                    push_sub(
                                        &mut out,
                                        self.template(ft, false)?,
                                        &mut sens,
                                        &mut unknown,
                                    );
                                }
                            }
                            V::Unknown(_) => unknown = true,
                            _ => return Err("if condition must be bool".into()),
                        }
                    }
                    Directive::For(fd) => {
                        let coll = self.expr(&fd.collection_expr)?;
                        let items: Vec<(V, V)> = match coll.unmark().0 {
                            V::List(_, xs) | V::Tuple(xs) | V::Set(_, xs) => xs
                                .iter()
                                .enumerate()
                                .map(|(i, x)| (V::Num(i as f64), x.clone()))
                                .collect(),
                            V::Map(_, m) | V::Object(m) => m
                                .iter()
                                .map(|(k, x)| (V::Str(k.clone()), x.clone()))
                                .collect(),
                            V::Unknown(_) => {
                                unknown = true;
                                Vec::new()
                            }
                            _ => return Err("for needs a collection".into()),
                        };
                        for (k, v) in items {
                            let mut scope = BTreeMap::new();
                            if let Some(kv) = &fd.key_var {
                                scope.insert(kv.to_string(), k);
                            }
                            scope.insert(fd.value_var.to_string(), v);
                            self.scopes.push(scope);
                            let sub = self.template(&fd.template, false);
                            self.scopes.pop();
                            push_sub(&mut out, sub?, &mut sens, &mut unknown);
                        }
                    }
                },
            }
        }
        Ok(if unknown {
            V::Unknown(Ty::String)
        } else {
            V::Str(out)
        }
        .mark(sens))
    }

    fn traversal(&mut self, root: &Expression, ops: &[TraversalOperator]) -> Result<V, String> {
        let attr = |i: usize| match ops.get(i) {
            Some(TraversalOperator::GetAttr(a)) => Some(a.to_string()),
            _ => None,
        };
        let (base, rest) = match root {
            Expression::Variable(v) if self.lookup_scope(v.as_str()).is_none() => {
                let r = self.resolver()?;
                let name = v.as_str();
                match name {
                    "var" => {
                        let a = attr(0).ok_or("Invalid variable reference")?;
                        (r.var(&a)?, &ops[1..])
                    }
                    "local" => {
                        let a = attr(0).ok_or("Invalid local reference")?;
                        (r.local(&a)?, &ops[1..])
                    }
                    "module" => {
                        let a = attr(0).ok_or("Invalid module reference")?;
                        (r.module(&a)?, &ops[1..])
                    }
                    "path" => {
                        let a = attr(0).ok_or("Invalid path reference")?;
                        let p = match a.as_str() {
                            "module" => r.path_module(),
                            "root" => r.path_root(),
                            "cwd" => r.path_cwd(),
                            other => {
                                return Err(format!(
                                    "The \"path\" object does not have an attribute named \"{other}\"."
                                ));
                            }
                        };
                        (V::Str(p), &ops[1..])
                    }
                    "terraform" => match attr(0).as_deref() {
                        Some("workspace") => (V::str("default"), &ops[1..]),
                        _ => return Err("Invalid \"terraform\" attribute".into()),
                    },
                    "count" | "each" | "self" => {
                        return Err(format!(
                            "The \"{name}\" object cannot be used in this context."
                        ));
                    }
                    rtype => {
                        let a = attr(0).ok_or_else(|| {
                            format!("A reference to a resource type must be followed by at least one attribute access, specifying the resource name (\"{rtype}\").")
                        })?;
                        (r.resource(rtype, &a)?, &ops[1..])
                    }
                }
            }
            other => (self.expr(other)?, ops),
        };
        let mut cur = base;
        for op in rest {
            cur = self.apply_op(cur, op)?;
        }
        Ok(cur)
    }

    fn apply_op(&mut self, cur: V, op: &TraversalOperator) -> Result<V, String> {
        let (inner, sens) = cur.unmark();
        let inner = inner.clone();
        let out = match op {
            TraversalOperator::GetAttr(a) => match &inner {
                V::Object(m) | V::Map(_, m) => m.get(a.as_str()).cloned().ok_or_else(|| {
                    format!("This object does not have an attribute named \"{a}\".")
                })?,
                V::Unknown(_) => V::Unknown(Ty::Dynamic),
                V::Null(_) => {
                    return Err(format!(
                        "Attempt to get attribute \"{a}\" from a null value."
                    ));
                }
                _ => return Err(format!("Unsupported attribute \"{a}\".")),
            },
            TraversalOperator::Index(ie) => {
                let idx = self.expr(ie)?;
                index(&inner, &idx)?
            }
            TraversalOperator::LegacyIndex(i) => index(&inner, &V::Num(*i as f64))?,
            TraversalOperator::AttrSplat | TraversalOperator::FullSplat => match &inner {
                V::Null(_) => V::Tuple(Vec::new()),
                V::List(..) | V::Tuple(_) | V::Set(..) => inner.clone(),
                other => V::Tuple(vec![other.clone()]),
            },
        };
        Ok(out.mark(sens))
    }

    fn operation(&mut self, op: &Operation) -> Result<V, String> {
        match op {
            Operation::Unary(u) => {
                let v = self.expr(&u.expr)?;
                let (inner, sens) = v.unmark();
                let out = match (u.operator, inner) {
                    (_, V::Unknown(_)) => V::Unknown(Ty::Dynamic),
                    (UnaryOperator::Neg, V::Num(n)) => V::Num(-n),
                    (UnaryOperator::Not, V::Bool(b)) => V::Bool(!b),
                    _ => return Err("Invalid operand for unary operator.".into()),
                };
                Ok(out.mark(sens))
            }
            Operation::Binary(b) => {
                let l = self.expr(&b.lhs_expr)?;
                // Short-circuit logical operators.
                if matches!(b.operator, BinaryOperator::And | BinaryOperator::Or) {
                    let (lv, ls) = l.unmark();
                    let lb = match lv {
                        V::Bool(x) => *x,
                        V::Unknown(_) => return Ok(V::Unknown(Ty::Bool)),
                        _ => return Err("Invalid operand: a bool is required.".into()),
                    };
                    if b.operator == BinaryOperator::And && !lb {
                        return Ok(V::Bool(false).mark(ls));
                    }
                    if b.operator == BinaryOperator::Or && lb {
                        return Ok(V::Bool(true).mark(ls));
                    }
                    let r = self.expr(&b.rhs_expr)?;
                    let (rv, rs) = r.unmark();
                    return match rv {
                        V::Bool(x) => Ok(V::Bool(*x).mark(ls || rs)),
                        V::Unknown(_) => Ok(V::Unknown(Ty::Bool)),
                        _ => Err("Invalid operand: a bool is required.".into()),
                    };
                }
                let r = self.expr(&b.rhs_expr)?;
                let (lv, ls) = l.unmark();
                let (rv, rs) = r.unmark();
                let sens = ls || rs;
                if matches!(lv, V::Unknown(_)) || matches!(rv, V::Unknown(_)) {
                    return Ok(V::Unknown(Ty::Dynamic));
                }
                let out = match b.operator {
                    BinaryOperator::Eq => V::Bool(values_equal(lv, rv)),
                    BinaryOperator::NotEq => V::Bool(!values_equal(lv, rv)),
                    _ => {
                        let ln = as_num(lv)?;
                        let rn = as_num(rv)?;
                        match b.operator {
                            BinaryOperator::Plus => V::Num(ln + rn),
                            BinaryOperator::Minus => V::Num(ln - rn),
                            BinaryOperator::Mul => V::Num(ln * rn),
                            BinaryOperator::Div => {
                                if rn == 0.0 {
                                    return Err("Division by zero".into());
                                }
                                V::Num(ln / rn)
                            }
                            BinaryOperator::Mod => V::Num(ln % rn),
                            BinaryOperator::Less => V::Bool(ln < rn),
                            BinaryOperator::LessEq => V::Bool(ln <= rn),
                            BinaryOperator::Greater => V::Bool(ln > rn),
                            BinaryOperator::GreaterEq => V::Bool(ln >= rn),
                            _ => return Err("Unsupported operator".into()),
                        }
                    }
                };
                Ok(out.mark(sens))
            }
        }
    }
}

fn push_sub(out: &mut String, v: V, sens: &mut bool, unknown: &mut bool) {
    let (inner, s) = v.unmark();
    *sens |= s;
    match inner {
        V::Str(x) => out.push_str(x),
        _ => *unknown = true,
    }
}

fn as_num(v: &V) -> Result<f64, String> {
    match convert(v, &Ty::Number)? {
        V::Num(n) => Ok(n),
        _ => Err("a number is required".into()),
    }
}

fn values_equal(a: &V, b: &V) -> bool {
    a.deep_unmark().to_json() == b.deep_unmark().to_json() && (a.is_null() == b.is_null())
}

fn index(coll: &V, idx: &V) -> Result<V, String> {
    let (iv, _) = idx.unmark();
    if matches!(iv, V::Unknown(_)) {
        return Ok(V::Unknown(Ty::Dynamic));
    }
    match coll {
        V::List(_, xs) | V::Tuple(xs) => {
            let i = as_num(iv)?;
            if i < 0.0 || i.fract() != 0.0 {
                return Err("Invalid index".into());
            }
            xs.get(i as usize).cloned().ok_or_else(|| {
                "The given key does not identify an element in this collection value.".to_owned()
            })
        }
        V::Map(_, m) | V::Object(m) => {
            let k = iv
                .as_template_str()
                .ok_or("Invalid index: a string is required")?;
            m.get(&k).cloned().ok_or_else(|| {
                format!(
                    "The given key does not identify an element in this collection value: {k:?}."
                )
            })
        }
        V::Unknown(_) => Ok(V::Unknown(Ty::Dynamic)),
        V::Null(_) => Err("Cannot index a null value.".into()),
        _ => Err("This value does not have any indices.".into()),
    }
}

/// Walks every sub-expression (templates included).
pub fn walk(e: &Expression, f: &mut dyn FnMut(&Expression)) {
    f(e);
    match e {
        Expression::Array(xs) => xs.iter().for_each(|x| walk(x, f)),
        Expression::Object(o) => {
            for (k, v) in o {
                if let hcl::ObjectKey::Expression(ke) = k {
                    walk(ke, f);
                }
                walk(v, f);
            }
        }
        Expression::TemplateExpr(t) => {
            if let Ok(tpl) = Template::from_expr(t) {
                walk_template(&tpl, f);
            }
        }
        Expression::Traversal(t) => {
            walk(&t.expr, f);
            for op in &t.operators {
                if let TraversalOperator::Index(ie) = op {
                    walk(ie, f);
                }
            }
        }
        Expression::FuncCall(c) => c.args.iter().for_each(|x| walk(x, f)),
        Expression::Parenthesis(p) => walk(p, f),
        Expression::Conditional(c) => {
            walk(&c.cond_expr, f);
            walk(&c.true_expr, f);
            walk(&c.false_expr, f);
        }
        Expression::Operation(op) => match &**op {
            Operation::Unary(u) => walk(&u.expr, f),
            Operation::Binary(b) => {
                walk(&b.lhs_expr, f);
                walk(&b.rhs_expr, f);
            }
        },
        Expression::ForExpr(fe) => {
            walk(&fe.collection_expr, f);
            if let Some(k) = &fe.key_expr {
                walk(k, f);
            }
            walk(&fe.value_expr, f);
            if let Some(c) = &fe.cond_expr {
                walk(c, f);
            }
        }
        _ => {}
    }
}

fn walk_template(t: &Template, f: &mut dyn FnMut(&Expression)) {
    for el in t.elements() {
        match el {
            Element::Literal(_) => {}
            Element::Interpolation(i) => walk(&i.expr, f),
            Element::Directive(d) => match &**d {
                Directive::If(ifd) => {
                    walk(&ifd.cond_expr, f);
                    walk_template(&ifd.true_template, f);
                    if let Some(ft) = &ifd.false_template {
                        walk_template(ft, f);
                    }
                }
                Directive::For(fd) => {
                    walk(&fd.collection_expr, f);
                    walk_template(&fd.template, f);
                }
            },
        }
    }
}

/// A reference found in an expression.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ref {
    Var(String),
    Local(String),
    Module(String, Option<String>),
    Resource(String, String, Option<String>),
    Path(String),
}

impl Ref {
    /// The strings plan JSON lists for this reference.
    pub fn display(&self) -> Vec<String> {
        match self {
            Ref::Var(n) => vec![format!("var.{n}")],
            Ref::Local(n) => vec![format!("local.{n}")],
            Ref::Path(n) => vec![format!("path.{n}")],
            Ref::Module(m, Some(o)) => vec![format!("module.{m}.{o}"), format!("module.{m}")],
            Ref::Module(m, None) => vec![format!("module.{m}")],
            Ref::Resource(t, n, Some(a)) => vec![format!("{t}.{n}.{a}"), format!("{t}.{n}")],
            Ref::Resource(t, n, None) => vec![format!("{t}.{n}")],
        }
    }
}

/// The references an expression makes, in order of appearance (for-expression symbols excluded).
pub fn references(e: &Expression) -> Vec<Ref> {
    let mut bound: Vec<String> = Vec::new();
    collect_bound(e, &mut bound);
    let mut out = Vec::new();
    walk(e, &mut |x| {
        let (root, ops): (&str, &[TraversalOperator]) = match x {
            Expression::Traversal(t) => match &t.expr {
                Expression::Variable(v) => (v.as_str(), &t.operators),
                _ => return,
            },
            _ => return,
        };
        if bound.iter().any(|b| b == root) {
            return;
        }
        let attr = |i: usize| match ops.get(i) {
            Some(TraversalOperator::GetAttr(a)) => Some(a.to_string()),
            _ => None,
        };
        let r = match root {
            "var" => attr(0).map(Ref::Var),
            "local" => attr(0).map(Ref::Local),
            "path" => attr(0).map(Ref::Path),
            "module" => attr(0).map(|m| Ref::Module(m, attr(1))),
            "terraform" | "count" | "each" | "self" => None,
            rtype => attr(0).map(|n| Ref::Resource(rtype.to_owned(), n, attr(1))),
        };
        if let Some(r) = r
            && !out.contains(&r)
        {
            out.push(r);
        }
    });
    out
}

fn collect_bound(e: &Expression, bound: &mut Vec<String>) {
    walk(e, &mut |x| {
        if let Expression::ForExpr(f) = x {
            bound.push(f.value_var.to_string());
            if let Some(k) = &f.key_var {
                bound.push(k.to_string());
            }
        }
    });
}

/// Parses a `depends_on` entry into a reference.
pub fn depends_ref(e: &Expression) -> Option<Ref> {
    let parts = match e {
        Expression::String(s) => {
            let x = Expression::from_str(s).ok()?;
            traversal_path(&x)?
        }
        other => traversal_path(other)?,
    };
    match parts.as_slice() {
        [m, name, ..] if m == "module" => Some(Ref::Module(name.clone(), None)),
        [t, n, ..] => Some(Ref::Resource(t.clone(), n.clone(), None)),
        _ => None,
    }
}
