//! Shared helpers for the cairn-tofu tests: where the OpenTofu fixtures are and how to read
//! them independently of the code under test.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `$CAIRN_TOFU_FIXTURES`, or `/work/shared/tofu-fixtures` reached from this crate
/// (`libs/tofu` → `../../../shared/tofu-fixtures`).
pub fn fixtures_dir() -> PathBuf {
    let dir = match std::env::var_os("CAIRN_TOFU_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tofu-fixtures"),
    };
    assert!(
        dir.join("state-files").is_dir(),
        "OpenTofu fixtures not found at {}: set CAIRN_TOFU_FIXTURES to the tofu-fixtures directory",
        dir.display()
    );
    dir
}

pub fn fixture(relative: &str) -> PathBuf {
    fixtures_dir().join(relative)
}

pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The file decoded as a plain JSON value: the oracle the parsed models are compared with.
pub fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&read(path)).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// Files directly inside `dir`, sorted.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Every file below `dir` whose name ends with `suffix`, sorted.
pub fn files_below(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

pub fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}
