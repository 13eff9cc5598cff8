//! Command-line flags parsed the way Go's `flag` package does (`-x`, `--x`, `-x=v`, `-x v`).

use std::collections::BTreeMap;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Value,
    Multi,
}

#[derive(Default, Debug)]
pub struct Parsed {
    pub bools: BTreeMap<String, bool>,
    pub values: BTreeMap<String, String>,
    /// Repeatable flags in order: (flag, value).
    pub multi: Vec<(String, String)>,
    pub positional: Vec<String>,
}

impl Parsed {
    pub fn flag(&self, name: &str, default: bool) -> bool {
        self.bools.get(name).copied().unwrap_or(default)
    }
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }
}

/// Parses `args` against `spec`; the error is OpenTofu's message.
pub fn parse(args: &[String], spec: &[(&str, Kind)]) -> Result<Parsed, String> {
    let mut p = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            p.positional.extend(args[i + 1..].iter().cloned());
            break;
        }
        if !a.starts_with('-') || a == "-" {
            p.positional.extend(args[i..].iter().cloned());
            break;
        }
        let body = a.trim_start_matches('-');
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (body, None),
        };
        let Some((_, kind)) = spec.iter().find(|(n, _)| *n == name) else {
            return Err(format!("flag provided but not defined: -{name}"));
        };
        match kind {
            Kind::Bool => {
                let v = match inline.as_deref() {
                    None => true,
                    Some("true" | "1" | "t" | "T" | "TRUE" | "True") => true,
                    Some("false" | "0" | "f" | "F" | "FALSE" | "False") => false,
                    Some(other) => {
                        return Err(format!(
                            "invalid boolean value \"{other}\" for -{name}: parse error"
                        ));
                    }
                };
                p.bools.insert(name.to_owned(), v);
            }
            Kind::Value | Kind::Multi => {
                let v = match inline {
                    Some(v) => v,
                    None => {
                        i += 1;
                        args.get(i)
                            .cloned()
                            .ok_or_else(|| format!("flag needs an argument: -{name}"))?
                    }
                };
                if *kind == Kind::Multi {
                    p.multi.push((name.to_owned(), v));
                } else {
                    p.values.insert(name.to_owned(), v);
                }
            }
        }
        i += 1;
    }
    Ok(p)
}
