//! A YAML node tree where every node and key knows its line and column, parsed with
//! serde-saphyr; the template parser walks it and reports every problem at once.
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// 1-based line and column in the template document (0:0 when unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub struct Loc {
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

impl Loc {
    fn of<T>(s: &Spanned<T>) -> Loc {
        Loc {
            line: u32::try_from(s.referenced.line()).unwrap_or(u32::MAX),
            column: u32::try_from(s.referenced.column()).unwrap_or(u32::MAX),
        }
    }
}

/// A YAML value with its location.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    pub loc: Loc,
}

/// A YAML value; mappings keep document order and their keys' locations.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

/// A mapping key (scalars only; other keys are rejected while parsing).
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: String,
    pub loc: Loc,
}

impl Value {
    /// A short name of the value's type for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::Float(_) => "number",
            Value::Str(_) => "string",
            Value::Seq(_) => "list",
            Value::Map(_) => "map",
        }
    }
}

impl Node {
    /// Converts to JSON (non-finite floats become null).
    pub fn to_json(&self) -> serde_json::Value {
        match &self.value {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::Str(s) => serde_json::Value::String(s.clone()),
            Value::Seq(items) => {
                serde_json::Value::Array(items.iter().map(Node::to_json).collect())
            }
            Value::Map(entries) => serde_json::Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.name.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

/// Deepest nesting of collections a document may have.
pub const MAX_DEPTH: usize = 20;

/// Why a document is not YAML at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub message: String,
    pub loc: Loc,
}

/// Parses one YAML document into a located node tree. serde-saphyr's default budget
/// bounds nesting, aliases and node counts, so hostile input fails instead of exhausting
/// memory.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    // YAML 1.2 core booleans only: `no`, `n`, `on` stay strings (the "Norway problem").
    // Nesting is bounded well below what overflows a 2 MiB thread stack in a debug build.
    let options = serde_saphyr::options! {
        strict_booleans: true,
        budget: serde_saphyr::budget! {
            max_depth: MAX_DEPTH,
            flow_nesting_limit: MAX_DEPTH,
        },
    };
    match serde_saphyr::from_str_with_options::<Spanned<Value>>(text, options) {
        Ok(s) => Ok(Node {
            loc: Loc::of(&s),
            value: s.value,
        }),
        Err(e) => {
            let loc = e
                .location()
                .map(|l| Loc {
                    line: u32::try_from(l.line()).unwrap_or(u32::MAX),
                    column: u32::try_from(l.column()).unwrap_or(u32::MAX),
                })
                .unwrap_or_default();
            let message = first_line(&e.to_string());
            Err(SyntaxError { message, loc })
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("invalid YAML").trim().to_owned()
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(s) = seq.next_element::<Spanned<Value>>()? {
            items.push(Node {
                loc: Loc::of(&s),
                value: s.value,
            });
        }
        Ok(Value::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries: Vec<(Key, Node)> = Vec::new();
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
        while let Some(k) = map.next_key::<Spanned<Value>>()? {
            let name = match &k.value {
                Value::Str(s) => s.clone(),
                Value::Int(i) => i.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Float(f) => f.to_string(),
                Value::Null => "null".to_owned(),
                Value::Seq(_) | Value::Map(_) => {
                    return Err(de::Error::custom(format!(
                        "mapping keys must be scalars (line {})",
                        k.referenced.line()
                    )));
                }
            };
            let key = Key {
                name,
                loc: Loc::of(&k),
            };
            let v = map.next_value::<Spanned<Value>>()?;
            if !seen.insert(key.name.clone()) {
                return Err(de::Error::custom(format!(
                    "duplicate key {:?} at {}",
                    key.name, key.loc
                )));
            }
            entries.push((
                key,
                Node {
                    loc: Loc::of(&v),
                    value: v.value,
                },
            ));
        }
        Ok(Value::Map(entries))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn locations_of_nested_nodes() {
        let n = parse("a: 1\nb:\n  - x\n  - {c: true}\n").unwrap();
        let Value::Map(entries) = &n.value else {
            panic!("map")
        };
        assert_eq!(entries[0].0.name, "a");
        assert_eq!(entries[0].0.loc, Loc { line: 1, column: 1 });
        assert_eq!(entries[0].1.value, Value::Int(1));
        let Value::Seq(items) = &entries[1].1.value else {
            panic!("seq")
        };
        assert_eq!(items[0].loc.line, 3);
        assert_eq!(items[1].loc.line, 4);
    }

    #[test]
    fn syntax_error_has_a_location() {
        let e = parse("a: [1, 2\nb: c\n").unwrap_err();
        assert!(e.loc.line >= 1, "{e:?}");
    }

    #[test]
    fn duplicate_keys_are_rejected() {
        let e = parse("a: 1\na: 2\n").unwrap_err();
        assert!(e.message.contains("duplicate"), "{e:?}");
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        let nested = |depth: usize| format!("a: {}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(parse(&nested(MAX_DEPTH - 2)).is_ok());
        for depth in [MAX_DEPTH + 1, 60, 5000] {
            let e = parse(&nested(depth)).unwrap_err();
            assert!(e.message.contains("recursion limit"), "{e:?}");
        }
        let block: String = (0..100)
            .map(|i| format!("{}k:\n", " ".repeat(i * 2)))
            .collect();
        assert!(parse(&block).is_err());
    }

    #[test]
    fn yaml_11_booleans_stay_strings() {
        let n = parse("n: no\ny: on\nt: true\n").unwrap();
        let Value::Map(e) = n.value else { panic!() };
        assert_eq!(e[0].0.name, "n");
        assert_eq!(e[0].1.value, Value::Str("no".into()));
        assert_eq!(e[1].1.value, Value::Str("on".into()));
        assert_eq!(e[2].1.value, Value::Bool(true));
    }

    #[test]
    fn quoted_numbers_stay_strings() {
        let n = parse("a: \"1\"\nb: 1.5\nc: ~\n").unwrap();
        let Value::Map(e) = n.value else { panic!() };
        assert_eq!(e[0].1.value, Value::Str("1".into()));
        assert_eq!(e[1].1.value, Value::Float(1.5));
        assert_eq!(e[2].1.value, Value::Null);
    }
}
