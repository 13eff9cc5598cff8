//! Runs OpenTofu's equivalence cases with the emulator (the default command sequence of
//! SOURCES.md) and compares plan.json, state.json and the apply stream with real OpenTofu's
//! golden outputs, ignoring only terraform_version, timestamps and generated ids.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::*;
use serde_json::Value;

fn golden(case: &str, file: &str) -> Value {
    let p = fixtures().join("equivalence/outputs").join(case).join(file);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

/// Replaces terraform_data ids (random uuids) so two runs compare equal.
fn mask_ids(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let is_data = m.get("type").and_then(Value::as_str) == Some("terraform_data")
                || m.get("resource_type").and_then(Value::as_str) == Some("terraform_data");
            for (k, x) in m.iter_mut() {
                if is_data && (k == "id" || k == "id_value") && x.is_string() {
                    *x = Value::String("<id>".into());
                } else {
                    mask_ids(x);
                }
            }
        }
        Value::Array(xs) => xs.iter_mut().for_each(mask_ids),
        _ => {}
    }
}

fn run_case(case: &str) -> Work {
    let w = Work::from(&fixtures().join("equivalence/tests").join(case));
    w.ok(&["init"], 0);
    w.ok(&["plan", "-out=equivalence_test_plan"], 0);
    let apply = w.ok(&["apply", "-json", "equivalence_test_plan"], 0);
    let mut state = w.ok(&["show", "-json"], 0).json();
    let mut plan = w.ok(&["show", "-json", "equivalence_test_plan"], 0).json();

    strip_volatile(&mut plan);
    mask_ids(&mut plan);
    assert_eq!(plan, golden(case, "plan.json"), "{case}: plan.json differs");

    strip_volatile(&mut state);
    mask_ids(&mut state);
    assert_eq!(
        state,
        golden(case, "state.json"),
        "{case}: state.json differs"
    );

    let mut lines = apply.json_lines();
    let version = lines.remove(0);
    assert_eq!(
        version["type"], "version",
        "{case}: first line is the version message"
    );
    assert_eq!(version["ui"], "1.2");
    assert_eq!(
        version["@message"],
        format!("OpenTofu {}", version["tofu"].as_str().unwrap())
    );
    for l in &mut lines {
        let o = l.as_object_mut().unwrap();
        assert!(
            o.remove("@timestamp").is_some(),
            "{case}: every line has @timestamp"
        );
        assert_eq!(o.remove("@module"), Some(Value::String("tofu.ui".into())));
        if let Some(h) = o.get_mut("hook").and_then(Value::as_object_mut)
            && h.contains_key("elapsed_seconds")
        {
            h.insert("elapsed_seconds".into(), 0.into());
        }
        if let Some(m) = o.get_mut("@message")
            && let Some(s) = m.as_str()
            && let Some((head, tail)) = s.split_once(" after ")
            && let Some((_, rest)) = tail.split_once('s')
        {
            *m = Value::String(format!("{head} after 0s{rest}"));
        }
    }
    let mut lines = Value::Array(lines);
    mask_ids(&mut lines);
    assert_eq!(
        lines,
        golden(case, "apply.json"),
        "{case}: apply stream differs"
    );

    // include_files: the files the case asks for have the golden content.
    let spec: Value = serde_json::from_str(
        &std::fs::read_to_string(
            fixtures()
                .join("equivalence/tests")
                .join(case)
                .join("spec.json"),
        )
        .unwrap(),
    )
    .unwrap();
    for f in spec["include_files"].as_array().unwrap() {
        let f = f.as_str().unwrap();
        let ours: Value = serde_json::from_str(&w.read(f)).unwrap();
        assert_eq!(ours, golden(case, f), "{case}: {f} differs");
    }
    w
}

#[test]
fn local_provider_basic() {
    run_case("local_provider_basic");
}

#[test]
fn local_provider_update() {
    run_case("local_provider_update");
}

#[test]
fn local_provider_delete() {
    let w = run_case("local_provider_delete");
    assert!(
        !w.path().join("output.json").exists(),
        "the deleted file is gone"
    );
}

#[test]
fn variables_and_outputs() {
    let w = run_case("variables_and_outputs");
    let outs = w.ok(&["output", "-json"], 0).json();
    assert_eq!(
        outs["list_no_default"]["value"][0]["optional_attribute_with_default"],
        "Hello, world!"
    );
}
