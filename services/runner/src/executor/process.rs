//! The process executor: `CAIRN_TOFU_BIN` run directly, in a process group of its own, in a
//! per-run work directory under a scratch root with a `modules` symlink to the library. For
//! development and for measuring the Docker executor's overhead; it isolates nothing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::error::ExecutorError;
use super::lines::LineSink;
use super::redact::Redactor;
use super::spec::{CommandOutcome, CommandSpec, OutputStream, RunId, RunnerInstance, StopReason};
use super::workdir::WorkDirs;
use super::{BoxFuture, Executor};

/// The `PATH` a tofu process gets (it inherits nothing else from the runner).
const CHILD_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Configuration of a [`ProcessExecutor`].
#[derive(Debug, Clone)]
pub struct ProcessConfig {
    /// The tofu binary (`CAIRN_TOFU_BIN`).
    pub tofu_bin: PathBuf,
    /// This runner's instance id.
    pub instance: RunnerInstance,
    /// Where per-run work directories are made: `<scratch_root>/<instance>/<run_id>`.
    pub scratch_root: PathBuf,
    /// The module library, linked as `modules` into every work directory.
    pub module_library: PathBuf,
    /// The provider plugin cache (`TF_PLUGIN_CACHE_DIR`), shared by all runs.
    pub plugin_cache_dir: PathBuf,
    /// How long tofu gets after SIGINT before SIGKILL.
    pub grace: Duration,
}

/// Runs tofu as a child process of the runner.
#[derive(Debug)]
pub struct ProcessExecutor {
    config: ProcessConfig,
    dirs: WorkDirs,
    pgid_dir: PathBuf,
}

impl ProcessExecutor {
    /// An executor with `config`; creates the plugin cache directory.
    pub async fn new(config: ProcessConfig) -> Result<Self, ExecutorError> {
        if !config.module_library.is_absolute() || !config.tofu_bin.is_absolute() {
            return Err(ExecutorError::Config(
                "the tofu binary and the module library must be absolute paths".into(),
            ));
        }
        tokio::fs::create_dir_all(&config.plugin_cache_dir)
            .await
            .map_err(ExecutorError::io(
                "create plugin cache",
                &config.plugin_cache_dir,
            ))?;
        let dirs = WorkDirs::new(&config.scratch_root, &config.instance);
        let pgid_dir = pgid_dir(&config.scratch_root, &config.instance);
        tokio::fs::create_dir_all(&pgid_dir)
            .await
            .map_err(ExecutorError::io(
                "create process group registry",
                &pgid_dir,
            ))?;
        Ok(Self {
            config,
            dirs,
            pgid_dir,
        })
    }

    async fn run_command(&self, spec: CommandSpec) -> Result<CommandOutcome, ExecutorError> {
        let dir = self.dirs.existing(&spec.run_id).await?;
        let redactor = Redactor::new(spec.env.iter().map(|(_, v)| v.expose()))
            .map_err(ExecutorError::Redaction)?;
        let bin = &self.config.tofu_bin;
        let mut cmd = Command::new(bin);
        cmd.args(&spec.args)
            .current_dir(&dir)
            .env_clear()
            .env("PATH", CHILD_PATH)
            .env("HOME", &dir)
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("TF_PLUGIN_CACHE_DIR", &self.config.plugin_cache_dir)
            .envs(spec.plain_env.iter().map(|(k, v)| (k, v)))
            .envs(spec.env.iter().map(|(k, v)| (k, v.expose())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|source| ExecutorError::Spawn {
            bin: bin.clone(),
            source,
        })?;
        let pgid = child.id().and_then(|id| i32::try_from(id).ok());
        let registered = match pgid {
            Some(pgid) => self.register(pgid).await,
            None => None,
        };
        let readers = [
            child.stdout.take().map(|s| {
                pump(
                    s,
                    LineSink::new(OutputStream::Stdout, redactor.clone(), spec.output.clone()),
                )
            }),
            child.stderr.take().map(|s| {
                pump(
                    s,
                    LineSink::new(OutputStream::Stderr, redactor.clone(), spec.output.clone()),
                )
            }),
        ];

        let mut outcome = CommandOutcome {
            exit_code: None,
            timed_out: false,
            cancelled: false,
            killed: false,
        };
        let wait_error = |source| ExecutorError::Spawn {
            bin: bin.clone(),
            source,
        };
        let status = tokio::select! {
            status = child.wait() => status.map_err(wait_error)?,
            reason = spec.stop_requested() => {
                match reason {
                    StopReason::TimedOut => outcome.timed_out = true,
                    StopReason::Cancelled => outcome.cancelled = true,
                }
                if let Some(pgid) = pgid {
                    signal_group(pgid, Signal::INT, "SIGINT")?;
                }
                match tokio::time::timeout(self.config.grace, child.wait()).await {
                    Ok(status) => status.map_err(wait_error)?,
                    Err(_) => {
                        outcome.killed = true;
                        match pgid {
                            Some(pgid) => signal_group(pgid, Signal::KILL, "SIGKILL")?,
                            None => child.start_kill().map_err(wait_error)?,
                        }
                        child.wait().await.map_err(wait_error)?
                    }
                }
            }
        };
        // The group may have children left after tofu itself exited (provider plugins).
        if let Some(pgid) = pgid {
            let _ = kill_process_group_quiet(pgid);
        }
        outcome.exit_code = status.code().map(i64::from).or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            status.signal().map(|s| 128 + i64::from(s))
        });
        for reader in readers.into_iter().flatten() {
            let _ = reader.await;
        }
        if let Some(path) = registered {
            let _ = tokio::fs::remove_file(path).await;
        }
        Ok(outcome)
    }

    /// Records a running process group of this instance, so that a restarted runner can
    /// kill it. Best effort: a failure only means the group cannot be reaped later.
    async fn register(&self, pgid: i32) -> Option<PathBuf> {
        let path = self.pgid_dir.join(pgid.to_string());
        let bin = self.config.tofu_bin.to_string_lossy().into_owned();
        match tokio::fs::write(&path, bin).await {
            Ok(()) => Some(path),
            Err(e) => {
                tracing::warn!(error = %e, pgid, "cannot record the tofu process group");
                None
            }
        }
    }
}

fn pgid_dir(root: &Path, instance: &RunnerInstance) -> PathBuf {
    root.join(format!(".{}.pgids", instance.as_str()))
}

fn signal_group(pgid: i32, signal: Signal, name: &'static str) -> Result<(), ExecutorError> {
    let Some(pid) = Pid::from_raw(pgid) else {
        return Ok(());
    };
    match kill_process_group(pid, signal) {
        Ok(()) => Ok(()),
        // The group is already gone.
        Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(e) => Err(ExecutorError::Signal {
            signal: name,
            pgid,
            source: e.into(),
        }),
    }
}

fn kill_process_group_quiet(pgid: i32) -> Result<(), ExecutorError> {
    signal_group(pgid, Signal::KILL, "SIGKILL")
}

fn pump(
    mut from: impl AsyncRead + Unpin + Send + 'static,
    mut sink: LineSink,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => sink.push(&buf[..n]).await,
            }
        }
        sink.finish().await;
    })
}

/// Whether `/proc/<pid>/exe` is `bin`: a recorded process group id is only killed while its
/// leader is still that binary (the id may have been reused since).
async fn leader_runs(pid: i32, bin: &str) -> bool {
    let exe = match tokio::fs::read_link(format!("/proc/{pid}/exe")).await {
        Ok(exe) => exe,
        Err(_) => return false,
    };
    let bin = Path::new(bin);
    let bin = tokio::fs::canonicalize(bin)
        .await
        .unwrap_or_else(|_| bin.to_path_buf());
    exe == bin
}

impl Executor for ProcessExecutor {
    fn prepare_run<'a>(&'a self, run_id: &'a RunId) -> BoxFuture<'a, Result<(), ExecutorError>> {
        Box::pin(async move {
            let dir = self.dirs.create_empty(run_id).await?;
            let link = dir.join("modules");
            tokio::fs::symlink(&self.config.module_library, &link)
                .await
                .map_err(ExecutorError::io("link the module library", &link))
        })
    }

    fn work_dir(&self, run_id: &RunId) -> PathBuf {
        self.dirs.path(run_id)
    }

    fn run(&self, spec: CommandSpec) -> BoxFuture<'_, Result<CommandOutcome, ExecutorError>> {
        Box::pin(self.run_command(spec))
    }

    fn cleanup_run<'a>(&'a self, run_id: &'a RunId) -> BoxFuture<'a, Result<(), ExecutorError>> {
        Box::pin(self.dirs.remove(run_id))
    }

    fn reap_orphans<'a>(
        &'a self,
        instance: &'a RunnerInstance,
    ) -> BoxFuture<'a, Result<usize, ExecutorError>> {
        Box::pin(async move {
            let dir = pgid_dir(&self.config.scratch_root, instance);
            let mut entries = match tokio::fs::read_dir(&dir).await {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
                Err(e) => return Err(ExecutorError::io("list process groups", &dir)(e)),
            };
            let mut reaped = 0;
            while let Some(entry) = entries
                .next_entry()
                .await
                .map_err(ExecutorError::io("list process groups", &dir))?
            {
                let path = entry.path();
                let pgid = entry.file_name().to_string_lossy().parse::<i32>().ok();
                let bin = tokio::fs::read_to_string(&path).await.unwrap_or_default();
                if let Some(pgid) = pgid
                    && leader_runs(pgid, &bin).await
                {
                    signal_group(pgid, Signal::KILL, "SIGKILL")?;
                    reaped += 1;
                }
                let _ = tokio::fs::remove_file(&path).await;
            }
            WorkDirs::new(&self.config.scratch_root, instance)
                .remove_all()
                .await?;
            Ok(reaped)
        })
    }
}
