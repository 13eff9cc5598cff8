//! `cairn-tenancy`: serve (default), or run a one-off subcommand.
use cairn_tenancy::cli::{Cli, Command};
use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let command = cli
        .command
        .unwrap_or_else(|| Command::Serve(cairn_tenancy::Config::parse_from(["cairn-tenancy"])));
    let Command::Serve(config) = command else {
        if let Err(e) = cairn_tenancy::cli::run(command).await {
            eprintln!("cairn-tenancy: {:#}", anyhow::Error::from(e));
            std::process::exit(1);
        }
        return;
    };
    if let Err(e) = cairn_telemetry::init("tenancy") {
        eprintln!("cairn-tenancy: logging: {e}");
        std::process::exit(2);
    }
    // Handlers first: a SIGTERM during start-up must stop us gracefully, not kill us.
    let signals = match cairn_telemetry::ShutdownSignals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cairn-tenancy: install signal handlers: {e}");
            std::process::exit(2);
        }
    };
    let server = match cairn_tenancy::Server::start(config).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "refusing to start");
            eprintln!("cairn-tenancy: refusing to start: {e}");
            std::process::exit(2);
        }
    };
    let stop = server.shutdown_token();
    tokio::spawn(async move {
        signals.recv().await;
        tracing::info!("shutting down");
        stop.cancel();
    });
    server.wait().await;
}
