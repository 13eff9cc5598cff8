//! Client TLS of the `http` backend, configured as OpenTofu's `configureTLS` does:
//! `TF_HTTP_CLIENT_CA_CERTIFICATE_PEM` replaces the system roots, `TF_HTTP_CLIENT_CERTIFICATE_PEM`
//! with `TF_HTTP_CLIENT_PRIVATE_KEY_PEM` is the client identity for mTLS; without a CA the
//! server is verified against the system roots as Go finds them (`SSL_CERT_FILE`,
//! `SSL_CERT_DIR`, the usual bundle files), so a `FROM scratch` image without them verifies
//! nothing. (`skip_cert_verification` has no environment variable in OpenTofu and tofu-sim
//! reads no backend block attributes, so it is not emulated.)
//!
//! Failures are worded as Go words them (`tls: failed to verify certificate: x509: …`), and a
//! failed verification is a [`CertificateRejected`] error, which go-retryablehttp does not
//! retry.

use std::fmt;
use std::io;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore,
    SignatureScheme,
};

/// The client TLS settings, as given (PEM text).
#[derive(Debug, Default, Clone)]
pub struct TlsSettings {
    pub ca_pem: Option<String>,
    pub cert_pem: Option<String>,
    pub key_pem: Option<String>,
}

impl TlsSettings {
    /// `TF_HTTP_CLIENT_CA_CERTIFICATE_PEM`, `TF_HTTP_CLIENT_CERTIFICATE_PEM`,
    /// `TF_HTTP_CLIENT_PRIVATE_KEY_PEM` (empty means unset, as in OpenTofu).
    pub fn from_env() -> TlsSettings {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        TlsSettings {
            ca_pem: var("TF_HTTP_CLIENT_CA_CERTIFICATE_PEM"),
            cert_pem: var("TF_HTTP_CLIENT_CERTIFICATE_PEM"),
            key_pem: var("TF_HTTP_CLIENT_PRIVATE_KEY_PEM"),
        }
    }

    /// Whether any setting is given (OpenTofu then configures TLS, and checks it, even for a
    /// plain http address).
    pub fn any(&self) -> bool {
        self.ca_pem.is_some() || self.cert_pem.is_some() || self.key_pem.is_some()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The client configuration; the errors are OpenTofu's configuration errors.
pub fn client_config(settings: &TlsSettings) -> Result<Arc<ClientConfig>, String> {
    match (&settings.cert_pem, &settings.key_pem) {
        (Some(_), None) => {
            return Err("client_certificate_pem is set but client_private_key_pem is not".into());
        }
        (None, Some(_)) => {
            return Err("client_private_key_pem is set but client_certificate_pem is not".into());
        }
        _ => {}
    }
    let provider = provider();
    let roots = match &settings.ca_pem {
        Some(pem) => {
            let roots = roots_from_pem(pem.as_bytes(), RootCertStore::empty());
            if roots.is_empty() {
                return Err("failed to append certs".into());
            }
            roots
        }
        None => system_roots(),
    };
    let verifier: Arc<dyn ServerCertVerifier> = if roots.is_empty() {
        Arc::new(NoRoots(provider.signature_verification_algorithms))
    } else {
        rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .map_err(|e| format!("failed to append certs: {e}"))?
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match (&settings.cert_pem, &settings.key_pem) {
        (Some(cert), Some(key)) => {
            let (chain, key) = key_pair(cert.as_bytes(), key.as_bytes())
                .map_err(|e| format!("cannot load client certificate: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| match e {
                    rustls::Error::InconsistentKeys(_) => {
                        "cannot load client certificate: tls: private key does not match public key"
                            .to_owned()
                    }
                    other => format!("cannot load client certificate: tls: {other}"),
                })?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// Go's `tls.X509KeyPair`: the certificate chain and the key, with its error texts.
fn key_pair(
    cert: &[u8],
    key: &[u8],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
        .filter_map(Result::ok)
        .collect();
    if chain.is_empty() {
        return Err("tls: failed to find any PEM data in certificate input".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|_| "tls: failed to find any PEM data in key input".to_owned())?;
    Ok((chain, key))
}

/// Go's `CertPool.AppendCertsFromPEM`: every parsable CERTIFICATE block, others skipped.
fn roots_from_pem(pem: &[u8], mut roots: RootCertStore) -> RootCertStore {
    for cert in CertificateDer::pem_slice_iter(pem).filter_map(Result::ok) {
        let _ = roots.add(cert);
    }
    roots
}

/// Go's bundle files on Linux, the first one present is read.
const CERT_FILES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Go's certificate directories on Linux, every file of each is read.
const CERT_DIRS: &[&str] = &["/etc/ssl/certs", "/etc/pki/tls/certs"];

/// The system roots as Go's `loadSystemRoots` finds them on Linux.
fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let file_override = std::env::var("SSL_CERT_FILE")
        .ok()
        .filter(|f| !f.is_empty());
    let files: Vec<String> = match file_override {
        Some(f) => vec![f],
        None => CERT_FILES.iter().map(|f| (*f).to_owned()).collect(),
    };
    for file in files {
        if let Ok(data) = std::fs::read(&file) {
            roots = roots_from_pem(&data, roots);
            break;
        }
    }
    let dirs: Vec<String> = match std::env::var("SSL_CERT_DIR").ok().filter(|d| !d.is_empty()) {
        Some(d) => d.split(':').map(str::to_owned).collect(),
        None => CERT_DIRS.iter().map(|d| (*d).to_owned()).collect(),
    };
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if let Ok(data) = std::fs::read(entry.path()) {
                roots = roots_from_pem(&data, roots);
            }
        }
    }
    roots
}

/// No roots at all: every server certificate is signed by an unknown authority (Go with an
/// empty system pool).
#[derive(Debug)]
struct NoRoots(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for NoRoots {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Err(rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer,
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// The server's certificate was refused (Go's `tls.CertificateVerificationError`): not
/// retried.
#[derive(Debug)]
pub struct CertificateRejected(String);

impl fmt::Display for CertificateRejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tls: failed to verify certificate: {}", self.0)
    }
}

impl std::error::Error for CertificateRejected {}

/// The server ended the handshake with an alert (`remote error: tls: …`): a transport
/// error like any other, retried.
#[derive(Debug)]
pub struct RemoteAlert(String);

impl fmt::Display for RemoteAlert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "remote error: tls: {}", self.0)
    }
}

impl std::error::Error for RemoteAlert {}

/// Whether `e` is an alert from the server.
pub fn is_remote_alert(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<RemoteAlert>())
}

/// Whether `e` is a refused server certificate.
pub fn is_certificate_rejected(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<CertificateRejected>())
}

/// An I/O error of the TLS connection in Go's words: a refused certificate becomes
/// [`CertificateRejected`], an alert from the server `remote error: tls: …`.
pub fn go_error(e: io::Error) -> io::Error {
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return e;
    };
    match tls {
        rustls::Error::InvalidCertificate(ce) => io::Error::new(
            io::ErrorKind::InvalidData,
            CertificateRejected(x509_text(ce)),
        ),
        rustls::Error::AlertReceived(alert) => io::Error::new(
            io::ErrorKind::ConnectionAborted,
            RemoteAlert(alert_text(*alert)),
        ),
        other => io::Error::new(e.kind(), format!("tls: {other}")),
    }
}

/// Go's x509 error texts for what rustls reports.
fn x509_text(e: &CertificateError) -> String {
    match e {
        CertificateError::UnknownIssuer => "x509: certificate signed by unknown authority".into(),
        CertificateError::NotValidForNameContext {
            expected,
            presented,
        } => {
            let wanted = match expected {
                ServerName::DnsName(d) => d.as_ref().to_owned(),
                ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
                _ => "the server".to_owned(),
            };
            if presented.is_empty() {
                format!(
                    "x509: certificate is not valid for any names, but wanted to match {wanted}"
                )
            } else {
                format!(
                    "x509: certificate is valid for {}, not {wanted}",
                    presented.join(", ")
                )
            }
        }
        CertificateError::NotValidForName => "x509: certificate is not valid for this name".into(),
        CertificateError::Expired
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYet
        | CertificateError::NotValidYetContext { .. } => {
            "x509: certificate has expired or is not yet valid".into()
        }
        CertificateError::BadSignature => "x509: certificate signature is invalid".into(),
        other => format!("x509: {other:?}"),
    }
}

/// Go's names of the alerts a server sends about a client.
fn alert_text(alert: AlertDescription) -> String {
    match alert {
        AlertDescription::BadCertificate => "bad certificate".into(),
        AlertDescription::CertificateRequired => "certificate required".into(),
        AlertDescription::UnknownCA => "unknown certificate authority".into(),
        AlertDescription::HandshakeFailure => "handshake failure".into(),
        AlertDescription::CertificateUnknown => "certificate unknown".into(),
        AlertDescription::AccessDenied => "access denied".into(),
        AlertDescription::ProtocolVersion => "protocol version not supported".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}
