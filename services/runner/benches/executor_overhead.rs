//! Per-command overhead of the Docker executor against the process executor: the p50 of
//! `tofu version` and of a small `plan` through each, in the same run, and their ratio.
//!
//! `cargo bench -p cairn-runner --bench executor_overhead` (needs the Docker engine, the image
//! `CAIRN_TOFU_IMAGE` (default cairn/tofu-sim:dev) and `CAIRN_TOFU_BIN` (default: the static
//! tofu-sim built by deploy/images/tofu-sim/build.sh)). `BENCH_ITERATIONS` (default 20).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use cairn_runner::executor::{
    CommandSpec, DockerConfig, DockerExecutor, Executor, ProcessConfig, ProcessExecutor, RunId,
    RunnerInstance,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const ROOT: &str = r#"
resource "terraform_data" "a" {
  input = "a"
}

resource "terraform_data" "b" {
  input = terraform_data.a.output
}
"#;

async fn run(exec: &dyn Executor, run_id: RunId, args: &[&str]) -> anyhow::Result<Duration> {
    let (tx, mut rx) = mpsc::channel(256);
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let started = Instant::now();
    let outcome = exec
        .run(CommandSpec {
            run_id,
            attempt: 1,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: Vec::new(),
            plain_env: Vec::new(),
            base_dir: None,
            timeout: Duration::from_secs(120),
            cancel: CancellationToken::new(),
            output: tx,
        })
        .await?;
    let took = started.elapsed();
    drain.await?;
    if outcome.exit_code != Some(0) {
        bail!("tofu {args:?} ended with {outcome:?}");
    }
    Ok(took)
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

async fn measure(exec: &dyn Executor, iterations: usize) -> anyhow::Result<(Duration, Duration)> {
    let run_id = RunId::from(Uuid::new_v4());
    exec.prepare_run(&run_id).await?;
    std::fs::write(exec.work_dir(&run_id).join("main.tf"), ROOT)?;
    run(exec, run_id, &["init", "-input=false"]).await?;
    // One warm-up of each, then the samples.
    run(exec, run_id, &["version"]).await?;
    run(exec, run_id, &["plan", "-input=false"]).await?;
    let mut version = Vec::new();
    let mut plan = Vec::new();
    for _ in 0..iterations {
        version.push(run(exec, run_id, &["version"]).await?);
        plan.push(run(exec, run_id, &["plan", "-input=false"]).await?);
    }
    exec.cleanup_run(&run_id).await?;
    Ok((p50(version), p50(plan)))
}

fn tofu_bin() -> anyhow::Result<PathBuf> {
    if let Ok(bin) = std::env::var("CAIRN_TOFU_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    let bin = target.join("x86_64-unknown-linux-gnu/release/tofu");
    if !bin.is_file() {
        bail!("set CAIRN_TOFU_BIN or run deploy/images/tofu-sim/build.sh");
    }
    Ok(bin)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .map(|v| v.parse())
        .transpose()
        .context("BENCH_ITERATIONS")?
        .unwrap_or(20);
    let library = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../modules")
        .canonicalize()?;
    let scratch = tempfile::tempdir_in("/dev/shm")?;
    let instance = RunnerInstance::parse(&format!(
        "bench-{}",
        &Uuid::new_v4().simple().to_string()[..8]
    ))?;
    let image =
        std::env::var("CAIRN_TOFU_IMAGE").unwrap_or_else(|_| "cairn/tofu-sim:dev".to_owned());
    let docker = DockerExecutor::connect(DockerConfig {
        image: image.clone(),
        instance: instance.clone(),
        module_library: library.clone(),
        work_root: scratch.path().to_path_buf(),
        plugin_cache_volume: "cairn-bench-plugin-cache".to_owned(),
        memory_bytes: Some(512 << 20),
        nano_cpus: Some(1_000_000_000),
        pids_limit: Some(256),
        network_mode: Some("host".to_owned()),
        grace: Duration::from_secs(5),
    })
    .await
    .context("connect to Docker")?;
    let process = ProcessExecutor::new(ProcessConfig {
        tofu_bin: tofu_bin()?,
        instance,
        scratch_root: scratch.path().join("process"),
        module_library: library,
        plugin_cache_dir: scratch.path().join("plugin-cache"),
        grace: Duration::from_secs(5),
    })
    .await?;

    let (pv, pp) = measure(&process, iterations).await?;
    let (dv, dp) = measure(&docker, iterations).await?;
    println!("executor overhead, p50 of {iterations} runs each (image {image})");
    println!("| command | process | docker | docker/process | docker − process |");
    println!("|---|---|---|---|---|");
    for (name, p, d) in [
        ("tofu version", pv, dv),
        ("tofu plan (2 resources)", pp, dp),
    ] {
        println!(
            "| {name} | {} | {} | {:.1}× | {} |",
            ms(p),
            ms(d),
            d.as_secs_f64() / p.as_secs_f64(),
            ms(d.saturating_sub(p))
        );
    }
    Ok(())
}
