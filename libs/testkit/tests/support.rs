//! The small helpers: temp dirs are removed on drop and tracing can be initialised from
//! every test.
#![allow(clippy::unwrap_used)]

use cairn_testkit::{init_tracing, temp_dir};

#[test]
fn temp_dir_is_empty_and_removed_on_drop() {
    let dir = temp_dir();
    let path = dir.path().to_owned();
    assert!(path.is_dir());
    assert!(
        path.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("cairn-test-")
    );
    assert_eq!(std::fs::read_dir(&path).unwrap().count(), 0);
    std::fs::write(path.join("f"), b"x").unwrap();
    drop(dir);
    assert!(!path.exists());
}

#[test]
fn init_tracing_can_be_called_repeatedly() {
    init_tracing();
    init_tracing();
    // Nothing else in this binary installs a subscriber: one exists exactly when asked for.
    let asked = matches!(
        std::env::var("TEST_LOG").as_deref().map(str::trim),
        Ok("1" | "true")
    );
    assert_eq!(tracing::dispatcher::has_been_set(), asked);
    tracing::info!("visible only with TEST_LOG=1");
}
