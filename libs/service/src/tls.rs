//! TLS of every listener a service serves: [`TlsArgs`] (`CAIRN_TLS_CERT`, `CAIRN_TLS_KEY`,
//! optional `CAIRN_TLS_CLIENT_CA` for mTLS) load into a [`ServerTls`]. Its certificate sits
//! behind one swappable pointer that every handshake reads ([`ServerTls::reload`], on SIGHUP
//! or when the files change, via [`ServerTls::reload_on_change`]): new handshakes get the new
//! certificate, open connections keep theirs. [`TlsIncoming`] accepts connections and shakes hands off the
//! accept loop, so one slow client never holds up the next; it feeds the gRPC server (ALPN
//! `h2`) and, as an axum [`Listener`](axum::serve::Listener), the coordinator's HTTP backend
//! (ALPN `http/1.1`).
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::tasks::Tasks;

/// How long a client may take to finish its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS settings every listener shares.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs {
    /// PEM certificate chain of every listener (gRPC and the HTTP backend); re-read on SIGHUP.
    #[arg(long, env = "CAIRN_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of CAIRN_TLS_CERT; re-read on SIGHUP.
    #[arg(long, env = "CAIRN_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates: when set, every client must present a certificate they signed.
    #[arg(long, env = "CAIRN_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// How often the certificate and key files are checked for a change (a renewed
    /// certificate, a Kubernetes Secret update) and reloaded when they changed; 0 = only on
    /// SIGHUP.
    #[arg(
        long,
        env = "CAIRN_TLS_RELOAD_INTERVAL",
        value_parser = crate::args::duration,
        default_value = "10s"
    )]
    pub tls_reload_interval: Duration,
}

impl TlsArgs {
    /// Whether TLS is configured.
    pub fn enabled(&self) -> bool {
        self.tls_cert.is_some()
    }

    /// The server TLS, or `None` when no certificate is configured.
    pub fn load(&self) -> Result<Option<ServerTls>, TlsError> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => ServerTls::load_watching(
                cert,
                key,
                self.tls_client_ca.as_deref(),
                self.tls_reload_interval,
            )
            .map(Some),
            (None, None) => Ok(None),
            (Some(_), None) => Err(TlsError::Half {
                given: "CAIRN_TLS_CERT",
            }),
            (None, Some(_)) => Err(TlsError::Half {
                given: "CAIRN_TLS_KEY",
            }),
        }
    }
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("CAIRN_TLS_CERT and CAIRN_TLS_KEY go together (only {given} is set)")]
    Half { given: &'static str },
    #[error("read {setting} {path}")]
    Read {
        setting: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{setting} {path} holds no usable PEM {what}")]
    Pem {
        setting: &'static str,
        path: PathBuf,
        what: &'static str,
    },
    #[error("CAIRN_TLS_KEY does not fit CAIRN_TLS_CERT")]
    Key(#[source] rustls::Error),
    #[error("CAIRN_TLS_CLIENT_CA")]
    ClientCa(#[source] rustls::server::VerifierBuilderError),
    #[error("TLS configuration")]
    Config(#[source] rustls::Error),
}

/// The one crypto provider of the tree (never ring: both at once panics in rustls).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn read(setting: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        setting,
        path: path.to_path_buf(),
        source,
    })
}

/// The PEM certificates in `path`.
pub fn read_certificates(
    setting: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(setting, path)?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|_| TlsError::Pem {
            setting,
            path: path.to_path_buf(),
            what: "certificate",
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            setting,
            path: path.to_path_buf(),
            what: "certificate",
        });
    }
    Ok(certs)
}

fn certified_key(
    cert: &Path,
    key: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let chain = read_certificates("CAIRN_TLS_CERT", cert)?;
    let pem = read("CAIRN_TLS_KEY", key)?;
    let key_der = PrivateKeyDer::from_pem_slice(&pem).map_err(|_| TlsError::Pem {
        setting: "CAIRN_TLS_KEY",
        path: key.to_path_buf(),
        what: "private key",
    })?;
    CertifiedKey::from_der(chain, key_der, provider).map_err(TlsError::Key)
}

/// The certificate every new handshake gets; swapped whole by a reload.
#[derive(Debug)]
struct CurrentCert(ArcSwap<CertifiedKey>);

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

/// A listener's TLS: the current certificate (reloadable) and, with mTLS, the client CA.
/// Cheap to clone; clones share the certificate, so one reload serves every listener.
#[derive(Debug, Clone)]
pub struct ServerTls {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cert: PathBuf,
    key: PathBuf,
    current: Arc<CurrentCert>,
    provider: Arc<CryptoProvider>,
    client_ca: Option<Arc<RootCertStore>>,
    /// How often the files are checked for a change (zero: never).
    reload_interval: Duration,
    /// Set by the first [`ServerTls::reload_on_change`]: one watcher serves every listener.
    watched: std::sync::atomic::AtomicBool,
}

/// What identifies the contents of the certificate and key files without reading them:
/// size, modification time and inode of each (following symlinks, so a Kubernetes Secret
/// volume's swapped `..data` link counts as a change). `None` for a file that cannot be
/// read now.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FilesStamp([Option<(u64, std::time::SystemTime, u64)>; 2]);

impl FilesStamp {
    fn of(cert: &Path, key: &Path) -> Self {
        use std::os::unix::fs::MetadataExt;
        let one = |p: &Path| {
            std::fs::metadata(p)
                .ok()
                .and_then(|m| Some((m.len(), m.modified().ok()?, m.ino())))
        };
        FilesStamp([one(cert), one(key)])
    }
}

impl ServerTls {
    /// Loads the certificate chain and key (PEM), and the client CA when mTLS is wanted;
    /// reloaded on SIGHUP only.
    pub fn load(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<Self, TlsError> {
        Self::load_watching(cert, key, client_ca, Duration::ZERO)
    }

    /// [`ServerTls::load`], and [`ServerTls::reload_on_change`] also checks the files for a
    /// change every `reload_interval` (zero: never).
    pub fn load_watching(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
        reload_interval: Duration,
    ) -> Result<Self, TlsError> {
        let provider = provider();
        let current = certified_key(cert, key, &provider)?;
        let client_ca = match client_ca {
            Some(path) => {
                let mut roots = RootCertStore::empty();
                let (added, _) = roots
                    .add_parsable_certificates(read_certificates("CAIRN_TLS_CLIENT_CA", path)?);
                if added == 0 {
                    return Err(TlsError::Pem {
                        setting: "CAIRN_TLS_CLIENT_CA",
                        path: path.to_path_buf(),
                        what: "CA certificate",
                    });
                }
                Some(Arc::new(roots))
            }
            None => None,
        };
        let tls = ServerTls {
            inner: Arc::new(Inner {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
                current: Arc::new(CurrentCert(ArcSwap::from_pointee(current))),
                provider,
                client_ca,
                reload_interval,
                watched: std::sync::atomic::AtomicBool::new(false),
            }),
        };
        // Fail at start-up, not at the first handshake.
        tls.config(&[])?;
        Ok(tls)
    }

    /// Whether clients must present a certificate (mTLS).
    pub fn requires_client_certificate(&self) -> bool {
        self.inner.client_ca.is_some()
    }

    /// Re-reads the certificate and key files; new handshakes get them, open connections
    /// keep theirs. On failure the current certificate stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let next = certified_key(&self.inner.cert, &self.inner.key, &self.inner.provider)?;
        self.inner.current.0.store(Arc::new(next));
        Ok(())
    }

    /// Reloads on every SIGHUP, and when the certificate or key file changed (checked every
    /// reload interval), until `tasks` stops. A failed reload is logged and the current
    /// certificate stays; a half-written pair (the certificate renewed, its key not yet) is
    /// tried again at the next change. Every listener sharing this TLS may call it: the first
    /// call starts the one watcher.
    pub fn reload_on_change(&self, tasks: &mut Tasks) -> io::Result<()> {
        use std::sync::atomic::Ordering;
        use tokio::signal::unix::{SignalKind, signal};
        if self.inner.watched.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut hup = signal(SignalKind::hangup())?;
        let stop = tasks.token();
        let tls = self.clone();
        let interval = self.inner.reload_interval;
        tasks.spawn(async move {
            let mut stamp = FilesStamp::of(&tls.inner.cert, &tls.inner.key);
            let mut poll = (!interval.is_zero()).then(|| {
                let mut t = tokio::time::interval(interval);
                t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                t
            });
            loop {
                let why = tokio::select! {
                    () = stop.cancelled() => return,
                    got = hup.recv() => match got {
                        Some(()) => "SIGHUP",
                        None => return,
                    },
                    _ = async {
                        match poll.as_mut() {
                            Some(t) => t.tick().await,
                            None => std::future::pending().await,
                        }
                    } => {
                        let now = FilesStamp::of(&tls.inner.cert, &tls.inner.key);
                        if now == stamp {
                            continue;
                        }
                        "the certificate files changed"
                    },
                };
                // What is loaded below is at least as new as this stamp.
                stamp = FilesStamp::of(&tls.inner.cert, &tls.inner.key);
                match tls.reload() {
                    Ok(()) => tracing::info!(
                        cert = %tls.inner.cert.display(),
                        why,
                        "TLS certificate reloaded"
                    ),
                    Err(e) => tracing::error!(
                        error = %cairn_telemetry::Chain(&e),
                        why,
                        "TLS certificate not reloaded; the current one stays"
                    ),
                }
            }
        });
        Ok(())
    }

    /// The rustls server config offering `alpn`.
    fn config(&self, alpn: &[&[u8]]) -> Result<Arc<ServerConfig>, TlsError> {
        let builder = ServerConfig::builder_with_provider(self.inner.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?;
        let builder = match &self.inner.client_ca {
            Some(roots) => {
                let verifier = WebPkiClientVerifier::builder_with_provider(
                    roots.clone(),
                    self.inner.provider.clone(),
                )
                .build()
                .map_err(TlsError::ClientCa)?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(self.inner.current.clone());
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }

    /// Accepts TLS connections on `listener` offering `alpn` (`h2` for gRPC, `http/1.1` for
    /// the HTTP backend) until `stop` is cancelled.
    pub fn incoming(
        &self,
        listener: TcpListener,
        alpn: &[&[u8]],
        stop: CancellationToken,
    ) -> Result<TlsIncoming, TlsError> {
        let acceptor = TlsAcceptor::from(self.config(alpn)?);
        let addr = listener.local_addr().ok();
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(accept_loop(listener, acceptor, tx, stop));
        Ok(TlsIncoming { rx, addr })
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    tx: mpsc::Sender<(TlsIo, SocketAddr)>,
    stop: CancellationToken,
) {
    loop {
        let (tcp, peer) = tokio::select! {
            () = stop.cancelled() => return,
            () = tx.closed() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        crate::accept::configure(&tcp);
        let acceptor = acceptor.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let _ = tx.send((TlsIo(stream), peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake refused"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

/// Connections whose handshake has finished.
pub struct TlsIncoming {
    rx: mpsc::Receiver<(TlsIo, SocketAddr)>,
    addr: Option<SocketAddr>,
}

impl tokio_stream::Stream for TlsIncoming {
    type Item = io::Result<TlsIo>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx).map(|next| next.map(|(io, _)| Ok(io)))
    }
}

impl axum::serve::Listener for TlsIncoming {
    type Io = TlsIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TlsIo, SocketAddr) {
        match self.rx.recv().await {
            Some(next) => next,
            // The accept loop stopped (shutdown): nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.addr
            .ok_or_else(|| io::Error::other("the listener has no local address"))
    }
}

/// One TLS connection; its connect info is the TCP one, as without TLS (the rate limits
/// read the peer address).
pub struct TlsIo(TlsStream<TcpStream>);

impl TlsIo {
    /// The certificates the client presented (mTLS).
    pub fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        self.0.get_ref().1.peer_certificates()
    }
}

impl Connected for TlsIo {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.0.get_ref().0.connect_info()
    }
}

impl AsyncRead for TlsIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}
