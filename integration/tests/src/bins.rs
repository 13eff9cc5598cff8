//! The platform's binaries, where the workspace build of these tests left them
//! (`<target>/<profile>/`). `cargo nextest run --workspace` (the README's test command) builds
//! every service binary, since each service crate has integration tests of its own.
use std::path::PathBuf;

/// The directory holding the binaries built with this test (…/target/debug).
pub fn dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's own path");
    // <target>/debug/deps/<test binary>
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lives in <target>/<profile>/deps")
        .to_owned()
}

/// The binary `name`, which must have been built.
pub fn path(name: &str) -> PathBuf {
    let p = dir().join(name);
    assert!(
        p.is_file(),
        "{} is not built: run deploy/local/test.sh, or `cargo build --workspace --tests` before \
         running these tests alone",
        p.display()
    );
    p
}
