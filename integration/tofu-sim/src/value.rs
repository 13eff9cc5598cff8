//! Values and types of the configuration language (a small model of cty): typed collections,
//! unknown values (known only after apply) and sensitive marks.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value as Json, json};

/// A type constraint or the type of a value.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    String,
    Number,
    Bool,
    Dynamic,
    List(Box<Ty>),
    Set(Box<Ty>),
    Map(Box<Ty>),
    Tuple(Vec<Ty>),
    Object(ObjTy),
}

/// An object type; `optional`/`defaults` only appear in type constraints.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ObjTy {
    pub attrs: BTreeMap<String, Ty>,
    pub optional: BTreeSet<String>,
    pub defaults: BTreeMap<String, V>,
}

/// A value.
#[derive(Clone, Debug, PartialEq)]
pub enum V {
    Null(Ty),
    Bool(bool),
    Num(f64),
    Str(String),
    List(Ty, Vec<V>),
    Set(Ty, Vec<V>),
    Tuple(Vec<V>),
    Map(Ty, BTreeMap<String, V>),
    Object(BTreeMap<String, V>),
    Unknown(Ty),
    Sensitive(Box<V>),
}

impl V {
    pub fn null() -> V {
        V::Null(Ty::Dynamic)
    }

    pub fn str(s: impl Into<String>) -> V {
        V::Str(s.into())
    }

    /// Removes a top-level sensitive mark; returns whether there was one.
    pub fn unmark(&self) -> (&V, bool) {
        match self {
            V::Sensitive(inner) => (inner.unmark().0, true),
            other => (other, false),
        }
    }

    pub fn mark(self, sensitive: bool) -> V {
        match (self, sensitive) {
            (v @ V::Sensitive(_), _) => v,
            (v, true) => V::Sensitive(Box::new(v)),
            (v, false) => v,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.unmark().0, V::Null(_))
    }

    /// Whether any part of the value is unknown.
    pub fn has_unknown(&self) -> bool {
        match self {
            V::Unknown(_) => true,
            V::Sensitive(v) => v.has_unknown(),
            V::List(_, xs) | V::Set(_, xs) | V::Tuple(xs) => xs.iter().any(V::has_unknown),
            V::Map(_, m) | V::Object(m) => m.values().any(V::has_unknown),
            _ => false,
        }
    }

    /// Whether any part of the value is sensitive.
    pub fn has_sensitive(&self) -> bool {
        match self {
            V::Sensitive(_) => true,
            V::List(_, xs) | V::Set(_, xs) | V::Tuple(xs) => xs.iter().any(V::has_sensitive),
            V::Map(_, m) | V::Object(m) => m.values().any(V::has_sensitive),
            _ => false,
        }
    }

    /// The value without any sensitive marks.
    pub fn deep_unmark(&self) -> V {
        match self {
            V::Sensitive(v) => v.deep_unmark(),
            V::List(t, xs) => V::List(t.clone(), xs.iter().map(V::deep_unmark).collect()),
            V::Set(t, xs) => V::Set(t.clone(), xs.iter().map(V::deep_unmark).collect()),
            V::Tuple(xs) => V::Tuple(xs.iter().map(V::deep_unmark).collect()),
            V::Map(t, m) => V::Map(t.clone(), unmark_map(m)),
            V::Object(m) => V::Object(unmark_map(m)),
            other => other.clone(),
        }
    }

    pub fn ty(&self) -> Ty {
        match self {
            V::Null(t) | V::Unknown(t) => t.clone(),
            V::Bool(_) => Ty::Bool,
            V::Num(_) => Ty::Number,
            V::Str(_) => Ty::String,
            V::List(t, _) => Ty::List(Box::new(t.clone())),
            V::Set(t, _) => Ty::Set(Box::new(t.clone())),
            V::Map(t, _) => Ty::Map(Box::new(t.clone())),
            V::Tuple(xs) => Ty::Tuple(xs.iter().map(V::ty).collect()),
            V::Object(m) => Ty::Object(ObjTy {
                attrs: m.iter().map(|(k, v)| (k.clone(), v.ty())).collect(),
                ..ObjTy::default()
            }),
            V::Sensitive(v) => v.ty(),
        }
    }

    /// The JSON form (unknowns become null, sensitive values are shown in clear).
    pub fn to_json(&self) -> Json {
        match self {
            V::Null(_) | V::Unknown(_) => Json::Null,
            V::Bool(b) => Json::Bool(*b),
            V::Num(n) => num_json(*n),
            V::Str(s) => Json::String(s.clone()),
            V::List(_, xs) | V::Set(_, xs) | V::Tuple(xs) => {
                Json::Array(xs.iter().map(V::to_json).collect())
            }
            V::Map(_, m) | V::Object(m) => Json::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect::<Map<_, _>>(),
            ),
            V::Sensitive(v) => v.to_json(),
        }
    }

    /// Like `to_json`, but drops unknown object attributes (as plan JSON does).
    pub fn to_known_json(&self) -> Json {
        match self {
            V::Sensitive(v) => v.to_known_json(),
            V::List(_, xs) | V::Set(_, xs) | V::Tuple(xs) => {
                Json::Array(xs.iter().map(V::to_known_json).collect())
            }
            V::Map(_, m) | V::Object(m) => Json::Object(
                m.iter()
                    .filter(|(_, v)| !matches!(v.unmark().0, V::Unknown(_)))
                    .map(|(k, v)| (k.clone(), v.to_known_json()))
                    .collect::<Map<_, _>>(),
            ),
            other => other.to_json(),
        }
    }

    /// Plan JSON's `after_unknown` shape for a value.
    pub fn unknown_json(&self) -> Json {
        match self {
            V::Unknown(_) => Json::Bool(true),
            V::Sensitive(v) => v.unknown_json(),
            V::List(_, xs) | V::Set(_, xs) | V::Tuple(xs) => {
                let items: Vec<Json> = xs.iter().map(V::unknown_json).collect();
                if items.iter().all(|j| j == &Json::Bool(false)) {
                    Json::Bool(false)
                } else {
                    Json::Array(items)
                }
            }
            V::Map(_, m) | V::Object(m) => {
                let o: Map<String, Json> = m
                    .iter()
                    .map(|(k, v)| (k.clone(), v.unknown_json()))
                    .filter(|(_, j)| j != &Json::Bool(false))
                    .collect();
                if o.is_empty() {
                    Json::Bool(false)
                } else {
                    Json::Object(o)
                }
            }
            _ => Json::Bool(false),
        }
    }

    /// Plan JSON's `*_sensitive` shape for a value.
    pub fn sensitive_json(&self) -> Json {
        match self {
            V::Sensitive(_) => Json::Bool(true),
            V::List(_, xs) | V::Set(_, xs) | V::Tuple(xs) => {
                let items: Vec<Json> = xs.iter().map(V::sensitive_json).collect();
                if items.iter().all(|j| j == &Json::Bool(false)) {
                    Json::Bool(false)
                } else {
                    Json::Array(items)
                }
            }
            V::Map(_, m) | V::Object(m) => {
                let o: Map<String, Json> = m
                    .iter()
                    .map(|(k, v)| (k.clone(), v.sensitive_json()))
                    .filter(|(_, j)| j != &Json::Bool(false))
                    .collect();
                if o.is_empty() {
                    Json::Bool(false)
                } else {
                    Json::Object(o)
                }
            }
            _ => Json::Bool(false),
        }
    }

    /// Paths of sensitive parts, in the state's `sensitive_attributes` form.
    pub fn sensitive_paths(&self, prefix: &mut Vec<Json>, out: &mut Vec<Json>) {
        match self {
            V::Sensitive(_) => out.push(Json::Array(prefix.clone())),
            V::List(_, xs) | V::Tuple(xs) => {
                for (i, x) in xs.iter().enumerate() {
                    prefix.push(json!({"type": "index", "value": {"value": i, "type": "number"}}));
                    x.sensitive_paths(prefix, out);
                    prefix.pop();
                }
            }
            V::Map(_, m) => {
                for (k, x) in m {
                    prefix.push(json!({"type": "index", "value": {"value": k, "type": "string"}}));
                    x.sensitive_paths(prefix, out);
                    prefix.pop();
                }
            }
            V::Object(m) => {
                for (k, x) in m {
                    prefix.push(json!({"type": "get_attr", "value": k}));
                    x.sensitive_paths(prefix, out);
                    prefix.pop();
                }
            }
            _ => {}
        }
    }

    /// Reads a JSON value as a value of type `ty` (Dynamic infers tuples and objects).
    pub fn from_json(j: &Json, ty: &Ty) -> V {
        match (j, ty) {
            (Json::Null, t) => V::Null(t.clone()),
            (Json::Bool(b), _) => V::Bool(*b),
            (Json::Number(n), _) => V::Num(n.as_f64().unwrap_or(0.0)),
            (Json::String(s), _) => V::Str(s.clone()),
            (Json::Array(xs), Ty::List(e)) => V::List(
                (**e).clone(),
                xs.iter().map(|x| V::from_json(x, e)).collect(),
            ),
            (Json::Array(xs), Ty::Set(e)) => V::Set(
                (**e).clone(),
                xs.iter().map(|x| V::from_json(x, e)).collect(),
            ),
            (Json::Array(xs), Ty::Tuple(ts)) => V::Tuple(
                xs.iter()
                    .enumerate()
                    .map(|(i, x)| V::from_json(x, ts.get(i).unwrap_or(&Ty::Dynamic)))
                    .collect(),
            ),
            (Json::Array(xs), _) => {
                V::Tuple(xs.iter().map(|x| V::from_json(x, &Ty::Dynamic)).collect())
            }
            (Json::Object(m), Ty::Map(e)) => V::Map(
                (**e).clone(),
                m.iter()
                    .map(|(k, x)| (k.clone(), V::from_json(x, e)))
                    .collect(),
            ),
            (Json::Object(m), Ty::Object(o)) => V::Object(
                m.iter()
                    .map(|(k, x)| {
                        (
                            k.clone(),
                            V::from_json(x, o.attrs.get(k).unwrap_or(&Ty::Dynamic)),
                        )
                    })
                    .collect(),
            ),
            (Json::Object(m), _) => V::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), V::from_json(x, &Ty::Dynamic)))
                    .collect(),
            ),
        }
    }

    /// The string form used by templates, or None when the value is not a primitive.
    pub fn as_template_str(&self) -> Option<String> {
        match self.unmark().0 {
            V::Str(s) => Some(s.clone()),
            V::Num(n) => Some(num_string(*n)),
            V::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
}

fn unmark_map(m: &BTreeMap<String, V>) -> BTreeMap<String, V> {
    m.iter()
        .map(|(k, v)| (k.clone(), v.deep_unmark()))
        .collect()
}

pub fn num_json(n: f64) -> Json {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        json!(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Json::Null, Json::Number)
    }
}

pub fn num_string(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

impl Ty {
    /// The JSON type form; `with_optional` adds the optional attribute list of constraints.
    pub fn to_json(&self, with_optional: bool) -> Json {
        match self {
            Ty::String => json!("string"),
            Ty::Number => json!("number"),
            Ty::Bool => json!("bool"),
            Ty::Dynamic => json!("dynamic"),
            Ty::List(e) => json!(["list", e.to_json(with_optional)]),
            Ty::Set(e) => json!(["set", e.to_json(with_optional)]),
            Ty::Map(e) => json!(["map", e.to_json(with_optional)]),
            Ty::Tuple(ts) => json!([
                "tuple",
                ts.iter()
                    .map(|t| t.to_json(with_optional))
                    .collect::<Vec<_>>()
            ]),
            Ty::Object(o) => {
                let attrs: Map<String, Json> = o
                    .attrs
                    .iter()
                    .map(|(k, t)| (k.clone(), t.to_json(with_optional)))
                    .collect();
                if with_optional && !o.optional.is_empty() {
                    json!(["object", attrs, o.optional.iter().collect::<Vec<_>>()])
                } else {
                    json!(["object", attrs])
                }
            }
        }
    }

    /// Parses the state's JSON type form.
    pub fn from_json(j: &Json) -> Ty {
        match j {
            Json::String(s) => match s.as_str() {
                "string" => Ty::String,
                "number" => Ty::Number,
                "bool" => Ty::Bool,
                _ => Ty::Dynamic,
            },
            Json::Array(parts) if parts.len() >= 2 => {
                let kind = parts[0].as_str().unwrap_or("");
                match kind {
                    "list" => Ty::List(Box::new(Ty::from_json(&parts[1]))),
                    "set" => Ty::Set(Box::new(Ty::from_json(&parts[1]))),
                    "map" => Ty::Map(Box::new(Ty::from_json(&parts[1]))),
                    "tuple" => Ty::Tuple(
                        parts[1]
                            .as_array()
                            .map(|xs| xs.iter().map(Ty::from_json).collect())
                            .unwrap_or_default(),
                    ),
                    "object" => Ty::Object(ObjTy {
                        attrs: parts[1]
                            .as_object()
                            .map(|m| {
                                m.iter()
                                    .map(|(k, t)| (k.clone(), Ty::from_json(t)))
                                    .collect()
                            })
                            .unwrap_or_default(),
                        ..ObjTy::default()
                    }),
                    _ => Ty::Dynamic,
                }
            }
            _ => Ty::Dynamic,
        }
    }

    /// The type without optional markers and defaults (the type of a converted value).
    pub fn concrete(&self) -> Ty {
        match self {
            Ty::List(e) => Ty::List(Box::new(e.concrete())),
            Ty::Set(e) => Ty::Set(Box::new(e.concrete())),
            Ty::Map(e) => Ty::Map(Box::new(e.concrete())),
            Ty::Tuple(ts) => Ty::Tuple(ts.iter().map(Ty::concrete).collect()),
            Ty::Object(o) => Ty::Object(ObjTy {
                attrs: o
                    .attrs
                    .iter()
                    .map(|(k, t)| (k.clone(), t.concrete()))
                    .collect(),
                ..ObjTy::default()
            }),
            other => other.clone(),
        }
    }

    pub fn friendly(&self) -> String {
        match self {
            Ty::String => "string".into(),
            Ty::Number => "number".into(),
            Ty::Bool => "bool".into(),
            Ty::Dynamic => "any".into(),
            Ty::List(e) => format!("list of {}", e.friendly()),
            Ty::Set(e) => format!("set of {}", e.friendly()),
            Ty::Map(e) => format!("map of {}", e.friendly()),
            Ty::Tuple(_) => "tuple".into(),
            Ty::Object(_) => "object".into(),
        }
    }
}

/// Converts a value to a type constraint, applying optional attribute defaults.
pub fn convert(v: &V, ty: &Ty) -> Result<V, String> {
    if let V::Sensitive(inner) = v {
        return Ok(convert(inner, ty)?.mark(true));
    }
    if let V::Unknown(_) = v {
        return Ok(V::Unknown(ty.concrete()));
    }
    if let V::Null(_) = v {
        return Ok(V::Null(ty.concrete()));
    }
    match ty {
        Ty::Dynamic => Ok(v.clone()),
        Ty::String => match v {
            V::Str(_) => Ok(v.clone()),
            V::Num(n) => Ok(V::Str(num_string(*n))),
            V::Bool(b) => Ok(V::Str(b.to_string())),
            _ => Err("string required".into()),
        },
        Ty::Number => match v {
            V::Num(_) => Ok(v.clone()),
            V::Str(s) => s
                .trim()
                .parse::<f64>()
                .map(V::Num)
                .map_err(|_| format!("a number is required, got {s:?}")),
            _ => Err("number required".into()),
        },
        Ty::Bool => match v {
            V::Bool(_) => Ok(v.clone()),
            V::Str(s) if s == "true" => Ok(V::Bool(true)),
            V::Str(s) if s == "false" => Ok(V::Bool(false)),
            _ => Err("bool required".into()),
        },
        Ty::List(e) | Ty::Set(e) => {
            let items = match v {
                V::List(_, xs) | V::Set(_, xs) | V::Tuple(xs) => xs,
                _ => return Err(format!("{} required", ty.friendly())),
            };
            let mut out = Vec::with_capacity(items.len());
            for (i, x) in items.iter().enumerate() {
                out.push(convert(x, e).map_err(|m| format!("element {i}: {m}"))?);
            }
            let ety = if matches!(**e, Ty::Dynamic) {
                out.first().map(V::ty).unwrap_or(Ty::Dynamic)
            } else {
                e.concrete()
            };
            if matches!(ty, Ty::Set(_)) {
                let mut dedup: Vec<V> = Vec::new();
                for x in out {
                    if !dedup.contains(&x) {
                        dedup.push(x);
                    }
                }
                Ok(V::Set(ety, dedup))
            } else {
                Ok(V::List(ety, out))
            }
        }
        Ty::Map(e) => {
            let items = match v {
                V::Map(_, m) | V::Object(m) => m,
                _ => return Err(format!("{} required", ty.friendly())),
            };
            let mut out = BTreeMap::new();
            for (k, x) in items {
                out.insert(
                    k.clone(),
                    convert(x, e).map_err(|m| format!("element {k:?}: {m}"))?,
                );
            }
            let ety = if matches!(**e, Ty::Dynamic) {
                out.values().next().map(V::ty).unwrap_or(Ty::Dynamic)
            } else {
                e.concrete()
            };
            Ok(V::Map(ety, out))
        }
        Ty::Tuple(ts) => {
            let items = match v {
                V::List(_, xs) | V::Set(_, xs) | V::Tuple(xs) => xs,
                _ => return Err("tuple required".into()),
            };
            if items.len() != ts.len() {
                return Err(format!("tuple required with {} elements", ts.len()));
            }
            let mut out = Vec::new();
            for (x, t) in items.iter().zip(ts) {
                out.push(convert(x, t)?);
            }
            Ok(V::Tuple(out))
        }
        Ty::Object(o) => {
            let items = match v {
                V::Map(_, m) | V::Object(m) => m,
                _ => return Err("object required".into()),
            };
            let mut out = BTreeMap::new();
            for (k, t) in &o.attrs {
                let given = items.get(k).filter(|x| !x.is_null());
                let val = match given {
                    Some(x) => convert(x, t).map_err(|m| format!("attribute {k:?}: {m}"))?,
                    None if o.optional.contains(k) => match o.defaults.get(k) {
                        Some(d) => convert(d, t)?,
                        None => V::Null(t.concrete()),
                    },
                    None if items.contains_key(k) => V::Null(t.concrete()),
                    None => return Err(format!("attribute {k:?} is required")),
                };
                out.insert(k.clone(), val);
            }
            Ok(V::Object(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(pairs: &[(&str, V)]) -> V {
        V::Object(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn optional_attributes_take_their_defaults_at_every_depth() {
        let inner = Ty::Object(ObjTy {
            attrs: [("flag".to_owned(), Ty::Bool)].into(),
            optional: ["flag".to_owned()].into(),
            defaults: [("flag".to_owned(), V::Bool(false))].into(),
        });
        let outer = Ty::Object(ObjTy {
            attrs: [("nested".to_owned(), inner.clone())].into(),
            optional: ["nested".to_owned()].into(),
            defaults: [("nested".to_owned(), obj(&[]))].into(),
        });
        let v = convert(&obj(&[]), &outer).unwrap();
        assert_eq!(v.to_json(), serde_json::json!({"nested": {"flag": false}}));
        assert_eq!(
            v.ty().to_json(false),
            serde_json::json!(["object", {"nested": ["object", {"flag": "bool"}]}])
        );
        let err = convert(
            &obj(&[]),
            &Ty::Object(ObjTy {
                attrs: [("x".to_owned(), Ty::String)].into(),
                ..ObjTy::default()
            }),
        );
        assert!(err.unwrap_err().contains("\"x\" is required"));
    }

    #[test]
    fn unknown_and_sensitive_shapes() {
        let v = V::Tuple(vec![V::str("a"), V::Unknown(Ty::String)]);
        assert_eq!(v.unknown_json(), serde_json::json!([false, true]));
        assert_eq!(v.to_known_json(), serde_json::json!(["a", null]));
        let o = obj(&[("a", V::Unknown(Ty::String)), ("b", V::str("x").mark(true))]);
        assert_eq!(o.unknown_json(), serde_json::json!({"a": true}));
        assert_eq!(o.sensitive_json(), serde_json::json!({"b": true}));
        assert_eq!(o.to_known_json(), serde_json::json!({"b": "x"}));
        assert!(o.has_sensitive() && !o.deep_unmark().has_sensitive());
    }

    #[test]
    fn numbers_and_strings_convert_like_cty() {
        assert_eq!(convert(&V::Num(3.0), &Ty::String).unwrap(), V::str("3"));
        assert_eq!(convert(&V::str("1.5"), &Ty::Number).unwrap(), V::Num(1.5));
        assert!(convert(&V::str("x"), &Ty::Number).is_err());
        let l = convert(
            &V::Tuple(vec![V::str("a"), V::str("a")]),
            &Ty::Set(Box::new(Ty::String)),
        )
        .unwrap();
        assert_eq!(l, V::Set(Ty::String, vec![V::str("a")]));
    }
}
