//! [`TestCa`]: a certificate authority made at test time (rcgen), and the PEM server and
//! client certificates it signs ([`TestCert`]), for `localhost` and `127.0.0.1`.
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A certificate authority made for one test.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A PEM certificate and its key.
pub struct TestCert {
    pub cert: String,
    pub key: String,
}

impl TestCa {
    /// A self-signed CA whose common name is `name`.
    pub fn new(name: &str) -> TestCa {
        let mut params =
            CertificateParams::new(Vec::<String>::new()).expect("CA certificate parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).expect("self-signed CA"),
        }
    }

    /// The CA certificate (PEM).
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate named `server`.
    pub fn server(&self) -> TestCert {
        self.server_named("server")
    }

    /// A client certificate named `client`.
    pub fn client(&self) -> TestCert {
        self.client_named("client")
    }

    /// A server certificate with common name `name`.
    pub fn server_named(&self, name: &str) -> TestCert {
        self.leaf(name, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate with common name `name`.
    pub fn client_named(&self, name: &str) -> TestCert {
        self.leaf(name, ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn leaf(&self, name: &str, purpose: ExtendedKeyUsagePurpose) -> TestCert {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .expect("certificate parameters");
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![purpose];
        let key = KeyPair::generate().expect("certificate key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("certificate signed by the CA");
        TestCert {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}
