//! `init` installs the global subscriber once; calling it again is harmless. (Its own test
//! binary: a global subscriber cannot be uninstalled.)
#![allow(clippy::unwrap_used)]

#[test]
fn init_is_idempotent() {
    assert!(!tracing::dispatcher::has_been_set());
    cairn_telemetry::init("telemetry-test").unwrap();
    assert!(tracing::dispatcher::has_been_set());
    cairn_telemetry::init("telemetry-test").unwrap();
    cairn_telemetry::init("another-name").unwrap();
    // The test helper must not fight a subscriber that is already there.
    cairn_telemetry::init_for_tests();
    tracing::info!("logged once through the JSON subscriber");
}
