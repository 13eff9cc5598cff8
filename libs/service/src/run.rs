//! [`run()`]: the whole of a service's `main`. It parses the command line, builds the
//! runtime, and either runs a one-off subcommand ([`Command::Tool`]: exit 1 when it fails)
//! or serves: telemetry, signal handlers installed before anything else (a SIGTERM during
//! start-up stops the service gracefully instead of killing it), start, then wait until a
//! signal begins the graceful stop. A start-up failure prints the whole error chain once
//! and exits 2; so does the production profile without TLS or with plaintext trace export
//! off the host (`CAIRN_PROFILE`, checked before the service starts and before anything is
//! exported). Telemetry (its OTLP channel verified with the client TLS settings) and the
//! profile come from the config's [`SharedArgs`] ([`Service::shared`]), parsed with the
//! rest of the command line.
use std::error::Error as StdError;
use std::future::Future;
use std::process::ExitCode;

use cairn_telemetry::{Chain, ShutdownSignals};
use tokio_util::sync::CancellationToken;

use crate::args::SharedArgs;

/// What the command line asks for.
pub enum Command<C, T> {
    /// Serve with this config.
    Serve(C),
    /// Run a one-off subcommand (keys, bootstrap, summarize-plan, …).
    Tool(T),
}

/// A one-off subcommand of a service binary.
pub trait Tool: Send + 'static {
    /// Runs it; an error is printed with its chain and the binary exits 1.
    fn run(
        self,
    ) -> impl Future<Output = Result<(), Box<dyn StdError + Send + Sync + 'static>>> + Send;
}

/// The tool of a service that has none.
pub enum NoTool {}

impl Tool for NoTool {
    async fn run(self) -> Result<(), Box<dyn StdError + Send + Sync + 'static>> {
        match self {}
    }
}

/// A Cairn service as its `main` sees it.
pub trait Service: Sized + Send + 'static {
    /// The binary, for messages (`cairn-templates`).
    const BINARY: &'static str;
    /// The service name in every log line (`templates`).
    const NAME: &'static str;
    /// The command line.
    type Cli: clap::Parser;
    /// What serving takes.
    type Config: Send + 'static;
    /// The one-off subcommands ([`NoTool`] when there are none).
    type Tool: Tool;
    /// Why the service refused to start.
    type StartError: StdError + Send + Sync + 'static;

    /// What the parsed command line asks for.
    fn command(cli: Self::Cli) -> Command<Self::Config, Self::Tool>;

    /// The settings libs/service applies (profile, TLS, health, metrics, traces), flattened
    /// into the config.
    fn shared(config: &Self::Config) -> &SharedArgs;

    /// Starts serving; fails, saying why, when anything it needs is missing.
    fn start(config: Self::Config) -> impl Future<Output = Result<Self, Self::StartError>> + Send;

    /// A token that begins the graceful stop when cancelled.
    fn shutdown_token(&self) -> CancellationToken;

    /// Waits until the stop has begun and everything has finished.
    fn wait(self) -> impl Future<Output = ()> + Send;
}

/// Exit code of a service that refused to start.
pub const EXIT_START_FAILED: u8 = 2;

/// The `main` of a service binary.
pub fn run<S: Service>() -> ExitCode {
    let cli = <S::Cli as clap::Parser>::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{}: start the async runtime: {}", S::BINARY, Chain(&e));
            return ExitCode::from(EXIT_START_FAILED);
        }
    };
    runtime.block_on(async move {
        match S::command(cli) {
            Command::Tool(tool) => match tool.run().await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("{}: {}", S::BINARY, Chain(&*e));
                    ExitCode::FAILURE
                }
            },
            Command::Serve(config) => serve::<S>(config).await,
        }
    })
}

async fn serve<S: Service>(config: S::Config) -> ExitCode {
    let shared = S::shared(&config);
    // The profile's rules the settings alone decide (TLS on the listeners, where traces go),
    // before anything is exported, connects or binds. A refused setting exports nothing.
    let checked = shared.check();
    let export = match checked.as_ref().map(|()| shared.otlp_export()) {
        Ok(Ok(export)) => export,
        Ok(Err(e)) => {
            eprintln!(
                "{}: refusing to start: {}: {}",
                S::BINARY,
                cairn_telemetry::trace::OTLP_ENDPOINT_VAR,
                Chain(&e)
            );
            return ExitCode::from(EXIT_START_FAILED);
        }
        Err(_) => None,
    };
    if let Err(e) = cairn_telemetry::init_with_otlp(S::NAME, export) {
        eprintln!("{}: logging: {}", S::BINARY, Chain(&e));
        return ExitCode::from(EXIT_START_FAILED);
    }
    // Handlers first: a SIGTERM during start-up must stop us gracefully, not kill us.
    let signals = match ShutdownSignals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}: install signal handlers: {}", S::BINARY, Chain(&e));
            return ExitCode::from(EXIT_START_FAILED);
        }
    };
    if let Err(e) = checked {
        tracing::error!(error = %e, "refusing to start");
        eprintln!("{}: refusing to start: {e}", S::BINARY);
        return ExitCode::from(EXIT_START_FAILED);
    }
    let service = match S::start(config).await {
        Ok(s) => s,
        Err(e) => {
            let chain = Chain(&e).to_string();
            tracing::error!(error = %chain, "refusing to start");
            eprintln!("{}: refusing to start: {chain}", S::BINARY);
            return ExitCode::from(EXIT_START_FAILED);
        }
    };
    let stop = service.shutdown_token();
    tokio::spawn(async move {
        signals.recv().await;
        tracing::info!("shutting down: no new work; in-flight work finishes first");
        stop.cancel();
    });
    service.wait().await;
    tracing::info!("stopped");
    cairn_telemetry::trace::shutdown().await;
    ExitCode::SUCCESS
}
