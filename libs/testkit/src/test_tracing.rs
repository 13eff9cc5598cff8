//! Tracing for tests: initialised once per test binary, silent unless `TEST_LOG=1`.

/// Installs the test subscriber of `cairn_telemetry` (once per binary; prints through the
/// test harness only when `TEST_LOG=1` or `true`, filtered by `RUST_LOG`). Call it at the
/// start of every test; repeated calls do nothing.
pub fn init_tracing() {
    cairn_telemetry::init_for_tests();
}
