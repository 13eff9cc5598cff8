//! Diff of two snapshots: add, update with the changed inputs, remove, unchanged.
#![allow(clippy::unwrap_used)]
mod common;

use cairn_templating::{Change, diff, resolve};
use common::*;
use serde_json::json;

#[test]
fn add_update_remove_unchanged() {
    let staging = resolve_webapp("staging");
    let all_added = diff(None, &staging);
    assert!(all_added.iter().all(|d| d.change == Change::Add));
    assert_eq!(all_added.len(), 3);

    let same = diff(Some(&staging), &staging);
    assert!(
        same.iter().all(|d| d.change == Change::Unchanged),
        "{same:?}"
    );

    // production: replicas and size_gb change; net is unchanged.
    let prod = resolve_webapp("production");
    let d = diff(Some(&staging), &prod);
    let by = |n: &str| d.iter().find(|x| x.name == n).unwrap().change.clone();
    assert_eq!(by("net"), Change::Unchanged);
    assert_eq!(
        by("db"),
        Change::Update {
            changed_inputs: vec!["size_gb".into()],
            module_changed: false
        }
    );
    assert_eq!(
        by("app"),
        Change::Update {
            changed_inputs: vec!["replicas".into()],
            module_changed: false
        }
    );

    // A changed sensitive reference is an update of the input that uses it.
    let t = parse(&webapp_text());
    let mut i = input("staging");
    i.parameters
        .insert("db_password".into(), json!("arn:rotated"));
    let rotated = resolve(&t, &library(), &i).unwrap();
    let d = diff(Some(&staging), &rotated);
    assert_eq!(
        d.iter().find(|x| x.name == "db").unwrap().change,
        Change::Update {
            changed_inputs: vec!["password_ref".into()],
            module_changed: false
        }
    );

    // Removing the app: a remove, listed after the kept resources.
    let text = webapp_text();
    let cut = text.find("  app:\n").unwrap();
    let t = parse(&text[..cut]);
    let fewer = resolve(&t, &library(), &input("staging")).unwrap();
    let d = diff(Some(&staging), &fewer);
    assert_eq!(d.last().unwrap().name, "app");
    assert_eq!(d.last().unwrap().change, Change::Remove);
    assert_eq!(d.len(), 3);
}
