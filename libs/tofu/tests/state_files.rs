//! Every state file in the OpenTofu fixtures (`state-files/`, `state-json/`, and every other
//! `*.tfstate` below the fixtures directory) read with both the full model and the
//! coordinator's `inspect_state`, checked against the JSON of the file itself.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use cairn_tofu::{
    DocumentKind, OutputValue, StateDocument, StateError, StateHeader, StateV4, inspect_state,
    public_outputs,
};
use serde_json::{Value, json};

struct Expected {
    file: &'static str,
    serial: u64,
    lineage: &'static str,
    terraform_version: &'static str,
    outputs: &'static [&'static str],
}

const ROUNDTRIP_LINEAGE: &str = "f2968801-fa14-41ab-a044-224f3a4adf04";

const BUILTIN: &[Expected] = &[
    Expected {
        file: "basic.tfstate",
        serial: 0,
        lineage: "",
        terraform_version: "0.13.0",
        outputs: &["foo"],
    },
    Expected {
        file: "complex_outputs.tfstate",
        serial: 0,
        lineage: "",
        terraform_version: "0.13.0",
        outputs: &["computed_map", "computed_set", "map", "set"],
    },
    Expected {
        file: "deprecation_warnings.tfstate",
        serial: 0,
        lineage: "",
        terraform_version: "0.13.0",
        outputs: &["foo"],
    },
    Expected {
        file: "empty.tfstate",
        serial: 0,
        lineage: "",
        terraform_version: "0.13.0",
        outputs: &[],
    },
    Expected {
        file: "null_outputs.tfstate",
        serial: 0,
        lineage: "",
        terraform_version: "0.13.0",
        outputs: &["list", "map"],
    },
];

const ROUNDTRIP: &[Expected] = &[
    Expected {
        file: "v4-cbd.in.tfstate",
        serial: 0,
        lineage: ROUNDTRIP_LINEAGE,
        terraform_version: "0.12.0",
        outputs: &["numbers"],
    },
    Expected {
        file: "v4-foreach.in.tfstate",
        serial: 0,
        lineage: ROUNDTRIP_LINEAGE,
        terraform_version: "0.12.0",
        outputs: &["numbers"],
    },
    Expected {
        file: "v4-future.in.tfstate",
        serial: 0,
        lineage: ROUNDTRIP_LINEAGE,
        terraform_version: "999.0.0",
        outputs: &["numbers"],
    },
    Expected {
        file: "v4-legacy-foreach.in.tfstate",
        serial: 0,
        lineage: ROUNDTRIP_LINEAGE,
        terraform_version: "0.12.0",
        outputs: &["numbers"],
    },
    Expected {
        file: "v4-legacy-foreach.out.tfstate",
        serial: 0,
        lineage: ROUNDTRIP_LINEAGE,
        terraform_version: "0.12.0",
        outputs: &["numbers"],
    },
    Expected {
        file: "v4-legacy-modules.in.tfstate",
        serial: 0,
        lineage: ROUNDTRIP_LINEAGE,
        terraform_version: "0.12.0",
        outputs: &["numbers"],
    },
    Expected {
        file: "v4-legacy-modules.out.tfstate",
        serial: 0,
        lineage: ROUNDTRIP_LINEAGE,
        terraform_version: "0.12.0",
        outputs: &["numbers"],
    },
    Expected {
        file: "v4-legacy-simple.in.tfstate",
        serial: 0,
        lineage: ROUNDTRIP_LINEAGE,
        terraform_version: "0.12.0",
        outputs: &["numbers"],
    },
    Expected {
        file: "v4-legacy-simple.out.tfstate",
        serial: 0,
        lineage: ROUNDTRIP_LINEAGE,
        terraform_version: "0.12.0",
        outputs: &["numbers"],
    },
    Expected {
        file: "v4-modules.in.tfstate",
        serial: 0,
        lineage: ROUNDTRIP_LINEAGE,
        terraform_version: "0.12.0",
        outputs: &["numbers"],
    },
    Expected {
        file: "v4-simple.in.tfstate",
        serial: 0,
        lineage: ROUNDTRIP_LINEAGE,
        terraform_version: "0.12.0",
        outputs: &["numbers"],
    },
];

/// The outputs as the file spells them, with OpenTofu's defaults (`sensitive` absent = false).
fn oracle_outputs(file: &Value) -> Vec<OutputValue> {
    let Some(outputs) = file.get("outputs") else {
        return Vec::new();
    };
    // serde_json's Map iterates in key order, as the parsed outputs are ordered.
    outputs
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, output)| OutputValue {
            name: name.clone(),
            value: output["value"].clone(),
            type_json: Some(output["type"].clone()),
            sensitive: output
                .get("sensitive")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
        .collect()
}

/// What OpenTofu's own writer would produce for `file`: the three top-level collections
/// always present, `false` flags omitted.
fn as_tofu_writes_it(mut file: Value) -> Value {
    let top = file.as_object_mut().unwrap();
    top.entry("outputs").or_insert_with(|| json!({}));
    top.entry("resources").or_insert_with(|| json!([]));
    top.entry("check_results").or_insert(Value::Null);
    for output in top["outputs"].as_object_mut().unwrap().values_mut() {
        let output = output.as_object_mut().unwrap();
        if output.get("sensitive") == Some(&Value::Bool(false)) {
            output.remove("sensitive");
        }
    }
    for resource in top["resources"].as_array_mut().unwrap() {
        for instance in resource["instances"].as_array_mut().unwrap() {
            let instance = instance.as_object_mut().unwrap();
            if instance.get("create_before_destroy") == Some(&Value::Bool(false)) {
                instance.remove("create_before_destroy");
            }
        }
    }
    file
}

/// Reads one fixture both ways and checks it against the file's own JSON. Returns the model.
fn check_plain_state(path: &Path) -> StateV4 {
    let name = path.display();
    let bytes = common::read(path);
    let file = common::read_json(path);
    let serial = file["serial"].as_u64().unwrap();
    let lineage = file["lineage"].as_str().unwrap();
    let expected_outputs = oracle_outputs(&file);

    let state = StateV4::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(state.version, 4, "{name}");
    assert_eq!(state.serial, serial, "{name}");
    assert_eq!(state.lineage, lineage, "{name}");
    assert_eq!(
        state.terraform_version,
        file["terraform_version"].as_str().unwrap(),
        "{name}"
    );
    assert_eq!(state.output_values(), expected_outputs, "{name}");
    assert_eq!(
        state.resources.len(),
        file.get("resources")
            .and_then(Value::as_array)
            .map_or(0, Vec::len),
        "{name}"
    );
    assert_eq!(
        serde_json::to_value(&state).unwrap(),
        as_tofu_writes_it(file.clone()),
        "{name}: the model must keep every field"
    );

    match inspect_state(&bytes) {
        Ok(document) => {
            assert!(
                !lineage.is_empty(),
                "{name}: an empty lineage must be refused"
            );
            assert_eq!(
                document.header(),
                &StateHeader {
                    serial,
                    lineage: lineage.to_owned(),
                    version: Some(4)
                },
                "{name}"
            );
            assert!(!document.is_encrypted(), "{name}");
            assert_eq!(document.outputs(), expected_outputs.as_slice(), "{name}");
        }
        Err(error) => {
            assert!(lineage.is_empty(), "{name}: {error}");
            assert_eq!(
                error,
                StateError::EmptyLineage {
                    kind: DocumentKind::Plain
                },
                "{name}"
            );
        }
    }
    state
}

fn check_folder(folder: &str, expected: &[Expected]) {
    let dir = common::fixture(folder);
    let files = common::files_in(&dir);
    let found: BTreeSet<String> = files.iter().map(|path| common::file_name(path)).collect();
    let listed: BTreeSet<String> = expected.iter().map(|e| e.file.to_owned()).collect();
    assert_eq!(
        found, listed,
        "every file in {folder} is checked, and only those"
    );

    for expected in expected {
        let path = dir.join(expected.file);
        let file = common::read_json(&path);
        assert_eq!(file["version"], json!(4), "{}", expected.file);
        assert_eq!(file["serial"], json!(expected.serial), "{}", expected.file);
        assert_eq!(
            file["lineage"],
            json!(expected.lineage),
            "{}",
            expected.file
        );

        let state = check_plain_state(&path);
        assert_eq!(
            state.terraform_version, expected.terraform_version,
            "{}",
            expected.file
        );
        let names: Vec<&str> = state.outputs.keys().map(String::as_str).collect();
        assert_eq!(names, expected.outputs, "{}", expected.file);
    }
}

#[test]
fn builtin_provider_states_parse_but_their_empty_lineage_is_refused_by_inspect() {
    check_folder("state-files/builtin-terraform-provider", BUILTIN);
}

#[test]
fn roundtrip_states_parse_with_their_header_and_outputs() {
    check_folder("state-files/roundtrip", ROUNDTRIP);
}

#[test]
fn complex_and_null_outputs_keep_value_and_type() {
    let bytes = common::read(&common::fixture(
        "state-files/builtin-terraform-provider/complex_outputs.tfstate",
    ));
    let state = StateV4::from_slice(&bytes).unwrap();
    let map = &state.outputs["computed_map"];
    assert_eq!(map.value, json!({"key1": "value1"}));
    assert_eq!(map.value_type, json!(["map", "string"]));
    assert!(!map.sensitive);
    assert_eq!(state.resources[0].each.as_deref(), Some("list"));

    let bytes = common::read(&common::fixture(
        "state-files/builtin-terraform-provider/null_outputs.tfstate",
    ));
    let state = StateV4::from_slice(&bytes).unwrap();
    let public = public_outputs(&state.output_values());
    assert_eq!(public.len(), 2);
    for output in public {
        assert_eq!(
            output.value,
            Some(Value::Null),
            "{}: a null output is not a redacted one",
            output.name
        );
        assert!(!output.sensitive);
    }
}

#[test]
fn unknown_output_fields_are_kept() {
    let bytes = common::read(&common::fixture(
        "state-files/builtin-terraform-provider/deprecation_warnings.tfstate",
    ));
    let state = StateV4::from_slice(&bytes).unwrap();
    assert_eq!(
        state.outputs["foo"].extra.get("deprecated"),
        Some(&json!("I am deprecated"))
    );
}

/// The `v4-legacy-*` inputs are version 4 files whose provider addresses use the pre-0.13
/// form (`provider.null`); OpenTofu rewrites them on read (the `.out` files). Cairn keeps
/// what it was given, and the header and outputs do not depend on the rewrite.
#[test]
fn legacy_provider_addresses_are_kept_verbatim() {
    let dir = common::fixture("state-files/roundtrip");
    for stem in ["v4-legacy-foreach", "v4-legacy-modules", "v4-legacy-simple"] {
        let input =
            StateV4::from_slice(&common::read(&dir.join(format!("{stem}.in.tfstate")))).unwrap();
        let output =
            StateV4::from_slice(&common::read(&dir.join(format!("{stem}.out.tfstate")))).unwrap();
        assert_eq!(input.version, 4, "{stem}");
        assert!(
            input
                .resources
                .iter()
                .any(|r| r.provider.starts_with("provider.")),
            "{stem}: the input uses a legacy provider address"
        );
        assert!(
            output
                .resources
                .iter()
                .any(|r| r.provider.starts_with("provider[")),
            "{stem}: the output uses the upgraded form"
        );
        assert_eq!(
            (input.serial, &input.lineage),
            (output.serial, &output.lineage),
            "{stem}"
        );
        assert_eq!(input.output_values(), output.output_values(), "{stem}");
        let input_doc =
            inspect_state(&common::read(&dir.join(format!("{stem}.in.tfstate")))).unwrap();
        let output_doc =
            inspect_state(&common::read(&dir.join(format!("{stem}.out.tfstate")))).unwrap();
        assert_eq!(input_doc, output_doc, "{stem}");
    }
}

#[test]
fn legacy_flatmap_attributes_and_module_addresses_are_typed() {
    let bytes = common::read(&common::fixture(
        "state-files/roundtrip/v4-legacy-modules.in.tfstate",
    ));
    let state = StateV4::from_slice(&bytes).unwrap();
    let bar = &state.resources[0];
    assert_eq!(
        (
            bar.mode.as_str(),
            bar.resource_type.as_str(),
            bar.name.as_str()
        ),
        ("managed", "null_resource", "bar")
    );
    assert_eq!(bar.module, None);
    let flat = bar.instances[0].attributes_flat.as_ref().unwrap();
    assert_eq!(flat["triggers.whaaat"], "0,1");
    assert_eq!(
        bar.instances[0].dependencies.as_deref(),
        Some(&["null_resource.foo".to_owned()][..])
    );
    let mod_b = &state.resources[1];
    assert_eq!(mod_b.module.as_deref(), Some("module.modB"));
    assert_eq!(mod_b.each.as_deref(), Some("map"));
    assert_eq!(mod_b.instances[0].index_key, Some(json!("a")));

    let cbd = StateV4::from_slice(&common::read(&common::fixture(
        "state-files/roundtrip/v4-cbd.in.tfstate",
    )))
    .unwrap();
    assert!(cbd.resources[0].instances[0].create_before_destroy);
    assert_eq!(
        cbd.resources[0].instances[0].private.as_deref(),
        Some("bnVsbA==")
    );
}

/// `show -json` output next to the state is OpenTofu's own reading of the outputs.
#[test]
fn state_json_outputs_match_tofu_show_json() {
    let root = common::fixture("state-json/show-json-state");
    let mut compared = 0;
    for case in ["basic", "modules", "sensitive-variables"] {
        let bytes = common::read(&root.join(case).join("terraform.tfstate"));
        let shown = common::read_json(&root.join(case).join("output.json"));
        let check_plain = check_plain_state(&root.join(case).join("terraform.tfstate"));
        let document = inspect_state(&bytes).unwrap();
        let tofu_outputs: Vec<(String, Value, Value, bool)> = shown["values"]
            .get("outputs")
            .and_then(Value::as_object)
            .map(|outputs| {
                outputs
                    .iter()
                    .map(|(name, o)| {
                        (
                            name.clone(),
                            o["value"].clone(),
                            o["type"].clone(),
                            o["sensitive"].as_bool().unwrap(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let ours: Vec<(String, Value, Value, bool)> = document
            .outputs()
            .iter()
            .map(|o| {
                (
                    o.name.clone(),
                    o.value.clone(),
                    o.type_json.clone().unwrap(),
                    o.sensitive,
                )
            })
            .collect();
        assert_eq!(ours, tofu_outputs, "{case}");
        assert_eq!(check_plain.outputs.len(), tofu_outputs.len(), "{case}");
        compared += tofu_outputs.len();
    }
    assert_eq!(compared, 1, "modules has the only output among these cases");

    let sensitive = StateV4::from_slice(&common::read(
        &root.join("sensitive-variables/terraform.tfstate"),
    ))
    .unwrap();
    assert_eq!(
        sensitive.resources[0].instances[0].sensitive_attributes,
        Some(json!([[{"type": "get_attr", "value": "ami"}]]))
    );

    // `empty` has a zero-byte state file (tofu shows "no state").
    let empty = common::read(&root.join("empty/terraform.tfstate"));
    assert!(empty.is_empty());
    assert_eq!(inspect_state(&empty), Err(StateError::Empty));
    assert_eq!(StateV4::from_slice(&empty), Err(StateError::Empty));
}

/// Every `*.tfstate` anywhere in the fixtures (equivalence tests hold states written by a
/// real `tofu`, with `check_results`), whatever kind it is.
#[test]
fn every_tfstate_in_the_fixtures_is_read() {
    let files = common::files_below(&common::fixtures_dir(), ".tfstate");
    let (mut plain, mut empty, mut encrypted) = (0, 0, 0);
    for path in &files {
        let bytes = common::read(path);
        if bytes.is_empty() {
            assert_eq!(
                inspect_state(&bytes),
                Err(StateError::Empty),
                "{}",
                path.display()
            );
            empty += 1;
            continue;
        }
        let file = common::read_json(path);
        if file.get("encrypted_data").is_some() {
            // Hand-made envelope without the serial/lineage pass-through.
            assert_eq!(file.get("serial"), None);
            assert_eq!(
                inspect_state(&bytes),
                Err(StateError::MissingSerial {
                    kind: DocumentKind::Encrypted
                }),
                "{}",
                path.display()
            );
            assert_eq!(StateV4::from_slice(&bytes), Err(StateError::Encrypted));
            encrypted += 1;
            continue;
        }
        check_plain_state(path);
        plain += 1;
    }
    assert!(
        plain >= 40,
        "found only {plain} plain state files under the fixtures"
    );
    assert_eq!((empty, encrypted), (1, 1), "{files:#?}");
}

#[test]
fn check_results_from_real_tofu_states_are_typed() {
    let files = common::files_below(&common::fixture("equivalence/tests"), "terraform.tfstate");
    let mut empty_lists = 0;
    for path in &files {
        let state = StateV4::from_slice(&common::read(path)).unwrap();
        let file = common::read_json(path);
        match &state.check_results {
            None => assert_eq!(file["check_results"], Value::Null),
            Some(list) => {
                assert_eq!(file["check_results"], json!([]));
                assert!(list.is_empty());
                empty_lists += 1;
            }
        }
    }
    assert!(
        empty_lists > 0,
        "some equivalence states have \"check_results\": []"
    );
    let document: StateDocument = inspect_state(&common::read(&files[0])).unwrap();
    assert!(document.header().serial >= 1);
}
