//! The `cairn-runner` command line: `serve` (the service, [`crate::serve::Runner`], which
//! `main` hands to [`cairn_service::run()`]) and `summarize-plan` (an offline tool).

use std::error::Error as StdError;
use std::path::PathBuf;

use cairn_service::{Command, Tool};

use crate::config::ServeConfig;

/// The command line.
#[derive(clap::Parser)]
#[command(name = "cairn-runner", about = "Runs OpenTofu for Cairn", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Subcommand,
}

impl Cli {
    /// What the command line asks for.
    pub fn into_command(self) -> Command<ServeConfig, SummarizePlan> {
        match self.command {
            Subcommand::Serve(config) => Command::Serve(*config),
            Subcommand::SummarizePlan(tool) => Command::Tool(tool),
        }
    }
}

#[derive(clap::Subcommand)]
enum Subcommand {
    /// Serve: consume the run queues of the registry's targets and execute runs.
    Serve(Box<ServeConfig>),
    /// Print the summary and risk of a plan (the JSON of `tofu show -json PLANFILE`).
    SummarizePlan(SummarizePlan),
}

/// `cairn-runner summarize-plan PLAN`: prints the plan's summary as one line of JSON.
#[derive(Debug, clap::Args)]
pub struct SummarizePlan {
    /// The plan JSON file.
    plan: PathBuf,
}

impl Tool for SummarizePlan {
    async fn run(self) -> Result<(), Box<dyn StdError + Send + Sync + 'static>> {
        crate::summarize::print_plan_summary(&self.plan)?;
        Ok(())
    }
}
