//! `cairn-runner summarize-plan <plan.json>` run as a process on the OpenTofu fixture plans.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `$CAIRN_TOFU_FIXTURES`, or `/work/shared/tofu-fixtures` reached from this crate.
fn fixtures_dir() -> PathBuf {
    let dir = match std::env::var_os("CAIRN_TOFU_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tofu-fixtures"),
    };
    assert!(
        dir.join("plan-json").is_dir(),
        "OpenTofu fixtures not found at {}: set CAIRN_TOFU_FIXTURES to the tofu-fixtures directory",
        dir.display()
    );
    dir
}

#[expect(
    clippy::disallowed_methods,
    reason = "a synchronous test without a tokio runtime to block"
)]
fn summarize(path: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn-runner"))
        .arg("summarize-plan")
        .arg(path)
        .output()
        .unwrap()
}

fn stdout_of(path: &Path) -> String {
    let output = summarize(path);
    assert!(
        output.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn prints_the_summary_of_a_replace() {
    let plan = fixtures_dir().join("equivalence/outputs/local_provider_update/plan.json");
    assert_eq!(
        stdout_of(&plan),
        concat!(
            r#"{"add":1,"change":0,"destroy":1,"replace":["local_file.local_file"],"risk":"high","#,
            r#""resources":[{"address":"local_file.local_file","actions":["delete","create"],"#,
            r#""reason":"replace_because_cannot_update"}]}"#,
            "\n"
        )
    );
}

#[test]
fn prints_low_and_unknown_risks() {
    let dir = fixtures_dir();
    assert_eq!(
        stdout_of(&dir.join("plan-json/show-json/moved/output.json")),
        "{\"add\":0,\"change\":1,\"destroy\":0,\"replace\":[],\"risk\":\"low\",\"resources\":[{\"address\":\"test_instance.baz\",\"actions\":[\"update\"],\"reason\":null}]}\n"
    );
    assert_eq!(
        stdout_of(&dir.join("plan-json/show-json/plan-error/output.json")),
        "{\"add\":0,\"change\":0,\"destroy\":0,\"replace\":[],\"risk\":\"unknown\",\"resources\":[]}\n"
    );
    // Not a plan at all: a state file.
    let state = dir.join("state-json/show-json-state/basic/output.json");
    let summary: serde_json::Value = serde_json::from_str(&stdout_of(&state)).unwrap();
    assert_eq!(summary["risk"], "unknown");
}

#[test]
fn agrees_with_the_library_on_every_fixture_plan() {
    let dir = fixtures_dir();
    let mut plans = Vec::new();
    let mut pending = vec![dir.join("plan-json")];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                plans.push(path);
            }
        }
    }
    for case in std::fs::read_dir(dir.join("equivalence/outputs")).unwrap() {
        let plan = case.unwrap().path().join("plan.json");
        if plan.is_file() {
            plans.push(plan);
        }
    }
    assert_eq!(plans.len(), 54);
    for plan in plans {
        let bytes = std::fs::read(&plan).unwrap();
        let expected = format!("{}\n", cairn_tofu::summarize_plan(&bytes).to_json());
        assert_eq!(stdout_of(&plan), expected, "{}", plan.display());
    }
}

#[test]
fn a_missing_file_fails_and_says_which() {
    let output = summarize(Path::new("/nonexistent/cairn/plan.json"));
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("/nonexistent/cairn/plan.json"), "{stderr}");
}
