//! Outputs from v4 and legacy v3 states, and their redaction for GetOutputs; the v4 model
//! keeps fields it does not know.
#![allow(clippy::unwrap_used)]

use cairn_tofu::{OutputValue, PublicOutput, StateHeader, StateV4, inspect_state, public_outputs};
use serde_json::{Value, json};

fn v4_with_sensitive_outputs() -> Value {
    json!({
        "version": 4,
        "terraform_version": "1.12.6",
        "serial": 12,
        "lineage": "9d0a4f5e-6a0b-4bde-8f62-1c3c2b7f0a11",
        "outputs": {
            "password": {"value": "hunter2", "type": "string", "sensitive": true},
            "endpoint": {"value": "db.internal:5432", "type": "string"},
            "nothing": {"value": null, "type": "dynamic", "sensitive": false},
            "creds": {"value": {"user": "app", "key": "k"}, "type": ["object", {"key": "string", "user": "string"}], "sensitive": true}
        },
        "resources": [],
        "check_results": null
    })
}

#[test]
fn sensitive_values_never_reach_public_outputs() {
    let bytes = serde_json::to_vec(&v4_with_sensitive_outputs()).unwrap();
    let document = inspect_state(&bytes).unwrap();
    let names: Vec<&str> = document.outputs().iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        ["creds", "endpoint", "nothing", "password"],
        "ordered by name"
    );
    assert_eq!(
        document.outputs()[3],
        OutputValue {
            name: "password".into(),
            value: json!("hunter2"),
            type_json: Some(json!("string")),
            sensitive: true
        }
    );

    let public = document.public_outputs();
    assert_eq!(
        public,
        vec![
            PublicOutput {
                name: "creds".into(),
                value: None,
                type_json: Some(json!(["object", {"key": "string", "user": "string"}])),
                sensitive: true,
            },
            PublicOutput {
                name: "endpoint".into(),
                value: Some(json!("db.internal:5432")),
                type_json: Some(json!("string")),
                sensitive: false
            },
            PublicOutput {
                name: "nothing".into(),
                value: Some(Value::Null),
                type_json: Some(json!("dynamic")),
                sensitive: false
            },
            PublicOutput {
                name: "password".into(),
                value: None,
                type_json: Some(json!("string")),
                sensitive: true
            },
        ]
    );
    assert_eq!(public_outputs(document.outputs()), public);
    let rendered = format!("{public:?}");
    assert!(
        !rendered.contains("hunter2") && !rendered.contains("\"app\""),
        "{rendered}"
    );

    // The full model reads the same outputs.
    let full = StateV4::from_slice(&bytes).unwrap();
    assert_eq!(full.output_values(), document.outputs());
}

#[test]
fn version_3_outputs_come_from_the_root_module() {
    let v3 = json!({
        "version": 3,
        "terraform_version": "0.11.14",
        "serial": 5,
        "lineage": "0b3c8f0e-61a2-4f55-9a3d-2e6f1c9d7b44",
        "backend": {"type": "http", "config": {}, "hash": 1},
        "modules": [
            {"path": ["root", "child"], "outputs": {"inner": {"sensitive": false, "type": "string", "value": "no"}}, "resources": {}, "depends_on": []},
            {"path": ["root"], "outputs": {
                "url": {"sensitive": false, "type": "string", "value": "https://x"},
                "ids": {"sensitive": false, "type": "list", "value": ["a", "b"]},
                "secret": {"sensitive": true, "type": "string", "value": "s3cr3t"}
            }, "resources": {}, "depends_on": []}
        ]
    });
    let document = inspect_state(&serde_json::to_vec(&v3).unwrap()).unwrap();
    assert_eq!(
        document.header(),
        &StateHeader {
            serial: 5,
            lineage: "0b3c8f0e-61a2-4f55-9a3d-2e6f1c9d7b44".into(),
            version: Some(3)
        }
    );
    assert_eq!(
        document.outputs(),
        [
            OutputValue {
                name: "ids".into(),
                value: json!(["a", "b"]),
                type_json: None,
                sensitive: false
            },
            OutputValue {
                name: "secret".into(),
                value: json!("s3cr3t"),
                type_json: None,
                sensitive: true
            },
            OutputValue {
                name: "url".into(),
                value: json!("https://x"),
                type_json: None,
                sensitive: false
            },
        ]
    );
    assert_eq!(document.public_outputs()[1].value, None);

    let no_modules = json!({"version": 3, "serial": 1, "lineage": "l"});
    assert!(
        inspect_state(&serde_json::to_vec(&no_modules).unwrap())
            .unwrap()
            .outputs()
            .is_empty()
    );
}

#[test]
fn unknown_fields_survive_a_round_trip_at_every_level() {
    let state = json!({
        "version": 4,
        "terraform_version": "1.12.6",
        "serial": 3,
        "lineage": "l",
        "future_top": {"nested": [1, 2]},
        "outputs": {"o": {"value": 1, "type": "number", "future_output": true}},
        "resources": [{
            "mode": "managed", "type": "t", "name": "n", "provider": "p",
            "future_resource": "r",
            "instances": [{
                "schema_version": 1,
                "status": "tainted",
                "deposed": "00000001",
                "attributes": {"id": "x"},
                "identity_schema_version": 0,
                "identity": {"id": "x"},
                "skip_destroy": true
            }]
        }],
        "check_results": [{
            "object_kind": "resource",
            "config_addr": "t.n",
            "status": "fail",
            "objects": [{"object_addr": "t.n", "status": "fail", "failure_messages": ["bad"], "future_object": 1}],
            "future_check": "c"
        }]
    });
    let parsed = StateV4::from_slice(&serde_json::to_vec(&state).unwrap()).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), state);

    assert_eq!(parsed.extra["future_top"], json!({"nested": [1, 2]}));
    let instance = &parsed.resources[0].instances[0];
    assert_eq!(instance.status.as_deref(), Some("tainted"));
    assert_eq!(instance.deposed.as_deref(), Some("00000001"));
    assert_eq!(instance.extra["identity"], json!({"id": "x"}));
    let checks = parsed.check_results.as_ref().unwrap();
    assert_eq!(checks[0].status, "fail");
    let objects = checks[0].objects.as_ref().unwrap();
    assert_eq!(
        objects[0].failure_messages.as_deref(),
        Some(&["bad".to_owned()][..])
    );
    assert_eq!(objects[0].extra["future_object"], json!(1));
}

#[test]
fn debug_output_hides_sensitive_values() {
    let bytes = serde_json::to_vec(&v4_with_sensitive_outputs()).unwrap();
    let document = inspect_state(&bytes).unwrap();
    let rendered = format!("{document:?}");
    assert!(rendered.contains("db.internal:5432"), "{rendered}");
    assert!(rendered.contains("<sensitive>"), "{rendered}");
    assert!(
        !rendered.contains("hunter2") && !rendered.contains("\"app\""),
        "{rendered}"
    );
}
