//! Accepted connections, as every listener of a service takes them (gRPC, its TLS
//! handshake, the HTTP backend, metrics, health): `TCP_NODELAY` on. An answer is a few small
//! writes (HTTP/2 headers, data and trailers frames; an HTTP/1.1 head, then its body), and
//! Nagle's algorithm holds a small write back while an earlier one is unacknowledged, which
//! the peer's delayed acknowledgement can stretch to tens of milliseconds per call.
use std::io;

use tokio::net::{TcpListener, TcpStream};
use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::{Stream, StreamExt};

/// Sets what every accepted connection needs. A socket that refuses is served as it is.
pub(crate) fn configure(tcp: &TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "setting TCP_NODELAY on an accepted connection failed");
    }
}

/// The plaintext connections of `listener`, each [`configure`]d.
pub(crate) fn incoming(listener: TcpListener) -> impl Stream<Item = io::Result<TcpStream>> {
    TcpListenerStream::new(listener).map(|accepted| accepted.inspect(configure))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_send_without_delay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut accepted = std::pin::pin!(incoming(listener));
        let client = TcpStream::connect(addr).await.expect("connect");
        let server = accepted
            .next()
            .await
            .expect("a connection")
            .expect("accepted");
        assert!(server.nodelay().expect("nodelay"), "TCP_NODELAY on");
        // What the OS gives a new socket: off (so the assertion above is this module's).
        assert!(!client.nodelay().expect("nodelay"));
    }
}
