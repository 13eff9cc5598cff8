//! Inputs that are not usable states get a precise error, never a panic.
#![allow(clippy::unwrap_used)]

use cairn_tofu::{DocumentKind, StateError, StateV4, inspect_state};
use serde_json::{Value, json};

const PLAIN: DocumentKind = DocumentKind::Plain;

fn state(fields: Value) -> Vec<u8> {
    serde_json::to_vec(&fields).unwrap()
}

#[test]
fn empty_input_is_reported_as_empty() {
    for input in [&b""[..], b"  \n\t "] {
        assert_eq!(inspect_state(input), Err(StateError::Empty));
        assert_eq!(StateV4::from_slice(input), Err(StateError::Empty));
    }
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let input = b"{\n  \"version\": 4,\n  \"serial\": 1 \"lineage\": \"x\"\n}";
    match inspect_state(input) {
        Err(StateError::NotJson {
            line,
            column,
            message,
        }) => {
            assert_eq!((line, column), (3, 15), "the `\"` opening \"lineage\"");
            assert!(message.contains("expected"), "{message}");
            assert!(
                !message.contains("line"),
                "position is not repeated: {message}"
            );
        }
        other => panic!("{other:?}"),
    }
    match StateV4::from_slice(input) {
        Err(StateError::NotJson {
            line: 3,
            column: 15,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn truncated_and_trailing_input_is_not_json() {
    assert!(matches!(
        inspect_state(b"{\"version\": 4, \"serial\""),
        Err(StateError::NotJson { line: 1, .. })
    ));
    assert!(matches!(
        inspect_state(b"{\"version\": 4} {}"),
        Err(StateError::NotJson {
            line: 1,
            column: 16,
            ..
        })
    ));
    // A broken array is a syntax error, not "found an array".
    assert!(matches!(
        inspect_state(b"[1,"),
        Err(StateError::NotJson { .. })
    ));
    assert!(matches!(
        inspect_state(b"\xff\xfe"),
        Err(StateError::NotJson { .. })
    ));
    let error = inspect_state(b"nope").unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("state is not valid JSON at line 1, column 2: "),
        "{error}"
    );
}

#[test]
fn json_that_is_not_an_object_is_named() {
    for (input, found) in [
        (&b"[]"[..], "an array"),
        (b"null", "null"),
        (b"\"state\"", "a string"),
        (b"4", "a number"),
        (b"true", "a boolean"),
    ] {
        assert_eq!(inspect_state(input), Err(StateError::NotAnObject { found }));
    }
}

#[test]
fn version_is_required_and_must_be_3_or_4() {
    assert_eq!(
        inspect_state(&state(json!({"serial": 1, "lineage": "l"}))),
        Err(StateError::MissingVersion)
    );
    assert_eq!(
        inspect_state(&state(
            json!({"version": null, "serial": 1, "lineage": "l"})
        )),
        Err(StateError::MissingVersion)
    );
    for version in [0, 1, 2, 5, 99] {
        let input = state(json!({"version": version, "serial": 1, "lineage": "l"}));
        assert_eq!(
            inspect_state(&input),
            Err(StateError::UnsupportedVersion { version })
        );
    }
    for version in [json!("4"), json!(4.5), json!(-4)] {
        let input = state(json!({"version": version, "serial": 1, "lineage": "l"}));
        assert!(
            matches!(
                inspect_state(&input),
                Err(StateError::InvalidField {
                    kind: PLAIN,
                    field: "version",
                    ..
                })
            ),
            "{version}"
        );
    }
    let v3 = state(
        json!({"version": 3, "terraform_version": "0.11.14", "serial": 1, "lineage": "l", "modules": []}),
    );
    assert_eq!(
        StateV4::from_slice(&v3),
        Err(StateError::UnsupportedVersion { version: 3 })
    );
}

#[test]
fn serial_is_required_and_a_non_negative_integer() {
    assert_eq!(
        inspect_state(&state(json!({"version": 4, "lineage": "l"}))),
        Err(StateError::MissingSerial { kind: PLAIN })
    );
    assert_eq!(
        inspect_state(&state(
            json!({"version": 4, "serial": null, "lineage": "l"})
        )),
        Err(StateError::MissingSerial { kind: PLAIN })
    );
    for serial in [
        json!(-1),
        json!(1.5),
        json!("1"),
        json!(18446744073709551616.0_f64),
    ] {
        let input = state(json!({"version": 4, "serial": serial, "lineage": "l"}));
        match inspect_state(&input) {
            Err(StateError::InvalidField {
                kind: PLAIN,
                field: "serial",
                message,
            }) => {
                assert!(!message.is_empty());
            }
            other => panic!("{serial}: {other:?}"),
        }
    }
    let max = state(json!({"version": 4, "serial": u64::MAX, "lineage": "l"}));
    assert_eq!(inspect_state(&max).unwrap().header().serial, u64::MAX);
}

#[test]
fn lineage_is_required_and_not_empty() {
    assert_eq!(
        inspect_state(&state(json!({"version": 4, "serial": 1}))),
        Err(StateError::MissingLineage { kind: PLAIN })
    );
    assert_eq!(
        inspect_state(&state(json!({"version": 4, "serial": 1, "lineage": ""}))),
        Err(StateError::EmptyLineage { kind: PLAIN })
    );
    assert!(matches!(
        inspect_state(&state(json!({"version": 4, "serial": 1, "lineage": 7}))),
        Err(StateError::InvalidField {
            kind: PLAIN,
            field: "lineage",
            ..
        })
    ));
    assert_eq!(
        StateError::EmptyLineage { kind: PLAIN }.to_string(),
        "state has an empty \"lineage\""
    );
}

#[test]
fn malformed_outputs_are_reported_on_the_outputs_field() {
    for outputs in [
        json!([]),
        json!({"a": {"type": "string"}}),
        json!({"a": {"value": 1, "type": "number", "sensitive": "yes"}}),
    ] {
        let input = state(json!({"version": 4, "serial": 1, "lineage": "l", "outputs": outputs}));
        assert!(
            matches!(
                inspect_state(&input),
                Err(StateError::InvalidField {
                    kind: PLAIN,
                    field: "outputs",
                    ..
                })
            ),
            "{outputs}"
        );
    }
    let v3 = state(json!({"version": 3, "serial": 1, "lineage": "l", "modules": {"root": {}}}));
    assert!(matches!(
        inspect_state(&v3),
        Err(StateError::InvalidField {
            kind: PLAIN,
            field: "modules",
            ..
        })
    ));
}

#[test]
fn schema_errors_in_the_full_model_say_where() {
    let base = json!({
        "version": 4, "terraform_version": "1.12.6", "serial": 2, "lineage": "l",
        "outputs": {"ok": {"value": 1, "type": "number"}},
        "resources": [
            {"mode": "managed", "type": "a", "name": "one", "provider": "p", "instances": [{"schema_version": 0}]},
            {"mode": "managed", "type": "a", "name": "two", "provider": "p",
             "instances": [{"schema_version": 0}, {"schema_version": "zero"}]}
        ]
    });
    match StateV4::from_slice(&state(base.clone())) {
        Err(StateError::Schema { path, message }) => {
            assert_eq!(path, "resources[1].instances[1]");
            assert!(message.contains("zero"), "{message}");
        }
        other => panic!("{other:?}"),
    }

    let mut no_name = base.clone();
    no_name["resources"][1]["instances"][1]["schema_version"] = json!(0);
    no_name["resources"][0]
        .as_object_mut()
        .unwrap()
        .remove("name");
    assert!(
        matches!(StateV4::from_slice(&state(no_name)), Err(StateError::Schema { path, .. }) if path == "resources[0]")
    );

    let mut bad_output = base.clone();
    bad_output["resources"] = json!([]);
    bad_output["outputs"]["bad"] = json!({"value": 1});
    assert!(
        matches!(StateV4::from_slice(&state(bad_output)), Err(StateError::Schema { path, .. }) if path == "outputs.bad")
    );

    let mut no_tofu_version = base;
    no_tofu_version["resources"] = json!([]);
    no_tofu_version
        .as_object_mut()
        .unwrap()
        .remove("terraform_version");
    let error = StateV4::from_slice(&state(no_tofu_version)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "state does not match the version 4 schema at the top level: missing field `terraform_version`"
    );
}

#[test]
fn a_repeated_key_keeps_its_last_value_as_in_opentofu() {
    let input = br#"{"version": 4, "serial": 1, "serial": 9, "lineage": "a", "lineage": "b", "terraform_version": "1.12.6"}"#;
    let header = inspect_state(input).unwrap().header().clone();
    assert_eq!((header.serial, header.lineage.as_str()), (9, "b"));
    let full = StateV4::from_slice(input).unwrap();
    assert_eq!((full.serial, full.lineage.as_str()), (9, "b"));
}
