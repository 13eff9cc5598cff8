//! Temporary directories that disappear when the test ends.
pub use tempfile::TempDir;

/// A new empty directory under the system temp dir, named `cairn-test-…`, removed on drop.
pub fn temp_dir() -> TempDir {
    match tempfile::Builder::new().prefix("cairn-test-").tempdir() {
        Ok(dir) => dir,
        Err(err) => panic!("create a temporary directory: {err}"),
    }
}
