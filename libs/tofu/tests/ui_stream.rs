//! Every line of the fixtures' machine-readable UI streams (`plan -json`, `apply -json`,
//! and the equivalence tests' collected apply streams) read with the stream model.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use cairn_tofu::{UiEvent, UiMessage, UiStreamError, parse_ui_line};
use serde_json::{Value, json};

/// The `type` each decoded event came from.
fn type_of(event: &UiEvent) -> Option<&'static str> {
    Some(match event {
        UiEvent::Version(_) => "version",
        UiEvent::Log => "log",
        UiEvent::Diagnostic(_) => "diagnostic",
        UiEvent::PlannedChange(_) => "planned_change",
        UiEvent::ResourceDrift(_) => "resource_drift",
        UiEvent::ChangeSummary(_) => "change_summary",
        UiEvent::Outputs(_) => "outputs",
        UiEvent::ApplyStart(_) => "apply_start",
        UiEvent::ApplyProgress(_) => "apply_progress",
        UiEvent::ApplyComplete(_) => "apply_complete",
        UiEvent::ApplyErrored(_) => "apply_errored",
        UiEvent::RefreshStart(_) => "refresh_start",
        UiEvent::RefreshComplete(_) => "refresh_complete",
        UiEvent::ProvisionStart(_) => "provision_start",
        UiEvent::ProvisionProgress(_) => "provision_progress",
        UiEvent::ProvisionComplete(_) => "provision_complete",
        UiEvent::ProvisionErrored(_) => "provision_errored",
        UiEvent::Other(_) => return None,
    })
}

fn all_stream_messages() -> Vec<(String, Value)> {
    let dir = common::fixtures_dir();
    let mut messages = Vec::new();
    for suffix in [".jsonlog", ".log"] {
        for path in common::files_below(&dir.join("ui-stream"), suffix) {
            let text = String::from_utf8(common::read(&path)).unwrap();
            for (n, line) in text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                let name = format!("{}:{}", path.display(), n + 1);
                messages.push((name, serde_json::from_str(line).unwrap()));
            }
        }
    }
    for path in common::files_below(&dir.join("equivalence/outputs"), "apply.json") {
        let array: Vec<Value> = serde_json::from_slice(&common::read(&path)).unwrap();
        for (n, message) in array.into_iter().enumerate() {
            messages.push((format!("{}[{n}]", path.display()), message));
        }
    }
    messages
}

#[test]
fn every_fixture_line_decodes_to_its_type() {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (name, raw) in all_stream_messages() {
        let line = serde_json::to_string(&raw).unwrap();
        let message = parse_ui_line(&line).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(message, UiMessage::from_value(raw.clone()).unwrap());
        assert_eq!(message.level, raw["@level"].as_str().unwrap(), "{name}");
        assert_eq!(message.message, raw["@message"].as_str().unwrap(), "{name}");
        let kind = raw["type"].as_str().unwrap();
        assert_eq!(message.message_type.as_deref(), Some(kind), "{name}");
        assert_eq!(
            type_of(&message.event),
            Some(kind),
            "{name}: decoded as {:?}",
            message.event
        );
        match &message.event {
            UiEvent::ChangeSummary(s) => {
                assert_eq!(s.add, raw["changes"]["add"].as_u64().unwrap(), "{name}");
                assert_eq!(
                    s.remove,
                    raw["changes"]["remove"].as_u64().unwrap(),
                    "{name}"
                );
                assert_eq!(s.operation, raw["changes"]["operation"].as_str().unwrap());
            }
            UiEvent::ApplyStart(h) | UiEvent::ApplyComplete(h) | UiEvent::ApplyErrored(h) => {
                assert_eq!(
                    h.resource.addr,
                    raw["hook"]["resource"]["addr"].as_str().unwrap()
                );
            }
            UiEvent::Diagnostic(d) => {
                assert_eq!(d.severity, raw["diagnostic"]["severity"].as_str().unwrap());
            }
            UiEvent::Outputs(outputs) => {
                assert_eq!(
                    outputs.len(),
                    raw["outputs"].as_object().unwrap().len(),
                    "{name}"
                );
            }
            _ => {}
        }
        *seen.entry(kind.to_owned()).or_default() += 1;
    }
    for kind in [
        "version",
        "planned_change",
        "change_summary",
        "apply_start",
        "apply_complete",
        "apply_errored",
        "outputs",
        "diagnostic",
        "provision_start",
        "provision_errored",
        "refresh_start",
        "refresh_complete",
    ] {
        assert!(
            seen.contains_key(kind),
            "no {kind} line in the fixtures: {seen:?}"
        );
    }
}

#[test]
fn sensitive_outputs_and_terraform_summaries_are_read() {
    let path = common::fixture("ui-stream/terraform-generated/apply-json-with-outputs/apply.log");
    let text = String::from_utf8(common::read(&path)).unwrap();
    let outputs = text
        .lines()
        .map(|l| parse_ui_line(l).unwrap())
        .find_map(|m| match m.event {
            UiEvent::Outputs(outputs) => Some(outputs),
            _ => None,
        })
        .unwrap();
    assert!(outputs["secret"].sensitive);
    assert!(!outputs["simple"].sensitive);
    let summary = text
        .lines()
        .map(|l| parse_ui_line(l).unwrap())
        .find_map(|m| match m.event {
            UiEvent::ChangeSummary(s) => Some(s),
            _ => None,
        })
        .unwrap();
    // Terraform 1.3 writes no import/forget counts.
    assert_eq!((summary.add, summary.import, summary.forget), (1, 0, 0));
    assert_eq!(summary.operation, "apply");
}

#[test]
fn unknown_types_and_fields_are_kept() {
    let line = r#"{"@level":"info","@message":"m","@module":"tofu.ui","@timestamp":"2026-01-01T00:00:00Z","type":"ephemeral_open_start","hook":{"x":1},"extra":true}"#;
    let message = parse_ui_line(line).unwrap();
    assert_eq!(
        message.message_type.as_deref(),
        Some("ephemeral_open_start")
    );
    assert_eq!(message.timestamp.as_deref(), Some("2026-01-01T00:00:00Z"));
    let UiEvent::Other(fields) = message.event else {
        panic!("not kept: {:?}", message.event);
    };
    assert_eq!(json!(fields), json!({"hook": {"x": 1}, "extra": true}));

    let line = r#"{"@level":"info","@message":"Plan: 1 to add","type":"change_summary","changes":{"add":1,"change":0,"remove":0,"operation":"plan","destroy_later":2}}"#;
    let UiEvent::ChangeSummary(summary) = parse_ui_line(line).unwrap().event else {
        panic!("not a summary");
    };
    assert_eq!(summary.extra["destroy_later"], json!(2));

    let log = parse_ui_line(r#"{"@level":"warn","@message":"w","type":"log"}"#).unwrap();
    assert_eq!(log.event, UiEvent::Log);
}

#[test]
fn malformed_lines_are_errors() {
    assert!(matches!(
        parse_ui_line("{"),
        Err(UiStreamError::NotJson { .. })
    ));
    assert_eq!(parse_ui_line("[1]"), Err(UiStreamError::NotAnObject));
    let error = parse_ui_line(r#"{"type":"change_summary","changes":{"add":"x"}}"#).unwrap_err();
    assert!(
        matches!(&error, UiStreamError::Schema { message_type, .. } if message_type == "change_summary"),
        "{error:?}"
    );
}
