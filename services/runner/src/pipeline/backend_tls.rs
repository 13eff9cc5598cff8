//! [`BackendTls`]: what tofu needs to verify the coordinator's https state backend, and to
//! be verified by it under mTLS, as OpenTofu's `http` backend takes it:
//! `TF_HTTP_CLIENT_CA_CERTIFICATE_PEM` (the CA; without it tofu uses its image's system
//! roots), `TF_HTTP_CLIENT_CERTIFICATE_PEM` and `TF_HTTP_CLIENT_PRIVATE_KEY_PEM`. Given to
//! every command of a run whose backend is https; the key goes with the secret environment
//! (redacted from the output), and none of it is ever logged.

use std::fmt;

use crate::executor::Secret;

/// `TF_HTTP_CLIENT_CA_CERTIFICATE_PEM`.
pub const CA_CERTIFICATE_VAR: &str = "TF_HTTP_CLIENT_CA_CERTIFICATE_PEM";
/// `TF_HTTP_CLIENT_CERTIFICATE_PEM`.
pub const CLIENT_CERTIFICATE_VAR: &str = "TF_HTTP_CLIENT_CERTIFICATE_PEM";
/// `TF_HTTP_CLIENT_PRIVATE_KEY_PEM`.
pub const CLIENT_PRIVATE_KEY_VAR: &str = "TF_HTTP_CLIENT_PRIVATE_KEY_PEM";

/// The plain and the secret variables of one command.
pub(super) type TlsEnv = (Vec<(String, String)>, Vec<(String, Secret)>);

/// The CA tofu verifies the backend with, and the client identity it presents (PEM).
#[derive(Clone, Default)]
pub struct BackendTls {
    ca_pem: Option<String>,
    identity: Option<(String, Secret)>,
}

impl fmt::Debug for BackendTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendTls")
            .field("ca", &self.ca_pem.is_some())
            .field("identity", &self.identity.is_some())
            .finish()
    }
}

impl BackendTls {
    /// The CA certificates (none: tofu's system roots) and the client certificate chain with
    /// its key (none: no mTLS).
    pub fn new(ca_pem: Option<String>, identity: Option<(String, Secret)>) -> Self {
        Self { ca_pem, identity }
    }

    /// The variables of one command: the plain ones (CA, certificate) and the secret one
    /// (the key).
    pub(super) fn env(&self) -> TlsEnv {
        let mut plain = Vec::new();
        let mut secret = Vec::new();
        if let Some(ca) = &self.ca_pem {
            plain.push((CA_CERTIFICATE_VAR.to_owned(), ca.clone()));
        }
        if let Some((cert, key)) = &self.identity {
            plain.push((CLIENT_CERTIFICATE_VAR.to_owned(), cert.clone()));
            secret.push((CLIENT_PRIVATE_KEY_VAR.to_owned(), key.clone()));
        }
        (plain, secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_secret_and_debug_shows_nothing() {
        let tls = BackendTls::new(
            Some("CA-PEM".into()),
            Some(("CERT-PEM".into(), Secret::new("KEY-PEM"))),
        );
        let (plain, secret) = tls.env();
        assert_eq!(
            plain,
            vec![
                (CA_CERTIFICATE_VAR.to_owned(), "CA-PEM".to_owned()),
                (CLIENT_CERTIFICATE_VAR.to_owned(), "CERT-PEM".to_owned()),
            ]
        );
        assert_eq!(secret.len(), 1);
        assert_eq!(secret[0].0, CLIENT_PRIVATE_KEY_VAR);
        assert_eq!(secret[0].1.expose(), "KEY-PEM");
        let shown = format!("{tls:?}");
        assert!(!shown.contains("PEM"), "{shown}");
        assert_eq!(BackendTls::default().env(), (Vec::new(), Vec::new()));
    }
}
