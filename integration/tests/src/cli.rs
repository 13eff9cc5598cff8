//! The `cairn` binary as a user runs it: its own config directory (contexts and stored
//! credentials), an optional `CAIRN_API_TOKEN`, stdin for passwords, and a bound on every
//! call so a hung command fails the test instead of stalling it.
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// What one `cairn` invocation did.
#[derive(Debug, Clone)]
pub struct Run {
    pub args: Vec<String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// It succeeded (exit 0), else the test fails showing what it printed.
    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code,
            0,
            "cairn {:?} failed:\n{}",
            self.args,
            self.describe()
        );
        self
    }

    /// It exited with `code`.
    #[track_caller]
    pub fn code(self, code: i32) -> Run {
        assert_eq!(
            self.code,
            code,
            "cairn {:?}: expected exit {code}:\n{}",
            self.args,
            self.describe()
        );
        self
    }

    /// stdout parsed as one JSON document.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "cairn {:?} printed no JSON ({e}):\n{}",
                self.args,
                self.describe()
            )
        })
    }

    /// A failure reported as exactly one `error: …` line on stderr, with a non-zero exit.
    #[track_caller]
    pub fn one_line_error(&self) -> &str {
        assert_ne!(
            self.code,
            0,
            "cairn {:?} succeeded:\n{}",
            self.args,
            self.describe()
        );
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "cairn {:?}: not one line:\n{}",
            self.args,
            self.describe()
        );
        assert!(lines[0].starts_with("error: "), "{}", self.describe());
        lines[0]
    }

    pub fn describe(&self) -> String {
        format!(
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// A `cairn` user: a config directory of their own.
#[derive(Debug, Clone)]
pub struct Cli {
    bin: PathBuf,
    config_dir: PathBuf,
    token: Option<String>,
}

impl Cli {
    pub fn new(bin: PathBuf, config_dir: &Path) -> Cli {
        std::fs::create_dir_all(config_dir).expect("create the CLI's config dir");
        Cli {
            bin,
            config_dir: config_dir.to_owned(),
            token: None,
        }
    }

    /// The same user, with `CAIRN_API_TOKEN` set (no stored login needed).
    pub fn with_token(&self, token: &str) -> Cli {
        Cli {
            token: Some(token.to_owned()),
            ..self.clone()
        }
    }

    pub fn config_dir(&self) -> &Path {
        &self.config_dir
    }

    pub async fn run(&self, args: &[&str]) -> Run {
        self.run_with_stdin(args, None).await
    }

    /// `args --output json`, which must succeed and print JSON.
    pub async fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["--output", "json"]);
        self.run(&all).await.ok().json()
    }

    pub async fn run_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Run {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.args(args)
            .env("CAIRN_CONFIG_DIR", &self.config_dir)
            .env_remove("CAIRN_API_TOKEN")
            .env_remove("CAIRN_CONTEXT")
            .env_remove("CAIRN_TENANT")
            .env("NO_COLOR", "1")
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(t) = &self.token {
            cmd.env("CAIRN_API_TOKEN", t);
        }
        let mut child = cmd.spawn().expect("spawn cairn");
        if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
            input.write_all(text.as_bytes()).await.expect("write stdin");
            drop(input);
        }
        let out = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("cairn {args:?} did not finish within 5 minutes"))
            .expect("run cairn");
        Run {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}
