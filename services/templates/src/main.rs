//! `cairn-templates`: parse config, start, wait for SIGTERM/SIGINT, stop gracefully.
use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = cairn_templates::Config::parse();
    if let Err(e) = cairn_telemetry::init("templates") {
        eprintln!("cairn-templates: logging: {e}");
        std::process::exit(2);
    }
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
        shutdown_signal().await;
        tracing::info!("shutting down");
        stop.cancel();
    });
    server.wait().await;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
