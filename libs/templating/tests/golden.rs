//! Golden snapshots: the fixture template and modules/examples resolved with fixed
//! parameters, environment and target settings, plus every rendered root config, compared
//! with committed JSON. `UPDATE_GOLDEN=1 cargo test -p cairn-templating --test golden`
//! rewrites them after an intended change.
#![allow(clippy::unwrap_used)]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn_templating::{
    Library, Limits, ResolveInput, Snapshot, UpstreamOutputs, check, render, resolve,
};
use common::*;
use serde_json::{Value, json};

/// Stand-in outputs for every upstream: `"<resource>.<output>"`, so each binding is visible
/// in the rendered config.
fn synthetic_upstreams(snapshot: &Snapshot) -> UpstreamOutputs {
    snapshot
        .resources
        .iter()
        .map(|r| {
            let outputs = r
                .outputs
                .keys()
                .map(|o| (o.clone(), json!(format!("{}.{o}", r.name))))
                .collect::<BTreeMap<_, _>>();
            (r.name.clone(), outputs)
        })
        .collect()
}

fn golden_document(snapshot: &Snapshot) -> String {
    let upstream = synthetic_upstreams(snapshot);
    let mut configs = serde_json::Map::new();
    for r in &snapshot.resources {
        let rendered = render(r, &upstream).unwrap();
        configs.insert(
            r.name.clone(),
            json!({
                "config_hash": rendered.config_hash,
                "tf_json": serde_json::from_str::<Value>(&rendered.tf_json).unwrap(),
            }),
        );
    }
    let doc = json!({
        "snapshot_hash": snapshot.hash(),
        "snapshot": serde_json::from_str::<Value>(&snapshot.canonical_json()).unwrap(),
        "root_configs": configs,
    });
    let mut text = serde_json::to_string_pretty(&doc).unwrap();
    text.push('\n');
    text
}

fn compare(golden: &Path, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(golden, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(golden).unwrap_or_else(|e| {
        panic!(
            "read {}: {e}; create it with UPDATE_GOLDEN=1",
            golden.display()
        )
    });
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .map_or(expected.lines().count().min(actual.lines().count()), |i| i);
        panic!(
            "{} differs from the resolved snapshot at line {}:\n  golden: {:?}\n  actual: {:?}\nrerun with UPDATE_GOLDEN=1 if the change is intended",
            golden.display(),
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

fn golden_dir() -> PathBuf {
    fixtures().join("golden")
}

#[test]
fn fixture_template_golden() {
    for env in ["staging", "production"] {
        let snapshot = resolve_webapp(env);
        compare(
            &golden_dir().join(format!("webapp.{env}.json")),
            &golden_document(&snapshot),
        );
    }
}

/// The demo in modules/examples against the real module library.
#[test]
fn examples_golden() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let library = Library::load_dir(&repo.join("modules")).unwrap();
    let examples = repo.join("modules/examples");
    let mut found = 0;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&examples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("template.yaml").is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(dir.join("template.yaml")).unwrap();
        let template = check(&text, &Limits::default(), &library)
            .unwrap_or_else(|p| panic!("modules/examples/{name}: {p}"));
        // Every sensitive parameter gets a fixed reference.
        let parameters = template
            .parameters
            .iter()
            .filter(|p| p.sensitive)
            .map(|p| (p.name.clone(), json!(format!("ref:golden/{}", p.name))))
            .collect();
        for env in ["development", "production"] {
            let input = ResolveInput {
                template_version: cairn_templating::content_hash(&text),
                tenant_id: "00000000-0000-0000-0000-00000000000a".into(),
                instance_id: "00000000-0000-0000-0000-00000000000b".into(),
                instance_name: format!("{name}-demo"),
                environment: env.into(),
                parameters: BTreeMap::clone(&parameters),
                target: BTreeMap::from([("base_dir".into(), json!("/var/lib/cairn/demo"))]),
            };
            let snapshot = resolve(&template, &library, &input)
                .unwrap_or_else(|p| panic!("modules/examples/{name} ({env}): {p}"));
            // Resolution is deterministic: twice gives the same bytes.
            let again = resolve(&template, &library, &input).unwrap();
            assert_eq!(snapshot.canonical_json(), again.canonical_json());
            compare(
                &golden_dir().join(format!("examples.{name}.{env}.json")),
                &golden_document(&snapshot),
            );
            found += 1;
        }
    }
    assert!(found > 0, "no modules/examples/*/template.yaml found");
}
