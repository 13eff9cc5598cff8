//! `cairn-runner`: the runner service (`serve`) and its offline tools.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cairn-runner", about = "Runs OpenTofu for Cairn", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve: consume the run queues of the registry's targets and execute runs.
    Serve(Box<cairn_runner::config::ServeConfig>),
    /// Print the summary and risk of a plan (the JSON of `tofu show -json PLANFILE`).
    SummarizePlan {
        /// The plan JSON file.
        plan: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::SummarizePlan { plan } => match cairn_runner::summarize::print_plan_summary(&plan)
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cairn-runner: {:#}", anyhow::Error::from(e));
                ExitCode::FAILURE
            }
        },
        Command::Serve(config) => serve(*config),
    }
}

fn serve(config: cairn_runner::config::ServeConfig) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cairn-runner: start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(async move {
        if let Err(e) = cairn_telemetry::init("runner") {
            eprintln!("cairn-runner: logging: {e}");
            return ExitCode::from(2);
        }
        // Handlers first: a SIGTERM during start-up must stop us gracefully, not kill us.
        let signals = match cairn_telemetry::ShutdownSignals::install() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("cairn-runner: install signal handlers: {e}");
                return ExitCode::from(2);
            }
        };
        let runner = match cairn_runner::serve::Runner::start(config).await {
            Ok(r) => r,
            Err(e) => {
                let e = anyhow::Error::from(e);
                tracing::error!(error = format!("{e:#}"), "refusing to start");
                eprintln!("cairn-runner: refusing to start: {e:#}");
                return ExitCode::from(2);
            }
        };
        let stop = runner.shutdown_token();
        tokio::spawn(async move {
            signals.recv().await;
            tracing::info!("shutting down: no new runs; the runs in flight finish first");
            stop.cancel();
        });
        runner.wait().await;
        ExitCode::SUCCESS
    })
}
