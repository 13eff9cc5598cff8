//! TLS backends for tests: rustls server configurations presenting certificates of a
//! [`cairn_testkit::TestCa`], and a TLS front for a plain HTTP server.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

pub use cairn_testkit::{TestCa as Ca, TestCert as Leaf};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The roots that trust `ca`.
fn roots(ca: &Ca) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca.pem().as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    roots
}

fn chain(leaf: &Leaf) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let certs = CertificateDer::pem_slice_iter(leaf.cert.as_bytes())
        .map(Result::unwrap)
        .collect();
    (
        certs,
        PrivateKeyDer::from_pem_slice(leaf.key.as_bytes()).unwrap(),
    )
}

/// A server presenting `leaf`; with `client_ca`, a client certificate signed by it is
/// required (mTLS).
pub fn server_config(leaf: &Leaf, client_ca: Option<&Ca>) -> Arc<rustls::ServerConfig> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => builder.with_client_cert_verifier(
            rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots(ca)),
                provider(),
            )
            .build()
            .unwrap(),
        ),
    };
    let (certs, key) = chain(leaf);
    Arc::new(builder.with_single_cert(certs, key).unwrap())
}

/// A TLS front on `listener` for a plain HTTP server at `upstream` (the coordinator's backend
/// listener): each TLS connection's request is read whole, sent upstream on a connection of
/// its own, and the whole answer (the upstream closes after it: tofu sends
/// `Connection: close`) is sent back.
pub fn tls_front(
    listener: std::net::TcpListener,
    config: Arc<rustls::ServerConfig>,
    upstream: std::net::SocketAddr,
) {
    use std::io::{BufRead, BufReader, Read, Write};
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let config = config.clone();
            std::thread::spawn(move || {
                let Ok(server) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut tls = rustls::StreamOwned::new(server, conn);
                let mut r = BufReader::new(&mut tls);
                let mut head = Vec::new();
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some((k, v)) = line.split_once(':')
                        && k.trim().eq_ignore_ascii_case("content-length")
                    {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    head.extend_from_slice(line.as_bytes());
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; len];
                if r.read_exact(&mut body).is_err() {
                    return;
                }
                let Ok(mut up) = std::net::TcpStream::connect(upstream) else {
                    return;
                };
                let mut answer = Vec::new();
                if up.write_all(&head).is_err()
                    || up.write_all(&body).is_err()
                    || up.read_to_end(&mut answer).is_err()
                {
                    return;
                }
                let _ = tls.write_all(&answer);
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
}
