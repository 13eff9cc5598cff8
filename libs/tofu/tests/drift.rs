//! Drift findings on the real OpenTofu plan fixtures that carry `resource_drift` and
//! `relevant_attributes`: actions and attribute paths per address, never values; the ignore
//! rules and the fingerprint on top.
#![allow(clippy::unwrap_used)]

mod common;

use cairn_tofu::drift::{fingerprint, summary};
use cairn_tofu::{DriftAction, DriftFinding, IgnoreRule, apply_ignore_rules, drift_findings_json};
use serde_json::{Value, json};

fn findings(relative: &str) -> Vec<DriftFinding> {
    drift_findings_json(&common::read(&common::fixture(relative))).unwrap()
}

fn rules(rules: &[&str]) -> Vec<IgnoreRule> {
    rules
        .iter()
        .map(|r| IgnoreRule::parse(r).unwrap())
        .collect()
}

fn finding(
    address: &str,
    action: DriftAction,
    attributes: &[&str],
    relevant: &[&str],
) -> DriftFinding {
    DriftFinding {
        address: address.into(),
        action,
        attributes: attributes.iter().map(|s| (*s).to_owned()).collect(),
        relevant: relevant.iter().map(|s| (*s).to_owned()).collect(),
    }
}

#[test]
fn a_value_changed_outside_is_an_update_of_that_attribute() {
    let found = findings("equivalence/outputs/drift_simple/plan.json");
    assert_eq!(
        found,
        vec![finding(
            "tfcoremock_simple_resource.drift",
            DriftAction::Update,
            &["string"],
            &[]
        )]
    );
    // Refresh-only plans have no resource_changes: the drift alone is found.
    assert_eq!(
        findings("equivalence/outputs/drift_refresh_only/plan.json"),
        vec![finding(
            "tfcoremock_simple_resource.drift",
            DriftAction::Update,
            &["string"],
            &[]
        )]
    );
}

#[test]
fn relevant_attributes_mark_the_changes_the_plan_depends_on() {
    let found = findings("equivalence/outputs/drift_relevant_attributes/plan.json");
    assert_eq!(
        found,
        vec![
            // Drifted: number and string; the plan of `dependent` reads only `string`.
            finding(
                "tfcoremock_simple_resource.base",
                DriftAction::Update,
                &["number", "string"],
                &["string"]
            ),
            finding(
                "tfcoremock_simple_resource.dependent",
                DriftAction::Update,
                &["string"],
                &[]
            ),
        ]
    );
    let moved = findings("equivalence/outputs/moved_with_drift/plan.json");
    assert_eq!(moved[0].address, "tfcoremock_simple_resource.base_after");
    assert_eq!(moved[0].relevant, vec!["string".to_owned()]);
}

#[test]
fn planned_changes_without_drift_count_too() {
    // `no_refresh` was not refreshed but its config differs; `should_refresh` drifted.
    let found = findings("plan-json/show-json/drift/output.json");
    assert_eq!(
        found,
        vec![
            finding(
                "test_instance.no_refresh",
                DriftAction::Update,
                &["ami"],
                &[]
            ),
            finding(
                "test_instance.should_refresh",
                DriftAction::Update,
                &["ami"],
                &[]
            ),
        ]
    );
}

#[test]
fn findings_never_carry_values() {
    for relative in [
        "equivalence/outputs/drift_simple/plan.json",
        "equivalence/outputs/drift_relevant_attributes/plan.json",
        "plan-json/show-json/drift/output.json",
    ] {
        let text = format!("{:?} {}", findings(relative), summary(&findings(relative)));
        for value in [
            "Hello",
            "drift!",
            "refresh-me",
            "refreshed",
            "baz",
            "f6f74ca6",
            "placeholder",
        ] {
            assert!(
                !text.contains(value),
                "{relative}: {value} leaked into {text}"
            );
        }
    }
}

#[test]
fn ignore_rules_drop_known_noise_on_the_fixtures() {
    let found = findings("equivalence/outputs/drift_relevant_attributes/plan.json");
    let kept = apply_ignore_rules(&found, &rules(&["number"]));
    assert_eq!(kept[0].attributes, vec!["string".to_owned()]);
    assert_eq!(kept.len(), 2);
    // Every changed attribute ignored: nothing left, nothing to alert.
    let simple = findings("equivalence/outputs/drift_simple/plan.json");
    assert!(apply_ignore_rules(&simple, &rules(&["string"])).is_empty());
    assert_eq!(
        fingerprint(&apply_ignore_rules(&simple, &rules(&["string"]))),
        ""
    );
    assert_eq!(apply_ignore_rules(&simple, &rules(&["number"])), simple);
}

/// drift_simple with a `tags` map whose `LastSeen` tag a scanner rewrites outside OpenTofu.
fn with_tags(last_seen_after: &str, owner_after: &str) -> Vec<u8> {
    let path = common::fixture("equivalence/outputs/drift_simple/plan.json");
    let mut plan = common::read_json(&path);
    for key in ["resource_drift", "resource_changes"] {
        for rc in plan[key].as_array_mut().unwrap() {
            let change = &mut rc["change"];
            change["before"]["tags"] = json!({"LastSeen": "monday", "Owner": "team-a"});
            change["after"]["tags"] = if key == "resource_drift" {
                json!({"LastSeen": last_seen_after, "Owner": owner_after})
            } else {
                // Applying would put the configured tags back.
                json!({"LastSeen": "monday", "Owner": "team-a"})
            };
            if key == "resource_changes" {
                change["before"]["tags"] =
                    json!({"LastSeen": last_seen_after, "Owner": owner_after});
            }
            // Only the tags drifted in this variant.
            let string = change["before"]["string"].clone();
            change["after"]["string"] = string;
        }
    }
    serde_json::to_vec(&plan).unwrap()
}

#[test]
fn an_ignored_tag_keeps_a_resource_in_sync_and_other_tags_still_count() {
    let noise = drift_findings_json(&with_tags("tuesday", "team-a")).unwrap();
    assert_eq!(
        noise,
        vec![finding(
            "tfcoremock_simple_resource.drift",
            DriftAction::Update,
            &["tags.LastSeen"],
            &[]
        )]
    );
    let rules = rules(&["tags.LastSeen"]);
    assert!(apply_ignore_rules(&noise, &rules).is_empty());
    let real = drift_findings_json(&with_tags("tuesday", "team-b")).unwrap();
    let kept = apply_ignore_rules(&real, &rules);
    assert_eq!(kept[0].attributes, vec!["tags.Owner".to_owned()]);
    // The same drift on the next scan has the same fingerprint; a different one does not.
    let again = apply_ignore_rules(
        &drift_findings_json(&with_tags("wednesday", "team-b")).unwrap(),
        &rules,
    );
    assert_eq!(fingerprint(&kept), fingerprint(&again));
    assert_ne!(fingerprint(&kept), fingerprint(&real));
}

#[test]
fn a_resource_gone_outside_is_a_delete_and_a_replacement_is_a_replace() {
    // drift_simple rewritten as OpenTofu reports a resource deleted outside: the refresh
    // finds it gone, the plan creates it again.
    let path = common::fixture("equivalence/outputs/drift_simple/plan.json");
    let mut plan = common::read_json(&path);
    plan["resource_drift"][0]["change"]["actions"] = json!(["delete"]);
    plan["resource_drift"][0]["change"]["after"] = Value::Null;
    plan["resource_changes"][0]["change"]["actions"] = json!(["create"]);
    plan["resource_changes"][0]["change"]["before"] = Value::Null;
    let gone = drift_findings_json(&serde_json::to_vec(&plan).unwrap()).unwrap();
    assert_eq!(
        gone,
        vec![finding(
            "tfcoremock_simple_resource.drift",
            DriftAction::Delete,
            &[],
            &[]
        )]
    );
    // Ignore rules never hide a deletion.
    assert_eq!(apply_ignore_rules(&gone, &rules(&["*"])), gone);

    let mut plan = common::read_json(&path);
    plan["resource_changes"][0]["change"]["actions"] = json!(["delete", "create"]);
    let replaced = drift_findings_json(&serde_json::to_vec(&plan).unwrap()).unwrap();
    assert_eq!(replaced[0].action, DriftAction::Replace);
    assert_eq!(replaced[0].attributes, vec!["string".to_owned()]);
}

#[test]
fn a_plan_without_changes_has_no_findings() {
    let path = common::fixture("equivalence/outputs/drift_simple/plan.json");
    let mut plan = common::read_json(&path);
    plan["resource_drift"] = json!([]);
    plan["resource_changes"][0]["change"]["actions"] = json!(["no-op"]);
    assert!(
        drift_findings_json(&serde_json::to_vec(&plan).unwrap())
            .unwrap()
            .is_empty()
    );
    assert!(drift_findings_json(b"not json").is_err());
}
