//! Input expressions: literals, `${params.x}` (also inside strings), `${resources.r}` and
//! `${resources.r.output}` (whole values only); `$${` is a literal `${`.
use std::collections::BTreeMap;

use crate::yaml::{Loc, Node, Value};

/// An input value as written in the template.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub loc: Loc,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    /// Literal text with interpolated parameters.
    Str(Vec<Part>),
    List(Vec<Expr>),
    Map(BTreeMap<String, Expr>),
    /// `${params.x}` as the whole value: keeps the parameter's type.
    Param(String),
    /// `${resources.r}`: the upstream's outputs as one object.
    Outputs(String),
    /// `${resources.r.output}`.
    Output(String, String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Lit(String),
    Param(String),
}

/// Why an expression is not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    pub loc: Loc,
    /// Path below the input (`[0].host`), empty at the top.
    pub subpath: String,
    pub message: String,
}

enum Reference {
    Param(String),
    Outputs(String),
    Output(String, String),
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn parse_reference(inner: &str) -> Result<Reference, String> {
    let inner = inner.trim();
    let parts: Vec<&str> = inner.split('.').collect();
    match parts.as_slice() {
        ["params", p] if is_ident(p) => Ok(Reference::Param((*p).to_owned())),
        ["resources", r] if is_ident(r) => Ok(Reference::Outputs((*r).to_owned())),
        ["resources", r, o] if is_ident(r) && is_ident(o) => {
            Ok(Reference::Output((*r).to_owned(), (*o).to_owned()))
        }
        _ => Err(format!(
            "unsupported expression ${{{inner}}}: only ${{params.<name>}}, ${{resources.<name>}} and ${{resources.<name>.<output>}} are allowed (write $${{ for a literal ${{)"
        )),
    }
}

/// Splits a string into literal text and references.
fn scan(s: &str) -> Result<Vec<(bool, String)>, String> {
    // (is_reference, text)
    let mut out: Vec<(bool, String)> = Vec::new();
    let mut lit = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        if rest[..i].ends_with('$') {
            // `$${` is an escaped literal `${`.
            lit.push_str(&rest[..i - 1]);
            lit.push_str("${");
            rest = &rest[i + 2..];
            continue;
        }
        lit.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            return Err("unterminated ${ (write $${ for a literal ${)".to_owned());
        };
        if !lit.is_empty() {
            out.push((false, std::mem::take(&mut lit)));
        }
        out.push((true, after[..end].to_owned()));
        rest = &after[end + 1..];
    }
    lit.push_str(rest);
    if !lit.is_empty() {
        out.push((false, lit));
    }
    Ok(out)
}

fn parse_string(s: &str, loc: Loc, subpath: &str, errors: &mut Vec<ExprError>) -> ExprKind {
    let err = |message: String| ExprError {
        loc,
        subpath: subpath.to_owned(),
        message,
    };
    let pieces = match scan(s) {
        Ok(p) => p,
        Err(m) => {
            errors.push(err(m));
            return ExprKind::Str(vec![Part::Lit(s.to_owned())]);
        }
    };
    if let [(true, inner)] = pieces.as_slice() {
        return match parse_reference(inner) {
            Ok(Reference::Param(p)) => ExprKind::Param(p),
            Ok(Reference::Outputs(r)) if subpath.is_empty() => ExprKind::Outputs(r),
            Ok(Reference::Output(r, o)) if subpath.is_empty() => ExprKind::Output(r, o),
            Ok(Reference::Outputs(_) | Reference::Output(..)) => {
                errors.push(err(
                    "a ${resources…} reference must be the whole value of an input, not nested in a list or map".to_owned(),
                ));
                ExprKind::Null
            }
            Err(m) => {
                errors.push(err(m));
                ExprKind::Null
            }
        };
    }
    let mut parts = Vec::new();
    for (is_ref, text) in pieces {
        if !is_ref {
            parts.push(Part::Lit(text));
            continue;
        }
        match parse_reference(&text) {
            Ok(Reference::Param(p)) => parts.push(Part::Param(p)),
            Ok(Reference::Outputs(_) | Reference::Output(..)) => errors.push(err(
                "a ${resources…} reference must be the whole value of an input, not part of a string".to_owned(),
            )),
            Err(m) => errors.push(err(m)),
        }
    }
    ExprKind::Str(parts)
}

/// Parses an input value; problems are appended to `errors`.
pub fn parse_expr(node: &Node, subpath: &str, errors: &mut Vec<ExprError>) -> Expr {
    let kind = match &node.value {
        Value::Null => ExprKind::Null,
        Value::Bool(b) => ExprKind::Bool(*b),
        Value::Int(i) => ExprKind::Number((*i).into()),
        Value::Float(f) => match serde_json::Number::from_f64(*f) {
            Some(n) => ExprKind::Number(n),
            None => {
                errors.push(ExprError {
                    loc: node.loc,
                    subpath: subpath.to_owned(),
                    message: "numbers must be finite".to_owned(),
                });
                ExprKind::Null
            }
        },
        Value::Str(s) => parse_string(s, node.loc, subpath, errors),
        Value::Seq(items) => ExprKind::List(
            items
                .iter()
                .enumerate()
                .map(|(i, n)| parse_expr(n, &format!("{subpath}[{i}]"), errors))
                .collect(),
        ),
        Value::Map(entries) => ExprKind::Map(
            entries
                .iter()
                .map(|(k, n)| {
                    (
                        k.name.clone(),
                        parse_expr(n, &format!("{subpath}.{}", k.name), errors),
                    )
                })
                .collect(),
        ),
    };
    Expr {
        kind,
        loc: node.loc,
    }
}

impl Expr {
    /// Every parameter this expression uses, with where.
    pub fn params(&self, out: &mut Vec<(String, Loc, bool)>) {
        // (name, loc, whole value)
        match &self.kind {
            ExprKind::Param(p) => out.push((p.clone(), self.loc, true)),
            ExprKind::Str(parts) => {
                for part in parts {
                    if let Part::Param(p) = part {
                        out.push((p.clone(), self.loc, false));
                    }
                }
            }
            ExprKind::List(items) => items.iter().for_each(|e| e.params(out)),
            ExprKind::Map(m) => m.values().for_each(|e| e.params(out)),
            ExprKind::Null
            | ExprKind::Bool(_)
            | ExprKind::Number(_)
            | ExprKind::Outputs(_)
            | ExprKind::Output(..) => {}
        }
    }

    /// The upstream resource this expression references, if any.
    pub fn upstream(&self) -> Option<&str> {
        match &self.kind {
            ExprKind::Outputs(r) | ExprKind::Output(r, _) => Some(r),
            ExprKind::Null
            | ExprKind::Bool(_)
            | ExprKind::Number(_)
            | ExprKind::Str(_)
            | ExprKind::List(_)
            | ExprKind::Map(_)
            | ExprKind::Param(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(s: &str) -> (ExprKind, Vec<ExprError>) {
        let mut errors = Vec::new();
        let k = parse_string(s, Loc::default(), "", &mut errors);
        (k, errors)
    }

    #[test]
    fn references() {
        assert_eq!(parse("${params.x}").0, ExprKind::Param("x".into()));
        assert_eq!(parse("${ resources.db }").0, ExprKind::Outputs("db".into()));
        assert_eq!(
            parse("${resources.db.host}").0,
            ExprKind::Output("db".into(), "host".into())
        );
        assert_eq!(
            parse("a-${params.x}-b").0,
            ExprKind::Str(vec![
                Part::Lit("a-".into()),
                Part::Param("x".into()),
                Part::Lit("-b".into())
            ])
        );
    }

    #[test]
    fn escapes_and_literals() {
        assert_eq!(
            parse("$${params.x} %{ if }").0,
            ExprKind::Str(vec![Part::Lit("${params.x} %{ if }".into())])
        );
        assert!(
            parse("${file(\"/etc/passwd\")}").1[0]
                .message
                .contains("unsupported")
        );
        assert!(
            parse("x ${resources.db}").1[0]
                .message
                .contains("whole value")
        );
        assert!(parse("${params.x").1[0].message.contains("unterminated"));
    }
}
