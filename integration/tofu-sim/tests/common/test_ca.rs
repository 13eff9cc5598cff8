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
