//! Certificates made at test time (rcgen): a CA, server and client certificates it signs, and
//! rustls server configurations for a TLS backend.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate authority made for one test.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A PEM certificate and its key.
pub struct Leaf {
    pub cert: String,
    pub key: String,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    fn leaf(&self, name: &str, purpose: ExtendedKeyUsagePurpose) -> Leaf {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![purpose];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// A server certificate for `localhost` and `127.0.0.1`.
    pub fn server(&self) -> Leaf {
        self.leaf("server", ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate.
    pub fn client(&self) -> Leaf {
        self.leaf("client", ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(self.pem().as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        roots
    }
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
                Arc::new(ca.roots()),
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
