//! Masking of plan JSON: OpenTofu's sensitive fixtures, a plan seeded with canary values in
//! every place `show -json` prints sensitive data, and every fixture plan for side effects.
#![allow(clippy::unwrap_used)]

mod common;

use cairn_tofu::{
    Plan, SENSITIVE_MARKER, UiMessage, mask_plan, mask_plan_collecting, mask_ui_message,
    summarize_plan,
};
use serde_json::{Value, json};

const CANARY: &str = "canary-5f0c9e";

fn masked_fixture(relative: &str) -> (Value, Value) {
    let original = common::read_json(&common::fixture(relative));
    let mut masked = original.clone();
    mask_plan(&mut masked);
    (original, masked)
}

#[test]
fn show_json_sensitive_loses_its_secrets() {
    let (original, masked) = masked_fixture("plan-json/show-json-sensitive/output.json");
    let before = serde_json::to_string(&original).unwrap();
    assert!(before.contains("\"secret\"") && before.contains("\"bar\""));
    let text = serde_json::to_string(&masked).unwrap();
    // "bar" is the sensitive variable's value and default, "secret" a provider-sensitive
    // attribute and a constant in the configuration.
    assert!(!text.contains("\"bar\""), "{text}");
    assert!(!text.contains("secret"), "{text}");
    let marker = json!(SENSITIVE_MARKER);
    assert_eq!(masked["variables"]["test_var"]["value"], marker);
    assert_eq!(
        masked["configuration"]["root_module"]["variables"]["test_var"]["default"],
        marker
    );
    assert_eq!(masked["output_changes"]["test"]["after"], marker);
    assert_eq!(masked["planned_values"]["outputs"]["test"]["value"], marker);
    assert_eq!(
        masked["prior_state"]["values"]["outputs"]["test"]["value"],
        marker
    );
    for i in 0..3 {
        let change = &masked["resource_changes"][i]["change"];
        assert_eq!(change["after"], json!({"ami": marker, "password": marker}));
        let planned = &masked["planned_values"]["root_module"]["resources"][i]["values"];
        assert_eq!(planned, &json!({"ami": marker, "password": marker}));
    }
    assert_eq!(
        masked["configuration"]["root_module"]["resources"][0]["expressions"]["password"],
        json!({"constant_value": SENSITIVE_MARKER})
    );
    // What is not sensitive is untouched.
    assert_eq!(
        masked["configuration"]["provider_config"],
        original["configuration"]["provider_config"]
    );
    assert_eq!(
        masked["resource_changes"][0]["change"]["after_unknown"],
        json!({"id": true})
    );
}

#[test]
fn show_json_sensitive_values_loses_its_secret() {
    let (original, masked) = masked_fixture("plan-json/show-json/sensitive-values/output.json");
    assert!(serde_json::to_string(&original).unwrap().contains("boop"));
    let text = serde_json::to_string(&masked).unwrap();
    assert!(!text.contains("boop"), "{text}");
    assert_eq!(
        masked["resource_changes"][0]["change"]["after"]["ami"],
        json!(SENSITIVE_MARKER)
    );
}

fn canary(n: u32) -> String {
    format!("{CANARY}-{n}")
}

/// A plan with a canary in every place OpenTofu prints a sensitive value in clear, and
/// ordinary values next to them.
fn canary_plan() -> Value {
    json!({
        "format_version": "1.2",
        "variables": {
            "db_password": {"value": canary(1)},
            "region": {"value": "eu-west-1"}
        },
        "resource_changes": [{
            "address": "module.db.aws_db_instance.this[\"a.b\"]",
            "module_address": "module.db",
            "mode": "managed", "type": "aws_db_instance", "name": "this", "index": "a.b",
            "provider_name": "registry.opentofu.org/hashicorp/aws",
            "change": {
                "actions": ["update"],
                "before": {"password": canary(5), "name": "db-public", "port": 5432},
                "after": {
                    "password": canary(3),
                    "name": "db-public",
                    "nested": [{"token": canary(4), "visible": "v"}, {"token": "plain"}],
                    "settings": {"a": canary(8)}
                },
                "after_unknown": {"id": true},
                "before_sensitive": {"password": true},
                "after_sensitive": {"password": true, "nested": [{"token": true}, {}], "settings": true},
                "generated_config": format!("password = \"{}\"\nname = \"db-public\"", canary(3))
            }
        }],
        "resource_drift": [{
            "address": "aws_ssm_parameter.p",
            "mode": "managed", "type": "aws_ssm_parameter", "name": "p",
            "provider_name": "registry.opentofu.org/hashicorp/aws",
            "change": {
                "actions": ["update"],
                "before": {"value": canary(9), "arn": "arn:aws:ssm:p"},
                "after": {"value": canary(10), "arn": "arn:aws:ssm:p"},
                "before_sensitive": {"value": true},
                "after_sensitive": {"value": true}
            }
        }],
        "output_changes": {
            "conn": {
                "actions": ["create"], "before": null,
                "after": format!("postgres://u:{}@h", canary(6)),
                "after_unknown": false, "before_sensitive": false, "after_sensitive": true
            },
            "declared": {
                "actions": ["create"], "before": null, "after": canary(7),
                "after_unknown": false, "before_sensitive": false, "after_sensitive": false
            },
            "plain": {
                "actions": ["create"], "before": null, "after": "ok",
                "after_unknown": false, "before_sensitive": false, "after_sensitive": false
            }
        },
        "planned_values": {
            "outputs": {
                "conn": {"sensitive": true, "value": format!("postgres://u:{}@h", canary(6))},
                "declared": {"sensitive": false, "value": canary(7)},
                "plain": {"sensitive": false, "value": "ok"}
            },
            "root_module": {
                "child_modules": [{
                    "address": "module.db",
                    "resources": [{
                        "address": "module.db.aws_db_instance.this[\"a.b\"]",
                        "mode": "managed", "type": "aws_db_instance", "name": "this",
                        "values": {"password": canary(3), "name": "db-public"},
                        "sensitive_values": {"password": true}
                    }]
                }]
            }
        },
        "prior_state": {
            "format_version": "1.0",
            "values": {
                "outputs": {"conn": {"sensitive": true, "value": canary(11), "type": "string"}},
                "root_module": {
                    "child_modules": [{
                        "address": "module.db",
                        "resources": [{
                            "address": "module.db.aws_db_instance.this[\"a.b\"]",
                            "mode": "managed", "type": "aws_db_instance", "name": "this",
                            "values": {"password": canary(5), "name": "db-public"},
                            "sensitive_values": {"password": true}
                        }]
                    }]
                }
            }
        },
        "configuration": {
            "provider_config": {
                "vault": {"name": "vault", "expressions": {"token": {"constant_value": canary(1)}}}
            },
            "root_module": {
                "variables": {
                    "db_password": {"sensitive": true, "default": canary(1)},
                    "region": {"default": "eu-west-1"}
                },
                "outputs": {
                    "declared": {"sensitive": true, "expression": {"constant_value": canary(7)}},
                    "plain": {"expression": {"constant_value": "ok"}}
                },
                "module_calls": {
                    "db": {
                        "source": "./modules/db",
                        "expressions": {
                            "master_password": {"constant_value": canary(2)},
                            "name": {"constant_value": "db-public"}
                        },
                        "module": {
                            "variables": {
                                "master_password": {"sensitive": true},
                                "name": {}
                            },
                            "resources": [{
                                "address": "aws_db_instance.this",
                                "mode": "managed", "type": "aws_db_instance", "name": "this",
                                "expressions": {
                                    "password": {"constant_value": canary(3)},
                                    "nested": [{"token": {"constant_value": canary(4)}}],
                                    "name": {"constant_value": "db-public"}
                                }
                            }]
                        }
                    }
                }
            }
        },
        "errored": false
    })
}

#[test]
fn no_canary_survives_masking() {
    let original = canary_plan();
    let mut masked = original.clone();
    mask_plan(&mut masked);
    let text = serde_json::to_string(&masked).unwrap();
    assert!(!text.contains(CANARY), "{text}");
    // Ordinary values stay.
    for plain in [
        "eu-west-1",
        "db-public",
        "\"v\"",
        "\"ok\"",
        "\"plain\"",
        "arn:aws:ssm:p",
    ] {
        assert!(text.contains(plain), "{plain} was masked: {text}");
    }
    assert_eq!(
        masked["resource_changes"][0]["change"]["before"]["port"],
        json!(5432)
    );
    let m = json!(SENSITIVE_MARKER);
    // Each place is masked by its own rule, not only by the final sweep.
    assert_eq!(masked["variables"]["db_password"]["value"], m);
    let after = &masked["resource_changes"][0]["change"]["after"];
    assert_eq!(after["password"], m);
    assert_eq!(
        after["nested"],
        json!([{"token": m, "visible": "v"}, {"token": "plain"}])
    );
    assert_eq!(after["settings"], m);
    assert_eq!(masked["resource_drift"][0]["change"]["before"]["value"], m);
    assert_eq!(masked["output_changes"]["conn"]["after"], m);
    assert_eq!(masked["output_changes"]["declared"]["after"], m);
    assert_eq!(masked["output_changes"]["plain"]["after"], json!("ok"));
    assert_eq!(masked["planned_values"]["outputs"]["declared"]["value"], m);
    let call = &masked["configuration"]["root_module"]["module_calls"]["db"];
    assert_eq!(call["expressions"]["master_password"]["constant_value"], m);
    assert_eq!(
        call["expressions"]["name"]["constant_value"],
        json!("db-public")
    );
    let expressions = &call["module"]["resources"][0]["expressions"];
    assert_eq!(expressions["password"]["constant_value"], m);
    assert_eq!(expressions["nested"][0]["token"]["constant_value"], m);
    assert_eq!(
        masked["configuration"]["root_module"]["outputs"]["declared"]["expression"]["constant_value"],
        m
    );
    // Copies outside the maps go through the sweep.
    assert_eq!(
        masked["configuration"]["provider_config"]["vault"]["expressions"]["token"]["constant_value"],
        m
    );
    assert_eq!(
        masked["resource_changes"][0]["change"]["generated_config"],
        json!(format!(
            "password = \"{SENSITIVE_MARKER}\"\nname = \"db-public\""
        ))
    );
    // The summary does not depend on the masked values, and masking twice changes nothing.
    let bytes = |v: &Value| serde_json::to_vec(v).unwrap();
    assert_eq!(
        summarize_plan(&bytes(&masked)),
        summarize_plan(&bytes(&original))
    );
    let mut twice = masked.clone();
    mask_plan(&mut twice);
    assert_eq!(twice, masked);
}

/// Whether a document marks anything sensitive at all.
fn marks_something(value: &Value) -> bool {
    match value {
        Value::Object(fields) => fields.iter().any(|(key, field)| {
            let is_map =
                key.ends_with("_sensitive") || key == "sensitive_values" || key == "sensitive";
            (is_map && field_has_true(field)) || marks_something(field)
        }),
        Value::Array(items) => items.iter().any(marks_something),
        _ => false,
    }
}

fn field_has_true(value: &Value) -> bool {
    match value {
        Value::Bool(flag) => *flag,
        Value::Object(fields) => fields.values().any(field_has_true),
        Value::Array(items) => items.iter().any(field_has_true),
        _ => false,
    }
}

/// Every part `marks` marks is null or the marker in `value`.
fn check_marked(value: &Value, marks: &Value, name: &str) {
    match (marks, value) {
        (Value::Bool(true), value) => assert!(
            value.is_null() || value == &json!(SENSITIVE_MARKER),
            "{name}: {value} left in clear"
        ),
        (Value::Object(marks), Value::Object(fields)) => {
            for (key, mark) in marks {
                check_marked(fields.get(key).unwrap_or(&Value::Null), mark, name);
            }
        }
        (Value::Array(marks), Value::Array(items)) => {
            for (item, mark) in items.iter().zip(marks) {
                check_marked(item, mark, name);
            }
        }
        _ => {}
    }
}

fn check_changes(changes: &Value, name: &str) {
    for rc in changes.as_array().into_iter().flatten() {
        let change = &rc["change"];
        check_marked(&change["before"], &change["before_sensitive"], name);
        check_marked(&change["after"], &change["after_sensitive"], name);
    }
}

fn check_module(module: &Value, name: &str) {
    for resource in module["resources"].as_array().into_iter().flatten() {
        check_marked(&resource["values"], &resource["sensitive_values"], name);
    }
    for child in module["child_modules"].as_array().into_iter().flatten() {
        check_module(child, name);
    }
}

#[test]
fn every_fixture_plan_keeps_its_summary_and_only_loses_sensitive_values() {
    let dir = common::fixtures_dir();
    let mut plans = common::files_below(&dir.join("plan-json"), ".json");
    plans.extend(common::files_below(
        &dir.join("equivalence/outputs"),
        "plan.json",
    ));
    assert_eq!(plans.len(), 54);
    let mut untouched = 0;
    let mut marked = 0;
    for path in plans {
        let original = common::read_json(&path);
        let mut masked = original.clone();
        mask_plan(&mut masked);
        let name = path.display();
        let bytes = |v: &Value| serde_json::to_vec(v).unwrap();
        assert_eq!(
            summarize_plan(&bytes(&masked)),
            summarize_plan(&bytes(&original)),
            "{name}"
        );
        if marks_something(&original) {
            let name = name.to_string();
            check_changes(&masked["resource_changes"], &name);
            check_changes(&masked["resource_drift"], &name);
            check_module(&masked["planned_values"]["root_module"], &name);
            check_module(&masked["prior_state"]["values"]["root_module"], &name);
            marked += 1;
        } else {
            assert_eq!(masked, original, "{name}: masked without a reason");
            untouched += 1;
        }
    }
    assert!(
        untouched > 20,
        "most fixtures have nothing sensitive: {untouched}"
    );
    assert!(marked >= 3, "some fixtures have sensitive values: {marked}");
}

#[test]
fn documents_that_are_not_plans_are_left_alone() {
    for mut value in [
        json!(null),
        json!([1, "x"]),
        json!({"variables": 3}),
        json!("text"),
    ] {
        let before = value.clone();
        mask_plan(&mut value);
        assert_eq!(value, before);
    }
}

#[test]
fn collected_secrets_are_exactly_what_was_masked() {
    let mut plan = common::read_json(&common::fixture(
        "plan-json/show-json-sensitive/output.json",
    ));
    let secrets = mask_plan_collecting(&mut plan);
    assert_eq!(secrets.into_iter().collect::<Vec<_>>(), ["bar", "secret"]);
    let mut plain = common::read_json(&common::fixture(
        "plan-json/show-json/basic-create/output.json",
    ));
    assert!(mask_plan_collecting(&mut plain).is_empty());
}

#[test]
fn debug_output_of_a_parsed_plan_hides_values() {
    let bytes = common::read(&common::fixture(
        "plan-json/show-json-sensitive/output.json",
    ));
    let plan = Plan::from_slice(&bytes).unwrap();
    let debug = format!("{plan:?}");
    assert!(debug.contains("test_instance.test[0]"));
    assert!(
        !debug.contains("secret") && !debug.contains("\"bar\""),
        "{debug}"
    );
}

#[test]
fn sensitive_outputs_of_an_apply_stream_are_masked() {
    let path = common::fixture("ui-stream/terraform-generated/apply-json-with-outputs/apply.log");
    let text = String::from_utf8(common::read(&path)).unwrap();
    let mut all_secrets = Vec::new();
    for line in text.lines() {
        let original: Value = serde_json::from_str(line).unwrap();
        let mut masked = original.clone();
        all_secrets.extend(mask_ui_message(&mut masked));
        if original["type"] == "outputs" {
            assert_eq!(
                masked["outputs"]["secret"]["value"],
                json!(SENSITIVE_MARKER)
            );
            assert_eq!(masked["outputs"]["simple"], original["outputs"]["simple"]);
            assert_eq!(masked["outputs"]["complex"], original["outputs"]["complex"]);
            let message = UiMessage::from_value(original).unwrap();
            assert!(!format!("{message:?}").contains("my-secret"));
        } else {
            assert_eq!(masked, original);
        }
        assert!(
            !serde_json::to_string(&masked)
                .unwrap()
                .contains("my-secret")
        );
    }
    assert_eq!(all_secrets, ["my-secret"]);
}
