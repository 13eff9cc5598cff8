//! Every plan JSON in the OpenTofu fixtures summarised, cross-checked against the
//! `change_summary` and `planned_change` messages OpenTofu printed for the same plan, against
//! an independent reading of the raw JSON, and against hand-verified expectations.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cairn_tofu::{
    Action, Plan, PlanError, PlanSummary, Risk, UiEvent, UiMessage, change_counts, summarize_plan,
};
use serde_json::{Value, json};

/// Every plan JSON below the fixtures: any `.json` object with `format_version` and one of
/// the sections only plans have.
fn plan_files() -> Vec<PathBuf> {
    common::files_below(&common::fixtures_dir(), ".json")
        .into_iter()
        .filter(|path| {
            let Ok(Value::Object(top)) = serde_json::from_slice::<Value>(&common::read(path))
            else {
                return false;
            };
            top.contains_key("format_version")
                && (top.contains_key("planned_values") || top.contains_key("resource_changes"))
        })
        .collect()
}

fn relative(path: &Path) -> String {
    path.strip_prefix(common::fixtures_dir())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn the_fixture_search_finds_every_plan_in_the_documented_places() {
    let found: BTreeSet<String> = plan_files().iter().map(|p| relative(p)).collect();
    // Located independently: by directory layout, not by content.
    let dir = common::fixtures_dir();
    let mut expected = BTreeSet::new();
    for case in std::fs::read_dir(dir.join("equivalence/outputs")).unwrap() {
        let plan = case.unwrap().path().join("plan.json");
        if plan.is_file() {
            expected.insert(relative(&plan));
        }
    }
    for path in common::files_below(&dir.join("plan-json"), ".json") {
        expected.insert(relative(&path));
    }
    assert_eq!(found, expected);
    // 28 equivalence cases, 21 show-json (one with a refresh-only variant), 3 identity, one
    // sensitive, one Terraform-generated.
    assert_eq!(found.len(), 54, "{found:#?}");
}

/// The risk, read from the raw JSON without the crate's model.
fn oracle_risk(plan: &Value) -> Risk {
    if plan["errored"] == json!(true) {
        return Risk::Unknown;
    }
    let known = ["no-op", "create", "read", "update", "delete", "forget"];
    let mut risk = Risk::Low;
    for rc in plan["resource_changes"].as_array().into_iter().flatten() {
        let actions: Vec<&str> = rc["change"]["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        if actions.iter().any(|a| !known.contains(a)) {
            return Risk::Unknown;
        }
        if actions.contains(&"delete")
            || actions.contains(&"forget")
            || rc.get("deposed").is_some_and(|d| !d.is_null())
        {
            risk = Risk::High;
        }
    }
    risk
}

#[test]
fn every_fixture_plan_is_summarised_consistently() {
    for path in plan_files() {
        let name = relative(&path);
        let bytes = common::read(&path);
        let raw: Value = serde_json::from_slice(&bytes).unwrap();
        let plan = Plan::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let summary = summarize_plan(&bytes);
        assert_eq!(summary, PlanSummary::from_plan(&plan), "{name}");
        assert_eq!(summary.risk, oracle_risk(&raw), "{name}");

        let changes = raw["resource_changes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(plan.resource_changes.len(), changes.len(), "{name}");
        let managed = |wanted: &str| {
            changes
                .iter()
                .filter(|rc| rc["mode"] != "data")
                .filter(|rc| {
                    rc["change"]["actions"]
                        .as_array()
                        .unwrap()
                        .contains(&json!(wanted))
                })
                .count() as u64
        };
        assert_eq!(summary.add, managed("create"), "{name}");
        assert_eq!(summary.change, managed("update"), "{name}");
        assert_eq!(summary.destroy, managed("delete"), "{name}");
        let replaced: Vec<String> = changes
            .iter()
            .filter(|rc| {
                let actions = rc["change"]["actions"].as_array().unwrap();
                actions.contains(&json!("create")) && actions.contains(&json!("delete"))
            })
            .map(|rc| rc["address"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(summary.replace, replaced, "{name}");
        // Every replacement is high risk and counts once on each side.
        if !summary.replace.is_empty() {
            assert_eq!(summary.risk, Risk::High, "{name}");
            assert!(
                summary.add >= replaced.len() as u64 && summary.destroy >= replaced.len() as u64
            );
        }
        for resource in &summary.resources {
            let rc = changes
                .iter()
                .find(|rc| rc["address"] == resource.address.as_str())
                .unwrap();
            assert_eq!(json!(resource.actions), rc["change"]["actions"], "{name}");
            assert_eq!(
                json!(resource.reason),
                rc.get("action_reason").cloned().unwrap_or(Value::Null),
                "{name}"
            );
        }
        let changing = changes
            .iter()
            .filter(|rc| rc["change"]["actions"] != json!(["no-op"]))
            .count();
        assert_eq!(summary.resources.len(), changing, "{name}");
    }
}

/// The UI stream OpenTofu printed while applying this plan (equivalence tests only).
fn apply_messages(plan_path: &Path) -> Option<Vec<UiMessage>> {
    let apply = plan_path.with_file_name("apply.json");
    if !apply.is_file() {
        return None;
    }
    let messages: Vec<Value> = serde_json::from_slice(&common::read(&apply)).unwrap();
    Some(
        messages
            .into_iter()
            .map(|m| UiMessage::from_value(m).unwrap())
            .collect(),
    )
}

#[test]
fn counts_match_opentofus_own_change_summary() {
    let mut checked = 0;
    for path in plan_files() {
        let Some(messages) = apply_messages(&path) else {
            continue;
        };
        let name = relative(&path);
        let plan = Plan::from_slice(&common::read(&path)).unwrap();
        let summary = PlanSummary::from_plan(&plan);
        let counts = change_counts(&plan);
        let summaries: Vec<_> = messages
            .iter()
            .filter_map(|m| match &m.event {
                UiEvent::ChangeSummary(s) => Some(s),
                _ => None,
            })
            .collect();
        assert!(!summaries.is_empty(), "{name}: no change_summary");
        // The apply of a saved plan reports what the plan said it would do.
        for tofu in summaries {
            assert_eq!(
                (tofu.add, tofu.change, tofu.remove),
                (summary.add, summary.change, summary.destroy),
                "{name}: {} summary",
                tofu.operation
            );
            assert_eq!(
                (tofu.forget, tofu.import),
                (counts.forget, counts.import),
                "{name}"
            );
        }
        // Every planned_change OpenTofu printed agrees with the per-resource summary.
        for message in &messages {
            let UiEvent::PlannedChange(planned) = &message.event else {
                continue;
            };
            let address = &planned.resource.addr;
            let resource = summary
                .resources
                .iter()
                .find(|r| &r.address == address)
                .unwrap_or_else(|| panic!("{name}: {address} missing"));
            match planned.action.as_str() {
                "replace" => assert!(summary.replace.contains(address), "{name}"),
                "delete" => assert_eq!(resource.actions, ["delete"], "{name}"),
                "create" => assert_eq!(resource.actions, ["create"], "{name}"),
                "update" => assert_eq!(resource.actions, ["update"], "{name}"),
                other => panic!("{name}: unexpected planned_change action {other}"),
            }
            // The stream shortens `replace_because_cannot_update` to `cannot_update`.
            if let (Some(short), Some(reason)) = (&planned.reason, &resource.reason) {
                assert!(
                    reason.ends_with(short.as_str()),
                    "{name}: {reason} vs {short}"
                );
            }
        }
        checked += 1;
    }
    assert_eq!(
        checked, 27,
        "every equivalence case but data_read has an apply stream"
    );
}

struct Expected {
    plan: &'static str,
    add: u64,
    change: u64,
    destroy: u64,
    replace: &'static [&'static str],
    risk: Risk,
    /// (address, actions, reason) of every changing resource, in plan order.
    resources: &'static [(&'static str, &'static [&'static str], Option<&'static str>)],
}

/// Read by hand from the fixture files.
const HAND_CHECKED: &[Expected] = &[
    Expected {
        plan: "equivalence/outputs/local_provider_update/plan.json",
        add: 1,
        change: 0,
        destroy: 1,
        replace: &["local_file.local_file"],
        risk: Risk::High,
        resources: &[(
            "local_file.local_file",
            &["delete", "create"],
            Some("replace_because_cannot_update"),
        )],
    },
    Expected {
        plan: "plan-json/show-json/basic-delete/output.json",
        add: 0,
        change: 1,
        destroy: 1,
        replace: &[],
        risk: Risk::High,
        resources: &[
            ("test_instance.test", &["update"], None),
            (
                "test_instance.test-delete",
                &["delete"],
                Some("delete_because_no_resource_config"),
            ),
        ],
    },
    Expected {
        plan: "plan-json/show-json/plan-error/output.json",
        add: 0,
        change: 0,
        destroy: 0,
        replace: &[],
        risk: Risk::Unknown,
        resources: &[],
    },
    Expected {
        plan: "equivalence/outputs/data_read/plan.json",
        add: 3,
        change: 0,
        destroy: 0,
        replace: &[],
        risk: Risk::Low,
        resources: &[
            (
                "data.tfcoremock_simple_resource.read",
                &["read"],
                Some("read_because_config_unknown"),
            ),
            ("tfcoremock_simple_resource.create", &["create"], None),
            ("module.create.local_file.data_file", &["create"], None),
            ("module.create.random_integer.random", &["create"], None),
        ],
    },
    Expected {
        plan: "equivalence/outputs/moved_simple/plan.json",
        add: 0,
        change: 0,
        destroy: 0,
        replace: &[],
        risk: Risk::Low,
        resources: &[],
    },
    Expected {
        plan: "equivalence/outputs/drift_refresh_only/plan.json",
        add: 0,
        change: 0,
        destroy: 0,
        replace: &[],
        risk: Risk::Low,
        resources: &[],
    },
    Expected {
        plan: "equivalence/outputs/fully_populated_complex_destroy/plan.json",
        add: 0,
        change: 0,
        destroy: 1,
        replace: &[],
        risk: Risk::High,
        resources: &[("tfcoremock_complex_resource.complex", &["delete"], None)],
    },
    Expected {
        plan: "plan-json/show-json/requires-replace/output.json",
        add: 1,
        change: 0,
        destroy: 1,
        replace: &["test_instance.test"],
        risk: Risk::High,
        resources: &[(
            "test_instance.test",
            &["delete", "create"],
            Some("replace_because_cannot_update"),
        )],
    },
    Expected {
        plan: "plan-json/show-json/moved/output.json",
        add: 0,
        change: 1,
        destroy: 0,
        replace: &[],
        risk: Risk::Low,
        resources: &[("test_instance.baz", &["update"], None)],
    },
    Expected {
        plan: "plan-json/terraform-generated/plan-import-config-gen/plan-redacted.json",
        add: 0,
        change: 0,
        destroy: 0,
        replace: &[],
        risk: Risk::Low,
        resources: &[],
    },
];

#[test]
fn hand_checked_fixtures() {
    for expected in HAND_CHECKED {
        let summary = summarize_plan(&common::read(&common::fixture(expected.plan)));
        let name = expected.plan;
        assert_eq!(
            (summary.add, summary.change, summary.destroy),
            (expected.add, expected.change, expected.destroy),
            "{name}"
        );
        assert_eq!(summary.replace, expected.replace, "{name}");
        assert_eq!(summary.risk, expected.risk, "{name}");
        let resources: Vec<(&str, Vec<&str>, Option<&str>)> = summary
            .resources
            .iter()
            .map(|r| {
                (
                    r.address.as_str(),
                    r.actions.iter().map(String::as_str).collect(),
                    r.reason.as_deref(),
                )
            })
            .collect();
        let wanted: Vec<(&str, Vec<&str>, Option<&str>)> = expected
            .resources
            .iter()
            .map(|(a, actions, r)| (*a, actions.to_vec(), *r))
            .collect();
        assert_eq!(resources, wanted, "{name}");
    }
    // The import is counted where OpenTofu counts it, and is not a change.
    let import = Plan::from_slice(&common::read(&common::fixture(
        "plan-json/terraform-generated/plan-import-config-gen/plan-redacted.json",
    )))
    .unwrap();
    assert_eq!(change_counts(&import).import, 1);
}

#[test]
fn the_summary_serialises_to_exactly_the_documented_shape() {
    let summary = summarize_plan(&common::read(&common::fixture(
        "equivalence/outputs/local_provider_update/plan.json",
    )));
    let text = summary.to_json();
    assert_eq!(
        text,
        r#"{"add":1,"change":0,"destroy":1,"replace":["local_file.local_file"],"risk":"high","resources":[{"address":"local_file.local_file","actions":["delete","create"],"reason":"replace_because_cannot_update"}]}"#
    );
    let back: PlanSummary = serde_json::from_str(&text).unwrap();
    assert_eq!(back, summary);
    let low = summarize_plan(&common::read(&common::fixture(
        "plan-json/show-json/moved/output.json",
    )));
    assert_eq!(
        serde_json::to_value(&low).unwrap(),
        json!({"add":0,"change":1,"destroy":0,"replace":[],"risk":"low",
               "resources":[{"address":"test_instance.baz","actions":["update"],"reason":null}]})
    );
}

/// A minimal plan around the given resource changes.
fn plan_with(changes: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "format_version": "1.2",
        "planned_values": {"root_module": {}},
        "resource_changes": changes,
        "errored": false,
        "some_future_section": {"x": 1}
    }))
    .unwrap()
}

fn rc(address: &str, actions: &[&str]) -> Value {
    json!({
        "address": address, "mode": "managed", "type": "t", "name": "n",
        "provider_name": "p", "change": {"actions": actions, "before": null, "after": null}
    })
}

#[test]
fn deposed_objects_forget_and_create_before_destroy_are_high_risk() {
    let mut deposed = rc("t.n", &["delete"]);
    deposed["deposed"] = json!("00000001");
    let summary = summarize_plan(&plan_with(json!([rc("t.n", &["update"]), deposed])));
    assert_eq!(summary.risk, Risk::High);
    assert_eq!((summary.change, summary.destroy), (1, 1));

    let mut deposed_update = rc("t.m", &["no-op"]);
    deposed_update["deposed"] = json!("00000002");
    assert_eq!(
        summarize_plan(&plan_with(json!([deposed_update]))).risk,
        Risk::High
    );

    let mut forget = rc("t.f", &["forget"]);
    forget["action_reason"] = json!("forget_because_no_resource_config");
    let summary = summarize_plan(&plan_with(json!([forget])));
    assert_eq!(summary.risk, Risk::High);
    assert_eq!((summary.add, summary.change, summary.destroy), (0, 0, 0));
    assert_eq!(summary.resources[0].actions, ["forget"]);

    let summary = summarize_plan(&plan_with(json!([rc("t.cbd", &["create", "delete"])])));
    assert_eq!(summary.replace, ["t.cbd"]);
    assert_eq!(
        (summary.add, summary.destroy, summary.risk),
        (1, 1, Risk::High)
    );
}

#[test]
fn routine_updates_are_low_whatever_the_reason_says() {
    let mut update = rc("t.u", &["update"]);
    update["action_reason"] = json!("some_reason_from_a_future_release");
    let summary = summarize_plan(&plan_with(json!([update, rc("t.c", &["create"])])));
    assert_eq!(summary.risk, Risk::Low);
    assert_eq!(
        summary.resources[0].reason.as_deref(),
        Some("some_reason_from_a_future_release")
    );
    assert_eq!(summarize_plan(&plan_with(json!([]))).risk, Risk::Low);
    assert_eq!(summarize_plan(&plan_with(json!(null))).risk, Risk::Low);
    // Deleting a data source is not counted, as OpenTofu does not count it, but the rule
    // "any delete is high" still holds.
    let mut data = rc("data.t.d", &["delete"]);
    data["mode"] = json!("data");
    let summary = summarize_plan(&plan_with(json!([data])));
    assert_eq!((summary.destroy, summary.risk), (0, Risk::High));
}

#[test]
fn unknown_actions_errored_and_unreadable_plans_are_unknown() {
    let summary = summarize_plan(&plan_with(json!([rc("t.x", &["transmogrify"])])));
    assert_eq!(summary.risk, Risk::Unknown);
    assert_eq!(summary.resources[0].actions, ["transmogrify"]);
    let plan = Plan::from_slice(&plan_with(json!([rc("t.x", &["transmogrify"])]))).unwrap();
    assert_eq!(
        plan.resource_changes[0].change.actions,
        [Action::Other("transmogrify".into())]
    );
    assert!(plan.extra.contains_key("some_future_section"));

    let mut errored: Value =
        serde_json::from_slice(&plan_with(json!([rc("t.c", &["create"])]))).unwrap();
    errored["errored"] = json!(true);
    let summary = summarize_plan(&serde_json::to_vec(&errored).unwrap());
    assert_eq!((summary.add, summary.risk), (1, Risk::Unknown));

    for bad in [
        &b""[..],
        b"not json",
        b"[1,2]",
        br#"{"resource_changes":[]}"#,
        br#"{"format_version":"2.0"}"#,
        br#"{"format_version":"1.2","planned_values":{},"resource_changes":[{"address":"x"}]}"#,
        br#"{"format_version":"1.0","values":{"root_module":{}}}"#,
    ] {
        assert_eq!(
            summarize_plan(bad),
            PlanSummary::unreadable(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    assert_eq!(Plan::from_slice(b"  "), Err(PlanError::Empty));
    assert_eq!(Plan::from_slice(b"[]"), Err(PlanError::NotAnObject));
    assert_eq!(
        Plan::from_slice(b"{}"),
        Err(PlanError::MissingFormatVersion)
    );
    assert_eq!(
        Plan::from_slice(br#"{"format_version":"2.0"}"#),
        Err(PlanError::UnsupportedFormatVersion {
            version: "2.0".into()
        })
    );
    assert_eq!(
        Plan::from_slice(br#"{"format_version":"1.0","values":{}}"#),
        Err(PlanError::MissingPlannedValues)
    );
    assert!(matches!(
        Plan::from_slice(b"{\"a\":"),
        Err(PlanError::NotJson { line: 1, .. })
    ));
}
