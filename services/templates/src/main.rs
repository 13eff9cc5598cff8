//! `cairn-templates`: parse config, start, wait for SIGTERM/SIGINT, stop gracefully.
use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = cairn_templates::Config::parse();
    if let Err(e) = cairn_telemetry::init("templates") {
        eprintln!("cairn-templates: logging: {e}");
        std::process::exit(2);
    }
    // Handlers first: a SIGTERM during start-up must stop us gracefully, not kill us.
    let signals = match cairn_telemetry::ShutdownSignals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cairn-templates: install signal handlers: {e}");
            std::process::exit(2);
        }
    };
    let server = match cairn_templates::Server::start(config).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "refusing to start");
            eprintln!("cairn-templates: refusing to start: {e}");
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
    Ok(())
}
