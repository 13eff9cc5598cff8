//! `cairn`: the command line of Cairn, built on cairn-sdk. Contexts and credentials live in
//! `~/.config/cairn` (`CAIRN_CONFIG_DIR` overrides it); `CAIRN_API_TOKEN` works without a
//! login. Exit codes: 0 success, 1 failure or refusal, 2 usage error, 3 awaiting approval.
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

mod app;
mod cli;
mod commands;
mod config;
mod error;
mod output;
mod views;
mod watch;

use cli::{Cli, Command};
use commands::{account, deploy, drift, ops, resources, webhooks};
use error::{CliError, Result};

async fn run(cli: Cli) -> Result {
    match &cli.command {
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "cairn", &mut script);
            // A closed pipe (`| head`) is not an error worth a message.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), &script);
            return Ok(());
        }
        Command::Context(cmd) => {
            return account::context(
                config::Config::load(cli.context.as_deref())?,
                cli.output,
                cmd,
            );
        }
        _ => {}
    }
    let app = app::App::new(&cli)?;
    match &cli.command {
        Command::Login(args) => account::login(&app, args).await,
        Command::Logout => account::logout(&app),
        Command::Whoami => account::whoami(&app).await,
        Command::Tenants(cmd) => account::tenants(&app, cmd).await,
        Command::Users(cmd) => account::users(&app, cmd).await,
        Command::Tokens(cmd) => account::tokens(&app, cmd).await,
        Command::Targets(cmd) => resources::targets(&app, cmd).await,
        Command::Templates(cmd) => resources::templates(&app, cmd).await,
        Command::Instances(cmd) => resources::instances(&app, cmd).await,
        Command::Deploy(args) => deploy::deploy(&app, args).await,
        Command::Preview(args) => deploy::preview(&app, args).await,
        Command::Destroy(args) => deploy::destroy(&app, args).await,
        Command::Deployments(cmd) => deploy::deployments(&app, cmd).await,
        Command::Approve(args) => deploy::decide(&app, args, true).await,
        Command::Reject(args) => deploy::decide(&app, args, false).await,
        Command::State(cmd) => ops::state(&app, cmd).await,
        Command::Drift(cmd) => drift::drift(&app, cmd).await,
        Command::Webhooks(cmd) => webhooks::webhooks(&app, cmd).await,
        Command::Audit(cmd) => ops::audit(&app, cmd).await,
        Command::Runner(cmd) => ops::runner(&app, cmd).await,
        Command::Completions { .. } | Command::Context(_) => Ok(()),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            if !matches!(err, CliError::Exit(_)) {
                let text = err.to_string().replace('\n', "; ");
                eprintln!("error: {text}");
            }
            err.exit_code()
        }
    }
}
