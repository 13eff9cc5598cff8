//! Schema-level comparison with OpenTofu's `show -json` golden plans
//! (plan-json/show-json/<case>/output.json): the emulator's plan for an equivalent
//! terraform_data configuration (tests/show_json/<case>) has the same keys and value shapes.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::path::PathBuf;

use common::*;
use serde_json::Value;

/// Keys whose content depends on the resource type's schema: only the JSON kind is compared.
const OPAQUE: &[&str] = &[
    "values",
    "before",
    "after",
    "after_unknown",
    "after_sensitive",
    "before_sensitive",
    "sensitive_values",
    "expressions",
    "provider_config",
    "replace_paths",
];
/// Keys only count/for_each or the golden test harness produce.
const IGNORED: &[&str] = &[
    "terraform_version",
    "timestamp",
    "checks",
    "index",
    "previous_address",
    "count_expression",
    "relevant_attributes",
    // The golden files predate `errored` (OpenTofu's test compares a subset of fields).
    "errored",
];

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn compare(path: &str, want: &Value, got: &Value, errs: &mut Vec<String>) {
    if kind(want) != kind(got) {
        errs.push(format!(
            "{path}: want {}, got {} ({got})",
            kind(want),
            kind(got)
        ));
        return;
    }
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                if IGNORED.contains(&k.as_str()) {
                    continue;
                }
                match g.get(k) {
                    None => errs.push(format!("{path}/{k}: missing")),
                    Some(gv) if OPAQUE.contains(&k.as_str()) => {
                        // after_unknown/after_sensitive: {} and true/false shapes are both legal
                        // for an object; compare only "present and not a different container".
                        let scalar_ok = matches!(
                            (wv, gv),
                            (Value::Bool(_), Value::Object(_)) | (Value::Object(_), Value::Bool(_))
                        );
                        if kind(wv) != kind(gv) && !scalar_ok {
                            errs.push(format!("{path}/{k}: want {}, got {}", kind(wv), kind(gv)));
                        }
                    }
                    Some(gv) => compare(&format!("{path}/{k}"), wv, gv, errs),
                }
            }
            for k in g.keys() {
                if !w.contains_key(k) && !IGNORED.contains(&k.as_str()) {
                    errs.push(format!("{path}/{k}: not in OpenTofu's output"));
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.is_empty() != g.is_empty() {
                errs.push(format!(
                    "{path}: want {} elements, got {}",
                    w.len(),
                    g.len()
                ));
            } else if let (Some(w0), Some(g0)) = (w.first(), g.first()) {
                compare(&format!("{path}[0]"), w0, g0, errs);
            }
        }
        _ => {}
    }
}

fn case(name: &str) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/show_json")
        .join(name);
    let w = Work::from(&src);
    w.ok(&["init"], 0);
    let plan = w.run(&["plan", "-out=tfplan"]);
    let errored = name == "plan-error";
    assert_eq!(
        plan.code,
        if errored { 1 } else { 0 },
        "{name}: plan\n{}",
        plan.all()
    );
    let got = w.ok(&["show", "-json", "tfplan"], 0).json();
    assert_eq!(
        got["format_version"], "1.2",
        "{name}: real OpenTofu writes format 1.2"
    );
    assert!(got["timestamp"].is_string() && got["terraform_version"].is_string());
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(
            fixtures()
                .join("plan-json/show-json")
                .join(name)
                .join("output.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut errs = Vec::new();
    compare("", &want, &got, &mut errs);
    assert!(
        errs.is_empty(),
        "{name}: shape differs from OpenTofu's:\n{}\nours: {got:#}",
        errs.join("\n")
    );
}

#[test]
fn basic_create() {
    case("basic-create");
}

#[test]
fn basic_update() {
    case("basic-update");
}

#[test]
fn basic_delete() {
    case("basic-delete");
}

#[test]
fn requires_replace() {
    case("requires-replace");
}

#[test]
fn multi_resource_update() {
    case("multi-resource-update");
}

#[test]
fn modules() {
    case("modules");
}

#[test]
fn nested_modules() {
    case("nested-modules");
}

#[test]
fn sensitive_values() {
    case("sensitive-values");
}

#[test]
fn unknown_output() {
    case("unknown-output");
}

#[test]
fn plan_error() {
    case("plan-error");
}
