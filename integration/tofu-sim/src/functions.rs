//! The built-in functions the module library and the fixtures use.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use md5::Md5;
use sha1::{Digest, Sha1};

use crate::eval::Resolver;
use crate::value::{Ty, V, convert, num_string};

/// Encodes JSON as Go's encoding/json does (HTML-safe escapes).
pub fn go_json(j: &serde_json::Value) -> String {
    let s = serde_json::to_string(j).unwrap_or_default();
    s.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

fn s(v: &V) -> Result<String, String> {
    v.as_template_str()
        .ok_or_else(|| "a string is required".to_owned())
}

fn items(v: &V) -> Result<Vec<V>, String> {
    match v {
        V::List(_, xs) | V::Set(_, xs) | V::Tuple(xs) => Ok(xs.clone()),
        _ => Err("a list is required".into()),
    }
}

fn entries(v: &V) -> Result<BTreeMap<String, V>, String> {
    match v {
        V::Map(_, m) | V::Object(m) => Ok(m.clone()),
        _ => Err("a map or object is required".into()),
    }
}

fn n(v: &V) -> Result<f64, String> {
    match convert(v, &Ty::Number)? {
        V::Num(x) => Ok(x),
        _ => Err("a number is required".into()),
    }
}

fn arg(args: &[V], i: usize) -> Result<&V, String> {
    args.get(i).ok_or_else(|| {
        format!(
            "Not enough function arguments (missing argument {}).",
            i + 1
        )
    })
}

/// Calls a function by name.
pub fn call(name: &str, args: Vec<V>, r: &dyn Resolver) -> Result<V, String> {
    match name {
        "sensitive" => return Ok(arg(&args, 0)?.clone().mark(true)),
        "nonsensitive" => return Ok(arg(&args, 0)?.deep_unmark()),
        "timestamp" if r.planning() => return Ok(V::Unknown(Ty::String)),
        "uuid" if r.planning() => return Ok(V::Unknown(Ty::String)),
        "coalesce" => {
            for a in &args {
                if matches!(a.unmark().0, V::Unknown(_)) {
                    return Ok(V::Unknown(Ty::Dynamic));
                }
                if !a.is_null() && a.as_template_str().as_deref() != Some("") {
                    return Ok(a.clone());
                }
            }
            return Err("no non-null, non-empty-string arguments".into());
        }
        _ => {}
    }
    let sens = args.iter().any(V::has_sensitive);
    if let "tolist" | "toset" | "tomap" | "tostring" | "tonumber" | "tobool" = name {
        let ty = match name {
            "tolist" => Ty::List(Box::new(Ty::Dynamic)),
            "toset" => Ty::Set(Box::new(Ty::Dynamic)),
            "tomap" => Ty::Map(Box::new(Ty::Dynamic)),
            "tostring" => Ty::String,
            "tonumber" => Ty::Number,
            _ => Ty::Bool,
        };
        return convert(arg(&args, 0)?, &ty);
    }
    if args.iter().any(V::has_unknown) && name != "length" {
        return Ok(V::Unknown(Ty::Dynamic).mark(sens));
    }
    let args: Vec<V> = args.iter().map(V::deep_unmark).collect();
    let out = pure(name, &args, r)?;
    Ok(out.mark(sens))
}

fn pure(name: &str, args: &[V], r: &dyn Resolver) -> Result<V, String> {
    let a0 = || arg(args, 0);
    Ok(match name {
        "jsonencode" => V::Str(go_json(&a0()?.to_json())),
        "jsondecode" => {
            let j: serde_json::Value =
                serde_json::from_str(&s(a0()?)?).map_err(|e| e.to_string())?;
            V::from_json(&j, &Ty::Dynamic)
        }
        "length" => match a0()? {
            V::Str(x) => V::Num(x.chars().count() as f64),
            V::Unknown(_) => V::Unknown(Ty::Number),
            V::List(_, xs) | V::Set(_, xs) | V::Tuple(xs) => V::Num(xs.len() as f64),
            V::Map(_, m) | V::Object(m) => V::Num(m.len() as f64),
            _ => return Err("length needs a collection or string".into()),
        },
        "merge" => {
            let mut out = BTreeMap::new();
            for a in args {
                if a.is_null() {
                    continue;
                }
                out.extend(entries(a)?);
            }
            V::Object(out)
        }
        "lookup" => {
            let m = entries(a0()?)?;
            let k = s(arg(args, 1)?)?;
            match (m.get(&k), args.get(2)) {
                (Some(v), _) => v.clone(),
                (None, Some(d)) => d.clone(),
                (None, None) => return Err(format!("lookup failed to find key {k:?}")),
            }
        }
        "concat" => {
            let mut out = Vec::new();
            for a in args {
                out.extend(items(a)?);
            }
            V::Tuple(out)
        }
        "flatten" => {
            fn flat(v: &V, out: &mut Vec<V>) {
                match v {
                    V::List(_, xs) | V::Set(_, xs) | V::Tuple(xs) => {
                        xs.iter().for_each(|x| flat(x, out))
                    }
                    other => out.push(other.clone()),
                }
            }
            let mut out = Vec::new();
            for x in items(a0()?)? {
                flat(&x, &mut out);
            }
            V::Tuple(out)
        }
        "distinct" => {
            let mut out: Vec<V> = Vec::new();
            for x in items(a0()?)? {
                if !out.contains(&x) {
                    out.push(x);
                }
            }
            V::Tuple(out)
        }
        "compact" => V::List(
            Ty::String,
            items(a0()?)?
                .into_iter()
                .filter(|x| !x.is_null() && x.as_template_str().as_deref() != Some(""))
                .collect(),
        ),
        "contains" => V::Bool(items(a0()?)?.contains(arg(args, 1)?)),
        "element" => {
            let xs = items(a0()?)?;
            if xs.is_empty() {
                return Err("cannot use element function with an empty list".into());
            }
            let i = n(arg(args, 1)?)? as usize;
            xs[i % xs.len()].clone()
        }
        "keys" => V::List(
            Ty::String,
            entries(a0()?)?.into_keys().map(V::Str).collect(),
        ),
        "values" => V::Tuple(entries(a0()?)?.into_values().collect()),
        "zipmap" => {
            let ks = items(a0()?)?;
            let vs = items(arg(args, 1)?)?;
            V::Object(
                ks.iter()
                    .zip(vs)
                    .map(|(k, v)| Ok((s(k)?, v)))
                    .collect::<Result<_, String>>()?,
            )
        }
        "one" => {
            let xs = items(a0()?)?;
            match xs.len() {
                0 => V::null(),
                1 => xs[0].clone(),
                _ => {
                    return Err(
                        "must be a list, set, or tuple value with either zero or one elements"
                            .into(),
                    );
                }
            }
        }
        "join" => {
            let sep = s(a0()?)?;
            let mut parts = Vec::new();
            for a in &args[1..] {
                for x in items(a)? {
                    parts.push(s(&x)?);
                }
            }
            V::Str(parts.join(&sep))
        }
        "split" => V::List(
            Ty::String,
            s(arg(args, 1)?)?.split(&s(a0()?)?).map(V::str).collect(),
        ),
        "format" => V::Str(format_fn(&s(a0()?)?, &args[1..])?),
        "lower" => V::Str(s(a0()?)?.to_lowercase()),
        "upper" => V::Str(s(a0()?)?.to_uppercase()),
        "title" => V::Str(
            s(a0()?)?
                .split(' ')
                .map(|w| {
                    let mut c = w.chars();
                    c.next()
                        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "trimspace" => V::Str(s(a0()?)?.trim().to_owned()),
        "trimprefix" => {
            let x = s(a0()?)?;
            let p = s(arg(args, 1)?)?;
            V::Str(x.strip_prefix(&p).unwrap_or(&x).to_owned())
        }
        "trimsuffix" => {
            let x = s(a0()?)?;
            let p = s(arg(args, 1)?)?;
            V::Str(x.strip_suffix(&p).unwrap_or(&x).to_owned())
        }
        "startswith" => V::Bool(s(a0()?)?.starts_with(&s(arg(args, 1)?)?)),
        "endswith" => V::Bool(s(a0()?)?.ends_with(&s(arg(args, 1)?)?)),
        "replace" => V::Str(s(a0()?)?.replace(&s(arg(args, 1)?)?, &s(arg(args, 2)?)?)),
        "substr" => {
            let x: Vec<char> = s(a0()?)?.chars().collect();
            let off = n(arg(args, 1)?)? as usize;
            let len = n(arg(args, 2)?)?;
            let end = if len < 0.0 {
                x.len()
            } else {
                (off + len as usize).min(x.len())
            };
            V::Str(
                x.get(off.min(x.len())..end)
                    .unwrap_or_default()
                    .iter()
                    .collect(),
            )
        }
        "base64encode" => V::Str(STANDARD.encode(s(a0()?)?)),
        "base64decode" => V::Str(
            String::from_utf8(STANDARD.decode(s(a0()?)?).map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?,
        ),
        "sha1" => V::Str(hex::encode(Sha1::digest(s(a0()?)?.as_bytes()))),
        "md5" => V::Str(hex::encode(<Md5 as md5::Digest>::digest(
            s(a0()?)?.as_bytes(),
        ))),
        "abspath" => {
            let p = s(a0()?)?;
            let path = std::path::Path::new(&p);
            if path.is_absolute() {
                V::Str(p)
            } else {
                V::Str(format!("{}/{}", r.path_cwd(), p))
            }
        }
        "basename" => V::Str(
            std::path::Path::new(&s(a0()?)?)
                .file_name()
                .map(|x| x.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
        "dirname" => V::Str(
            std::path::Path::new(&s(a0()?)?)
                .parent()
                .map(|x| {
                    let p = x.to_string_lossy().into_owned();
                    if p.is_empty() { ".".to_owned() } else { p }
                })
                .unwrap_or_else(|| ".".to_owned()),
        ),
        "file" => {
            let p = s(a0()?)?;
            V::Str(
                std::fs::read_to_string(&p)
                    .map_err(|e| format!("Invalid value for \"path\" parameter: {p}: {e}"))?,
            )
        }
        "fileexists" => V::Bool(std::path::Path::new(&s(a0()?)?).is_file()),
        "abs" => V::Num(n(a0()?)?.abs()),
        "ceil" => V::Num(n(a0()?)?.ceil()),
        "floor" => V::Num(n(a0()?)?.floor()),
        "max" => V::Num(
            args.iter()
                .map(n)
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .fold(f64::MIN, f64::max),
        ),
        "min" => V::Num(
            args.iter()
                .map(n)
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .fold(f64::MAX, f64::min),
        ),
        "range" => {
            let (start, end, step) = match args.len() {
                1 => (0.0, n(&args[0])?, 1.0),
                2 => (n(&args[0])?, n(&args[1])?, 1.0),
                _ => (n(&args[0])?, n(&args[1])?, n(&args[2])?),
            };
            let mut out = Vec::new();
            let mut x = start;
            while (step > 0.0 && x < end) || (step < 0.0 && x > end) {
                out.push(V::Num(x));
                x += step;
                if out.len() > 1024 {
                    return Err("more than 1024 values were generated".into());
                }
            }
            V::List(Ty::Number, out)
        }
        "timestamp" => V::Str(chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()),
        "uuid" => V::Str(uuid::Uuid::new_v4().to_string()),
        other => return Err(format!("There is no function named \"{other}\".")),
    })
}

fn format_fn(f: &str, args: &[V]) -> Result<String, String> {
    let mut out = String::new();
    let mut it = f.chars().peekable();
    let mut i = 0;
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = String::new();
        while let Some(&d) = it.peek() {
            it.next();
            if d.is_ascii_alphabetic() || d == '%' {
                spec.push(d);
                break;
            }
            spec.push(d);
        }
        if spec == "%" {
            out.push('%');
            continue;
        }
        let v = args
            .get(i)
            .ok_or("not enough arguments for format string")?;
        i += 1;
        match spec.chars().last() {
            Some('d') => out.push_str(&num_string(n(v)?.trunc())),
            Some('v') if !matches!(v, V::Str(_) | V::Num(_) | V::Bool(_)) => {
                out.push_str(&go_json(&v.to_json()))
            }
            Some('q') => out.push_str(&serde_json::to_string(&s(v)?).unwrap_or_default()),
            _ => out.push_str(&s(v)?),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonencode_matches_go() {
        let j = serde_json::json!({"b": "<&>", "a": [1, 2.5, true, null]});
        assert_eq!(
            go_json(&j),
            r#"{"a":[1,2.5,true,null],"b":"\u003c\u0026\u003e"}"#
        );
    }

    #[test]
    fn format_verbs() {
        let args = [V::str("x"), V::Num(4.0)];
        assert_eq!(format_fn("%s-%d-%%", &args).unwrap(), "x-4-%");
        assert!(format_fn("%s %s %s", &args).is_err());
    }
}
