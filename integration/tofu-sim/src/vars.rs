//! Root module variable values: defaults, `TF_VAR_*`, `terraform.tfvars[.json]`,
//! `*.auto.tfvars[.json]` and `-var`/`-var-file`, in OpenTofu's precedence order.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use serde_json::Value as Json;

use crate::config::{ConfigError, Module, cerr};
use crate::eval::const_value;
use crate::value::{Ty, V, convert};

fn parse_cli_value(decl_ty: Option<&Ty>, raw: &str) -> Result<V, String> {
    match decl_ty {
        None | Some(Ty::String) | Some(Ty::Dynamic) => Ok(V::Str(raw.to_owned())),
        Some(_) => {
            let e = hcl::Expression::from_str(raw).map_err(|e| e.to_string())?;
            const_value(&e)
        }
    }
}

fn file_values(path: &Path) -> Result<Vec<(String, V)>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        cerr(
            "Failed to read variables file",
            format!("{}: {e}", path.display()),
        )
    })?;
    if path.to_string_lossy().ends_with(".json") {
        let j: Json = serde_json::from_str(&text)
            .map_err(|e| cerr("Invalid JSON syntax", format!("{}: {e}", path.display())))?;
        let obj = j
            .as_object()
            .ok_or_else(|| cerr("Invalid variables file", "the root must be an object"))?;
        return Ok(obj
            .iter()
            .map(|(k, v)| (k.clone(), V::from_json(v, &Ty::Dynamic)))
            .collect());
    }
    let body: hcl::Body = hcl::parse(&text).map_err(|e| {
        cerr(
            "Invalid variables file syntax",
            format!("{}: {e}", path.display()),
        )
    })?;
    let mut out = Vec::new();
    for a in body.attributes() {
        let v = const_value(&a.expr).map_err(|d| {
            cerr(
                "Variables not allowed",
                format!("{}: {}: {d}", path.display(), a.key),
            )
        })?;
        out.push((a.key.to_string(), v));
    }
    Ok(out)
}

/// Final values and the raw values plan JSON records.
pub struct Values {
    pub values: BTreeMap<String, V>,
    pub raw: BTreeMap<String, Json>,
}

/// Collects root variable values; `cli` holds ("var", "k=v") and ("var-file", path) in order.
pub fn collect(
    root: &Module,
    cli: &[(String, String)],
    warn: &mut Vec<(String, String)>,
) -> Result<Values, ConfigError> {
    let mut given: BTreeMap<String, V> = BTreeMap::new();
    let mut set = |name: String,
                   v: V,
                   strict: bool,
                   given: &mut BTreeMap<String, V>|
     -> Result<(), ConfigError> {
        if !root.variables.contains_key(&name) {
            if strict {
                return Err(cerr(
                    "Value for undeclared variable",
                    format!(
                        "A variable named \"{name}\" was assigned on the command line, but the root module does not declare a variable of that name. To use this value, add a \"variable\" block to the configuration."
                    ),
                ));
            }
            warn.push((
                "Value for undeclared variable".into(),
                format!("The root module does not declare a variable named \"{name}\" but a value was found in file. If you meant to use this value, add a \"variable\" block to the configuration."),
            ));
            return Ok(());
        }
        given.insert(name, v);
        Ok(())
    };
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter_map(|(k, v)| k.strip_prefix("TF_VAR_").map(|n| (n.to_owned(), v)))
        .collect();
    env.sort();
    for (name, raw) in env {
        if let Some(decl) = root.variables.get(&name) {
            let ty = decl.type_given.then_some(&decl.ty);
            let v = parse_cli_value(ty, &raw).map_err(|d| {
                cerr(
                    "Invalid value for input variable",
                    format!("TF_VAR_{name}: {d}"),
                )
            })?;
            given.insert(name, v);
        }
    }
    let dir = Path::new(".");
    let mut files = Vec::new();
    for f in ["terraform.tfvars", "terraform.tfvars.json"] {
        if dir.join(f).is_file() {
            files.push(dir.join(f));
        }
    }
    let mut autos: Vec<_> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.ends_with(".auto.tfvars") || n.ends_with(".auto.tfvars.json")
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    autos.sort();
    files.extend(autos);
    for f in files {
        for (k, v) in file_values(&f)? {
            set(k, v, false, &mut given)?;
        }
    }
    for (flag, arg) in cli {
        if flag == "var-file" {
            for (k, v) in file_values(Path::new(arg))? {
                set(k, v, false, &mut given)?;
            }
        } else {
            let (k, raw) = arg.split_once('=').ok_or_else(|| {
                cerr(
                    "Invalid -var option",
                    format!("The given -var option {arg:?} is not correctly specified. It must be a variable name and value separated an equals sign, like -var=\"key=value\"."),
                )
            })?;
            let ty = root
                .variables
                .get(k)
                .filter(|d| d.type_given)
                .map(|d| &d.ty);
            let v = parse_cli_value(ty, raw)
                .map_err(|d| cerr("Invalid value for input variable", format!("-var {k}: {d}")))?;
            set(k.to_owned(), v, true, &mut given)?;
        }
    }
    let mut out = Values {
        values: BTreeMap::new(),
        raw: BTreeMap::new(),
    };
    for (name, decl) in &root.variables {
        let (raw, v) = match given.get(name) {
            Some(v) if !v.is_null() || decl.nullable => {
                let conv = if v.is_null() && decl.default.is_some() && !decl.nullable {
                    decl.default.clone().unwrap_or(V::null())
                } else {
                    convert(v, &decl.ty).map_err(|d| {
                        cerr(
                            "Invalid value for input variable",
                            format!("The given value is not suitable for var.{name} declared at main.tf: {d}."),
                        )
                    })?
                };
                (v.to_json(), conv)
            }
            _ => match &decl.default {
                Some(d) => (d.to_json(), d.clone()),
                None => {
                    return Err(cerr(
                        "No value for required variable",
                        format!(
                            "The root module input variable \"{name}\" is not set, and has no default value. Use a -var or -var-file command line argument to provide a value for this variable."
                        ),
                    ));
                }
            },
        };
        out.raw.insert(name.clone(), raw);
        out.values.insert(name.clone(), v);
    }
    Ok(out)
}

/// Rebuilds values from a plan file's raw values.
pub fn from_raw(
    root: &Module,
    raw: &BTreeMap<String, Json>,
) -> Result<BTreeMap<String, V>, ConfigError> {
    let mut out = BTreeMap::new();
    for (name, decl) in &root.variables {
        let j = raw.get(name).cloned().unwrap_or(Json::Null);
        let v = if j.is_null() {
            decl.default.clone().unwrap_or(V::Null(decl.ty.concrete()))
        } else {
            convert(&V::from_json(&j, &Ty::Dynamic), &decl.ty)
                .map_err(|d| cerr("Invalid value for input variable", d))?
        };
        out.insert(name.clone(), v);
    }
    Ok(out)
}
