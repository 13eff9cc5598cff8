//! SIGTERM/SIGINT handling for service binaries, installed before the service starts so a
//! signal that arrives during start-up is never handled by the default action (exit).
use tokio::signal::unix::{Signal, SignalKind, signal};

/// Handlers for SIGTERM and SIGINT, registered when this is created.
pub struct ShutdownSignals {
    term: Signal,
    int: Signal,
}

impl ShutdownSignals {
    /// Registers the handlers now; call it first thing in `main`.
    pub fn install() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Resolves when SIGTERM or SIGINT arrives.
    pub async fn recv(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
