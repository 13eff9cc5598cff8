//! [`HttpListener`]: an axum listener beside the gRPC one (the coordinator's HTTP backend,
//! every service's metrics), with the same TLS (ALPN `http/1.1`, the SIGHUP reload of the
//! shared [`ServerTls`]) and the same profile check; it stops gracefully with its [`Tasks`].
//!
//! [`ServerTls`]: crate::tls::ServerTls
use std::net::SocketAddr;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;

use crate::grpc::{Listen, ServeError};
use crate::tasks::Tasks;

/// A bound HTTP listener.
pub struct HttpListener {
    listener: TcpListener,
    addr: SocketAddr,
    listen: Listen,
}

impl HttpListener {
    /// Binds `addr` (port 0 picks a free port), refusing plaintext where the profile does.
    pub async fn bind(addr: SocketAddr, listen: Listen) -> Result<Self, ServeError> {
        Self::bind_as("HTTP backend", addr, listen).await
    }

    /// [`HttpListener::bind`] for the listener called `what` in the profile's refusal.
    pub async fn bind_as(
        what: &'static str,
        addr: SocketAddr,
        listen: Listen,
    ) -> Result<Self, ServeError> {
        listen.check(what, addr)?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        Ok(HttpListener {
            listener,
            addr,
            listen,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.listen.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Serves `router` in `tasks` until their token is cancelled (in-flight requests finish).
    pub fn spawn(self, router: axum::Router, tasks: &mut Tasks) -> Result<SocketAddr, ServeError> {
        let Self {
            listener,
            addr,
            listen,
        } = self;
        let stop = tasks.token();
        match &listen.tls {
            Some(tls) => {
                let incoming = tls.incoming(listener, &[b"http/1.1"], stop.clone())?;
                tls.reload_on_change(tasks).map_err(ServeError::Signal)?;
                tasks.spawn(async move {
                    if let Err(e) = axum::serve(incoming, router)
                        .with_graceful_shutdown(stop.cancelled_owned())
                        .await
                    {
                        tracing::error!(error = %cairn_telemetry::Chain(&e), "HTTP listener stopped");
                    }
                });
            }
            None => {
                let listener = listener.tap_io(|tcp| crate::accept::configure(tcp));
                tasks.spawn(async move {
                    if let Err(e) = axum::serve(listener, router)
                        .with_graceful_shutdown(stop.cancelled_owned())
                        .await
                    {
                        tracing::error!(error = %cairn_telemetry::Chain(&e), "HTTP listener stopped");
                    }
                });
            }
        }
        Ok(addr)
    }
}
