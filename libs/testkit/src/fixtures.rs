//! Where the real OpenTofu outputs the tests compare against live.
use std::path::PathBuf;

/// The variable that overrides the fixtures folder.
pub const TOFU_FIXTURES_VAR: &str = "CAIRN_TOFU_FIXTURES";

/// `$CAIRN_TOFU_FIXTURES`, or `../shared/tofu-fixtures` next to the repository. Panics with
/// the variable's name when the folder is missing, so a test never passes without its data.
pub fn tofu_fixtures() -> PathBuf {
    let dir = match std::env::var_os(TOFU_FIXTURES_VAR) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tofu-fixtures"),
    };
    assert!(
        dir.join("state-files").is_dir() && dir.join("equivalence").is_dir(),
        "OpenTofu fixtures not found at {}: set {TOFU_FIXTURES_VAR} to the tofu-fixtures folder",
        dir.display()
    );
    dir
}
