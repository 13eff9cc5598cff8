//! Printing results: `--output json` writes one JSON object or array with the stable field
//! names of [`crate::views`]; `--output table` writes aligned columns for lists and
//! `key: value` lines (with sub-tables for nested lists) for one object.
use serde::Serialize;
use serde_json::Value;

use crate::cli::OutputFormat;
use crate::error::{CliError, Result};

/// The columns a list of this view shows in a table (keys of its JSON form). A column may
/// name a nested value as `header=key.key` (e.g. `validation=last_validation.status`).
pub trait Columns {
    const COLUMNS: &'static [&'static str];
}

/// A column's header and the value it shows of `item` (null when absent).
pub fn column<'a>(spec: &'a str, item: &'a Value) -> (&'a str, &'a Value) {
    let (header, path) = spec.split_once('=').unwrap_or((spec, spec));
    let value = path
        .split('.')
        .try_fold(item, |v, key| v.get(key))
        .unwrap_or(&Value::Null);
    (header, value)
}

fn to_value<T: Serialize>(item: &T) -> Result<Value> {
    serde_json::to_value(item).map_err(|e| CliError::Other(format!("encode output: {e}")))
}

/// A JSON value as a table cell.
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) if s.is_empty() => "-".to_owned(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            if items.is_empty() {
                "-".to_owned()
            } else {
                items.iter().map(cell).collect::<Vec<_>>().join(",")
            }
        }
        other => other.to_string(),
    }
}

fn print_table(headers: &[String], rows: &[Vec<String>], indent: &str) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::from(indent);
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}  "));
            }
        }
        println!("{}", out.trim_end());
    };
    line(&headers.iter().map(|h| h.to_uppercase()).collect::<Vec<_>>());
    for row in rows {
        line(row);
    }
}

/// Prints a list.
pub fn list<T: Serialize + Columns>(format: OutputFormat, items: &[T]) -> Result {
    match format {
        OutputFormat::Json => json(&items),
        OutputFormat::Table => {
            let headers: Vec<String> = T::COLUMNS
                .iter()
                .map(|c| column(c, &Value::Null).0.to_owned())
                .collect();
            let mut rows = Vec::new();
            for item in items {
                let v = to_value(item)?;
                rows.push(T::COLUMNS.iter().map(|c| cell(column(c, &v).1)).collect());
            }
            if rows.is_empty() {
                println!("(none)");
            } else {
                print_table(&headers, &rows, "");
            }
            Ok(())
        }
    }
}

/// Prints one object.
pub fn one<T: Serialize>(format: OutputFormat, item: &T) -> Result {
    match format {
        OutputFormat::Json => json(item),
        OutputFormat::Table => {
            detail(&to_value(item)?, "");
            Ok(())
        }
    }
}

/// Pretty JSON on stdout.
pub fn json<T: Serialize + ?Sized>(item: &T) -> Result {
    let text = serde_json::to_string_pretty(item)
        .map_err(|e| CliError::Other(format!("encode output: {e}")))?;
    println!("{text}");
    Ok(())
}

fn detail(v: &Value, indent: &str) {
    let Value::Object(map) = v else {
        println!("{indent}{}", cell(v));
        return;
    };
    let width = map.keys().map(String::len).max().unwrap_or(0) + 1;
    let mut sections = Vec::new();
    for (k, val) in map {
        match val {
            Value::Array(items) if items.iter().any(Value::is_object) => {
                sections.push((k, items.clone()));
            }
            Value::Object(_) => sections.push((k, vec![val.clone()])),
            _ => println!("{indent}{:<width$} {}", format!("{k}:"), cell(val)),
        }
    }
    for (k, items) in sections {
        println!("{indent}{k}:");
        let mut headers: Vec<String> = Vec::new();
        for item in items.iter() {
            if let Value::Object(m) = item {
                for (key, value) in m {
                    if !value.is_object() && !headers.contains(key) {
                        headers.push(key.clone());
                    }
                }
            }
        }
        let rows: Vec<Vec<String>> = items
            .iter()
            .map(|item| headers.iter().map(|h| cell(&item[h.as_str()])).collect())
            .collect();
        print_table(&headers, &rows, &format!("{indent}  "));
    }
}
