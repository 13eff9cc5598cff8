//! Shared set-up of the executor tests: a real Docker engine with the tofu-sim image, the
//! tofu-sim binary, the module library, and commands with captured output.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_runner::executor::{
    CommandOutcome, CommandSpec, DockerConfig, DockerExecutor, Executor, LogLine, ProcessConfig,
    ProcessExecutor, RunId, RunnerInstance, Secret,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub const DEFAULT_IMAGE: &str = "cairn/tofu-sim:dev";

pub fn image() -> String {
    std::env::var("CAIRN_TOFU_IMAGE").unwrap_or_else(|_| DEFAULT_IMAGE.to_owned())
}

/// `CAIRN_TOFU_BIN`, or the static tofu-sim that `deploy/images/tofu-sim/build.sh` builds.
pub fn tofu_bin() -> PathBuf {
    if let Ok(bin) = std::env::var("CAIRN_TOFU_BIN") {
        return PathBuf::from(bin);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("target"));
    let bin = target.join("x86_64-unknown-linux-gnu/release/tofu");
    assert!(
        bin.is_file(),
        "no tofu binary: set CAIRN_TOFU_BIN or run deploy/images/tofu-sim/build.sh (expected {})",
        bin.display()
    );
    bin
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn module_library() -> PathBuf {
    workspace_root().join("modules")
}

pub fn instance(prefix: &str) -> RunnerInstance {
    let id = Uuid::new_v4().simple().to_string();
    RunnerInstance::parse(&format!("{prefix}-{}", &id[..12])).unwrap()
}

pub fn run_id() -> RunId {
    RunId::from(Uuid::new_v4())
}

/// Scratch space for work directories, on a tmpfs as in production.
pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

pub async fn docker_executor(
    instance: RunnerInstance,
    work_root: &Path,
    module_library: PathBuf,
) -> DockerExecutor {
    let config = DockerConfig {
        image: image(),
        instance,
        module_library,
        work_root: work_root.to_path_buf(),
        plugin_cache_volume: "cairn-test-plugin-cache".to_owned(),
        memory_bytes: Some(256 << 20),
        nano_cpus: Some(1_000_000_000),
        pids_limit: Some(256),
        network_mode: Some("host".to_owned()),
        grace: Duration::from_secs(2),
    };
    match DockerExecutor::connect(config).await {
        Ok(e) => e,
        Err(e) => panic!(
            "the Docker executor needs a running Docker engine and the image {} \
             (build it with deploy/images/tofu-sim/build.sh): {:#}",
            image(),
            anyhow::Error::from(e)
        ),
    }
}

pub async fn process_executor(instance: RunnerInstance, scratch_root: &Path) -> ProcessExecutor {
    ProcessExecutor::new(ProcessConfig {
        tofu_bin: tofu_bin(),
        instance,
        scratch_root: scratch_root.to_path_buf(),
        module_library: module_library(),
        plugin_cache_dir: scratch_root.join("plugin-cache"),
        grace: Duration::from_secs(2),
    })
    .await
    .unwrap()
}

/// A command of `run` with nothing in its environment.
pub struct Cmd {
    pub args: Vec<String>,
    pub env: Vec<(String, Secret)>,
    pub plain_env: Vec<(String, String)>,
    pub base_dir: Option<PathBuf>,
    pub timeout: Duration,
    pub cancel: CancellationToken,
}

impl Cmd {
    pub fn new(args: &[&str]) -> Self {
        Self {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: Vec::new(),
            plain_env: Vec::new(),
            base_dir: None,
            timeout: Duration::from_secs(120),
            cancel: CancellationToken::new(),
        }
    }

    pub fn plain(mut self, k: &str, v: &str) -> Self {
        self.plain_env.push((k.to_owned(), v.to_owned()));
        self
    }

    pub fn secret(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.to_owned(), Secret::new(v)));
        self
    }
}

/// Runs `cmd` in `run` and returns its outcome and every output line.
pub async fn exec_cmd(
    exec: &dyn Executor,
    run_id: RunId,
    cmd: Cmd,
) -> (CommandOutcome, Vec<LogLine>) {
    let (tx, mut rx) = mpsc::channel(64);
    let collector = tokio::spawn(async move {
        let mut lines = Vec::new();
        while let Some(l) = rx.recv().await {
            lines.push(l);
        }
        lines
    });
    let spec = CommandSpec {
        run_id,
        attempt: 1,
        args: cmd.args,
        env: cmd.env,
        plain_env: cmd.plain_env,
        base_dir: cmd.base_dir,
        timeout: cmd.timeout,
        cancel: cmd.cancel,
        output: tx,
    };
    let outcome = exec.run(spec).await.unwrap();
    let lines = collector.await.unwrap();
    (outcome, lines)
}

pub fn text(lines: &[LogLine]) -> String {
    lines
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every regular file under `dir` (not following symlinks), with its contents.
pub fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let ty = entry.file_type().unwrap();
            if ty.is_dir() {
                todo.push(entry.path());
            } else if ty.is_file() {
                out.push((entry.path(), std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    out
}

/// A root config using the network module of the library, recording it under `base_dir`.
pub const NETWORK_ROOT: &str = r#"
variable "base_dir" {
  type = string
}

module "net" {
  source   = "./modules/local/network"
  name     = "net1"
  base_dir = var.base_dir
}

output "config_path" {
  value = module.net.config_path
}
"#;

/// A root config with two slow-to-create resources (see `TOFU_SIM_RESOURCE_DELAY`), one after
/// the other: a graceful stop during the first leaves the second unapplied.
pub const SLOW_ROOT: &str = r#"
resource "terraform_data" "first" {
  input = "x"
}

resource "terraform_data" "second" {
  input      = "y"
  depends_on = [terraform_data.first]
}
"#;
