//! `cairn-runner`: the runner's command line.
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
    /// Print the summary and risk of a plan (the JSON of `tofu show -json PLANFILE`).
    SummarizePlan {
        /// The plan JSON file.
        plan: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::SummarizePlan { plan } => cairn_runner::summarize::print_plan_summary(&plan),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-runner: {:#}", anyhow::Error::from(e));
            ExitCode::FAILURE
        }
    }
}
