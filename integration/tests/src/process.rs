//! One service process: its program, arguments and environment, started with its output
//! appended to a log file, ready once each of its listeners accepts connections, and stopped
//! the hard way (SIGKILL, as a crash) or the graceful way (SIGTERM).
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

/// A free loopback port (bound, then released for the service to bind).
pub fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
}

#[derive(Debug)]
pub struct Process {
    pub name: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// Ready once every one of these accepts connections.
    listens: Vec<SocketAddr>,
    log: PathBuf,
    child: Option<Child>,
    /// How many times it was started.
    pub starts: u32,
}

impl Process {
    pub fn new(name: &str, program: PathBuf, log_dir: &Path) -> Process {
        Process {
            name: name.to_owned(),
            program,
            args: Vec::new(),
            env: Vec::new(),
            listens: Vec::new(),
            log: log_dir.join(format!("{name}.log")),
            child: None,
            starts: 0,
        }
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Process {
        self.args.push(arg.into());
        self
    }

    pub fn env(mut self, key: &str, value: impl Into<String>) -> Process {
        self.env.push((key.to_owned(), value.into()));
        self
    }

    pub fn listens(mut self, addr: SocketAddr) -> Process {
        self.listens.push(addr);
        self
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Starts it and waits until it listens (or fails with its last log lines).
    pub async fn start(&mut self) -> anyhow::Result<()> {
        if self.child.is_some() {
            bail!("{} is already running", self.name);
        }
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("open {}", self.log.display()))?;
        self.starts += 1;
        writeln!(log, "===== start {} of {}", self.starts, self.name)?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        let child = cmd
            .spawn()
            .with_context(|| format!("spawn {}", self.program.display()))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut all = true;
            for addr in &self.listens {
                if tokio::net::TcpStream::connect(addr).await.is_err() {
                    all = false;
                    break;
                }
            }
            if all {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                bail!(
                    "{} exited during start-up ({status}):\n{}",
                    self.name,
                    self.log_tail(30)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "{} did not listen on {:?} within 60 s:\n{}",
                    self.name,
                    self.listens,
                    self.log_tail(30)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL (a crash) and wait until it is gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited after `grace`.
    pub async fn stop(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = child.id() {
            let _ = tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        if tokio::time::timeout(grace, child.wait()).await.is_err() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// Kill (SIGKILL) and start again.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill().await;
        self.start().await
    }

    /// True while the process runs (false after it exited on its own).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(None)) => true,
            Some(_) => {
                self.child = None;
                false
            }
            None => false,
        }
    }

    /// The last `n` lines of its log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}
