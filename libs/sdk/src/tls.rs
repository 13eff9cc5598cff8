//! [`ClientTls`] and [`endpoint`]: the one rule for how a Cairn client reaches a service.
//! `http://` is plaintext; `https://` verifies the server against `CAIRN_TLS_CA` (PEM), or
//! the system roots when unset, and presents `CAIRN_TLS_CLIENT_CERT`/`CAIRN_TLS_CLIENT_KEY`
//! when the server wants mTLS. The SDK's own channels, the services' channels to each other
//! (and to their OTLP collector) and the CLI all build their endpoints here. The CLI and the
//! SDK's default read those settings from the environment ([`ClientTls::from_env`]); a
//! service parses them with the rest of its command line (libs/service's `SharedArgs`) and
//! passes them down. Every endpoint made here also pings its server while calls are in
//! flight ([`KEEPALIVE_INTERVAL`], [`KEEPALIVE_TIMEOUT`]), so a connection that went dead
//! without a word (a peer gone without FIN or RST, a dropped NAT entry, a load balancer
//! that failed over) is closed and the next call connects anew, instead of every call on it
//! waiting out its deadline.
use std::path::{Path, PathBuf};
use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// Why the client TLS settings could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsSettingError {
    #[error("read {setting} {path}")]
    Read {
        setting: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("CAIRN_TLS_CLIENT_CERT and CAIRN_TLS_CLIENT_KEY go together (only {given} is set)")]
    HalfIdentity { given: &'static str },
    #[error("{url:?} is not a valid URL")]
    InvalidUrl {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("TLS for {url}")]
    Tls {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
}

/// How `https://` endpoints are verified and whom the client says it is. The PEM as read
/// ([`ClientTls::ca_pem`], [`ClientTls::identity_pem`]) is there for a caller that hands the
/// same settings to another client (the runner gives them to tofu); `Debug` hides the key.
#[derive(Clone, Default)]
pub struct ClientTls {
    ca_pem: Option<Vec<u8>>,
    identity_pem: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca", &self.ca_pem.is_some())
            .field("identity", &self.identity_pem.is_some())
            .finish()
    }
}

fn read(setting: &'static str, path: &Path) -> Result<Vec<u8>, TlsSettingError> {
    std::fs::read(path).map_err(|source| TlsSettingError::Read {
        setting,
        path: path.to_path_buf(),
        source,
    })
}

fn var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

impl ClientTls {
    /// Verify against the CA certificates in `ca_pem` (PEM) instead of the system roots.
    pub fn with_ca_pem(mut self, ca_pem: impl AsRef<[u8]>) -> Self {
        self.ca_pem = Some(ca_pem.as_ref().to_vec());
        self
    }

    /// Present this certificate chain and key (PEM) to servers that ask (mTLS).
    pub fn with_identity_pem(
        mut self,
        cert_pem: impl AsRef<[u8]>,
        key_pem: impl AsRef<[u8]>,
    ) -> Self {
        self.identity_pem = Some((cert_pem.as_ref().to_vec(), key_pem.as_ref().to_vec()));
        self
    }

    /// The CA certificates (PEM) servers are verified against; none: the system roots.
    pub fn ca_pem(&self) -> Option<&[u8]> {
        self.ca_pem.as_deref()
    }

    /// The client certificate chain and key (PEM) presented for mTLS, if any.
    pub fn identity_pem(&self) -> Option<(&[u8], &[u8])> {
        self.identity_pem
            .as_ref()
            .map(|(cert, key)| (cert.as_slice(), key.as_slice()))
    }

    /// The given files (any may be absent).
    pub fn from_files(
        ca: Option<&Path>,
        client_cert: Option<&Path>,
        client_key: Option<&Path>,
    ) -> Result<Self, TlsSettingError> {
        let mut tls = ClientTls::default();
        if let Some(ca) = ca {
            tls = tls.with_ca_pem(read("CAIRN_TLS_CA", ca)?);
        }
        match (client_cert, client_key) {
            (Some(cert), Some(key)) => {
                tls = tls.with_identity_pem(
                    read("CAIRN_TLS_CLIENT_CERT", cert)?,
                    read("CAIRN_TLS_CLIENT_KEY", key)?,
                );
            }
            (None, None) => {}
            (Some(_), None) => {
                return Err(TlsSettingError::HalfIdentity {
                    given: "CAIRN_TLS_CLIENT_CERT",
                });
            }
            (None, Some(_)) => {
                return Err(TlsSettingError::HalfIdentity {
                    given: "CAIRN_TLS_CLIENT_KEY",
                });
            }
        }
        Ok(tls)
    }

    /// `CAIRN_TLS_CA`, `CAIRN_TLS_CLIENT_CERT`, `CAIRN_TLS_CLIENT_KEY` from the environment.
    pub fn from_env() -> Result<Self, TlsSettingError> {
        Self::from_files(
            var("CAIRN_TLS_CA").as_deref(),
            var("CAIRN_TLS_CLIENT_CERT").as_deref(),
            var("CAIRN_TLS_CLIENT_KEY").as_deref(),
        )
    }
}

/// How long a connection with calls in flight may stay silent before it is pinged (an
/// HTTP/2 PING; nothing is sent on an idle connection).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// How long a ping may go unanswered before its connection is closed: the calls on it fail
/// UNAVAILABLE (transient, [`crate::connection_failed`]) and the next call connects anew. A
/// server answers pings from its connection task, not a handler, so a busy server still
/// answers; the bound is generous for a loaded host.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The endpoint of `url`: TLS (verified per `tls`) for `https://`, plaintext otherwise, with
/// the keepalive every Cairn connection has. Callers add their timeouts and connect.
pub fn endpoint(url: &str, tls: &ClientTls) -> Result<Endpoint, TlsSettingError> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|source| TlsSettingError::InvalidUrl {
            url: url.to_owned(),
            source,
        })?
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(false);
    if endpoint.uri().scheme_str() != Some("https") {
        return Ok(endpoint);
    }
    let mut config = ClientTlsConfig::new();
    config = match &tls.ca_pem {
        Some(ca) => config.ca_certificate(Certificate::from_pem(ca)),
        None => config.with_native_roots(),
    };
    if let Some((cert, key)) = &tls.identity_pem {
        config = config.identity(Identity::from_pem(cert, key));
    }
    endpoint
        .tls_config(config)
        .map_err(|source| TlsSettingError::Tls {
            url: url.to_owned(),
            source,
        })
}

/// The channel a service uses for one of its peers: `tls` (the service's parsed client TLS
/// settings), a 5 s connect timeout, `request_timeout` per call when given, and a lazy
/// connection (a peer may start after the caller).
pub fn peer_channel(
    url: &str,
    tls: &ClientTls,
    request_timeout: Option<std::time::Duration>,
) -> Result<Channel, TlsSettingError> {
    let mut endpoint = endpoint(url, tls)?.connect_timeout(std::time::Duration::from_secs(5));
    if let Some(t) = request_timeout {
        endpoint = endpoint.timeout(t);
    }
    Ok(endpoint.connect_lazy())
}
