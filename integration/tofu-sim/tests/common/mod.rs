//! Shared helpers for the emulator's tests: the `tofu` binary, the OpenTofu fixtures, scratch
//! work directories and a command runner.
// `Work::run` blocks: only for the synchronous tests (tests/coordinator.rs uses tokio::process).
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The OpenTofu fixtures (../shared/tofu-fixtures next to the repository, or $CAIRN_TOFU_FIXTURES).
pub fn fixtures() -> PathBuf {
    cairn_testkit::tofu_fixtures()
}

pub fn tofu_bin() -> &'static str {
    env!("CARGO_BIN_EXE_tofu")
}

/// Copies a directory tree.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// A scratch work directory.
pub struct Work {
    pub dir: tempfile::TempDir,
    pub env: Vec<(String, String)>,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
            .collect()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

impl Work {
    pub fn new() -> Work {
        Work {
            dir: tempfile::tempdir().unwrap(),
            env: Vec::new(),
        }
    }

    pub fn from(src: &Path) -> Work {
        let w = Work::new();
        copy_dir(src, w.path());
        w
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, name: &str, text: &str) {
        let p = self.path().join(name);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path().join(name)).unwrap()
    }

    pub fn set(&mut self, k: &str, v: &str) {
        self.env.push((k.to_owned(), v.to_owned()));
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(tofu_bin());
        c.args(args).current_dir(self.path());
        for (k, _) in std::env::vars() {
            if k.starts_with("TF_") || k.starts_with("TOFU_SIM_") {
                c.env_remove(k);
            }
        }
        c.env("TF_IN_AUTOMATION", "1");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let Output {
            status,
            stdout,
            stderr,
        } = self.command(args).output().unwrap();
        Run {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }

    /// Runs and asserts the exit code.
    pub fn ok(&self, args: &[&str], code: i32) -> Run {
        let r = self.run(args);
        assert_eq!(
            r.code,
            code,
            "tofu {args:?} exited {} (want {code}):\n{}",
            r.code,
            r.all()
        );
        r
    }
}

/// Removes the keys OpenTofu's golden files drop (terraform_version, timestamp).
pub fn strip_volatile(j: &mut serde_json::Value) {
    if let Some(o) = j.as_object_mut() {
        o.remove("terraform_version");
        o.remove("timestamp");
    }
}

pub mod mock_backend;
pub mod test_ca;
