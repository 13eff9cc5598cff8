//! [`GrpcServer`]: the gRPC server every service runs. It binds first (port 0 works and
//! [`GrpcServer::local_addr`] reports the bound address), then serves the service's own
//! services plus health (each added service is marked serving) and reflection, behind one
//! layer stack: a request id and a `request` span per call (libs/telemetry), the per-call
//! metrics ([`GrpcMetricsLayer`]), the auth layer with its public paths (libs/auth), and a
//! per-request timeout. With [`GrpcServer::metrics`] it also serves `GET /metrics` on its
//! own listener (`CAIRN_METRICS_ADDR`, same TLS and profile check), and with
//! [`GrpcServer::health`] a plaintext health-only listener (`CAIRN_HEALTH_ADDR`,
//! [`crate::health`]) answering from the same [`HealthReporter`]. It stops gracefully when
//! its [`Tasks`] token is cancelled: health turns `NOT_SERVING`, no new calls, in-flight ones
//! finish.
//!
//! TLS comes from the shared settings ([`SharedArgs`]: `CAIRN_TLS_*`, reloaded on SIGHUP)
//! and the profile decides whether a plaintext listener may start ([`Profile::check`]).
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cairn_auth::{AuthLayer, KeySet};
use cairn_telemetry::RequestIdLayer;
use tokio::net::TcpListener;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::service::RoutesBuilder;
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

use crate::args::SharedArgs;
use crate::health::HealthListener;
use crate::metrics::{GrpcMetricsLayer, Metric, MetricsArgs, MetricsError, MetricsListener};
use crate::profile::{Fact, ListenArgs, Profile, Refusal};
use crate::tasks::Tasks;
use crate::tls::{ServerTls, TlsError};

/// Paths every server answers without a token.
pub const ALWAYS_PUBLIC: &[&str] = &["/grpc.health.v1.Health/", "/grpc.reflection."];

/// How long one call may take unless the service says otherwise (or the caller's
/// `grpc-timeout` is shorter); streaming calls are bounded only until their response starts.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// Why the server could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("bind {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("gRPC reflection")]
    Reflection(#[source] tonic_reflection::server::Error),
    #[error("TLS")]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("install the SIGHUP handler (TLS reload)")]
    Signal(#[source] std::io::Error),
    #[error("metrics (CAIRN_METRICS_ADDR)")]
    Metrics(#[source] MetricsError),
}

/// How a listener listens: the profile and the TLS, if any.
#[derive(Debug, Clone, Default)]
pub struct Listen {
    pub profile: Profile,
    pub tls: Option<ServerTls>,
}

impl Listen {
    /// The shared `CAIRN_PROFILE` / `CAIRN_TLS_*` settings, certificate loaded.
    pub fn from_args(args: &ListenArgs) -> Result<Self, ServeError> {
        Ok(Listen {
            profile: args.profile,
            tls: args.tls.load()?,
        })
    }

    /// Refuses, in production, a listener (`what`: "gRPC", "HTTP backend") at `addr`
    /// without TLS.
    pub fn check(&self, what: &'static str, addr: SocketAddr) -> Result<(), Refusal> {
        self.profile
            .check(Fact::listener(what, addr, self.tls.is_some()))
    }
}

/// A bound gRPC listener and what it will serve.
pub struct GrpcServer {
    listener: TcpListener,
    addr: SocketAddr,
    listen: Listen,
    keys: Arc<KeySet>,
    public_paths: Vec<String>,
    timeout: Duration,
    routes: RoutesBuilder,
    names: Vec<&'static str>,
    metrics: Option<MetricsListener>,
    reporter: HealthReporter,
    health: Option<HealthListener>,
}

impl GrpcServer {
    /// Binds `addr` (port 0 picks a free port); calls are verified against `keys`. TLS and
    /// the profile come from the service's `shared` settings, and so does the health-only
    /// listener (`CAIRN_HEALTH_ADDR`, bound now when set). Metrics take the service's
    /// catalogues: [`GrpcServer::metrics`] with `shared.metrics`.
    pub async fn bind(
        addr: SocketAddr,
        keys: Arc<KeySet>,
        shared: &SharedArgs,
    ) -> Result<Self, ServeError> {
        let listen = Listen::from_args(&shared.listen)?;
        Self::bind_with(addr, keys, listen)
            .await?
            .health(shared.health.health_addr)
            .await
    }

    /// [`GrpcServer::bind`] with the TLS and profile given and no health-only listener
    /// (tests, embedding).
    pub async fn bind_with(
        addr: SocketAddr,
        keys: Arc<KeySet>,
        listen: Listen,
    ) -> Result<Self, ServeError> {
        listen.check("gRPC", addr)?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        Ok(Self {
            listener,
            addr: bound,
            listen,
            keys,
            public_paths: ALWAYS_PUBLIC.iter().map(|p| (*p).to_owned()).collect(),
            timeout: DEFAULT_REQUEST_TIMEOUT,
            routes: RoutesBuilder::default(),
            names: Vec::new(),
            metrics: None,
            reporter: HealthReporter::new(),
            health: None,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// How it listens (a service's other listeners take the same TLS).
    pub fn listen(&self) -> &Listen {
        &self.listen
    }

    /// Serves Prometheus metrics at `args.metrics_addr` (none when unset) with this
    /// server's TLS, installing the process-wide recorder and describing the service's
    /// `catalogues` (libs/service's own are always described).
    pub async fn metrics(
        mut self,
        args: &MetricsArgs,
        catalogues: &[&[Metric]],
    ) -> Result<Self, ServeError> {
        self.metrics = MetricsListener::bind(args, &self.listen, catalogues).await?;
        Ok(self)
    }

    /// The bound metrics address, if metrics are served.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(MetricsListener::local_addr)
    }

    /// Serves gRPC health alone, in plaintext, at `addr` (none when unset): the statuses of
    /// [`GrpcServer::health_reporter`], for probes without TLS. The production profile
    /// allows it on any address ([`Profile::check`]).
    pub async fn health(mut self, addr: Option<SocketAddr>) -> Result<Self, ServeError> {
        self.health = match addr {
            Some(addr) => Some(HealthListener::bind(addr, self.listen.profile).await?),
            None => None,
        };
        Ok(self)
    }

    /// The bound health-only address, if one is served.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.health.as_ref().map(HealthListener::local_addr)
    }

    /// The statuses both listeners report: each added service is set `SERVING` when the
    /// server starts and every status `NOT_SERVING` when it begins to stop; a service may
    /// set its own in between.
    pub fn health_reporter(&self) -> HealthReporter {
        self.reporter.clone()
    }

    /// Path prefixes answered without a token, besides health and reflection (e.g.
    /// tenancy's login).
    pub fn public_paths<I, P>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<String>,
    {
        self.public_paths.extend(paths.into_iter().map(Into::into));
        self
    }

    /// The per-request timeout.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Adds one of the service's own gRPC services; health reports it serving.
    pub fn add_service<S>(mut self, svc: S) -> Self
    where
        S: tower::Service<http::Request<Body>, Error = Infallible>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Response: axum::response::IntoResponse,
        S::Future: Send + 'static,
    {
        self.names.push(S::NAME);
        self.routes.add_service(svc);
        self
    }

    /// Starts serving in `tasks`; stops when its token is cancelled. Returns the bound
    /// addresses of every listener.
    pub async fn spawn(self, tasks: &mut Tasks) -> Result<Addresses, ServeError> {
        let Self {
            listener,
            addr,
            listen,
            keys,
            public_paths,
            timeout,
            mut routes,
            names,
            metrics,
            reporter,
            health,
        } = self;
        for name in &names {
            reporter
                .set_service_status(*name, ServingStatus::Serving)
                .await;
        }
        let health_service =
            HealthServer::new(HealthService::from_health_reporter(reporter.clone()));
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(cairn_proto::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(ServeError::Reflection)?;
        routes.add_service(health_service);
        routes.add_service(reflection);
        let auth = AuthLayer::new(keys).allow_unauthenticated(public_paths);
        let server = tonic::transport::Server::builder()
            .timeout(timeout)
            .layer(RequestIdLayer::new())
            .layer(GrpcMetricsLayer)
            .layer(auth)
            .add_routes(routes.routes());
        let stop = tasks.token();
        let tls = listen.tls.is_some();
        match &listen.tls {
            Some(tls) => {
                let incoming = tls.incoming(listener, &[b"h2"], stop.clone())?;
                tls.reload_on_change(tasks).map_err(ServeError::Signal)?;
                tasks.spawn(async move {
                    if let Err(e) = server
                        .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
                        .await
                    {
                        tracing::error!(error = %cairn_telemetry::Chain(&e), "gRPC server stopped");
                    }
                });
            }
            None => {
                tasks.spawn(async move {
                    let incoming = crate::accept::incoming(listener);
                    if let Err(e) = server
                        .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
                        .await
                    {
                        tracing::error!(error = %cairn_telemetry::Chain(&e), "gRPC server stopped");
                    }
                });
            }
        }
        let metrics_addr = match metrics {
            Some(m) => {
                let metrics_addr = m.spawn(tasks)?;
                tracing::info!(%metrics_addr, tls, "metrics serving");
                Some(metrics_addr)
            }
            None => None,
        };
        let health_addr = health.map(|h| {
            let health_addr = h.spawn(&reporter, tasks);
            tracing::info!(%health_addr, "health serving (plaintext, health only)");
            health_addr
        });
        // Draining: every status turns NOT_SERVING when the stop begins (Watch callers see
        // it; the listeners stop taking new connections at the same time).
        let draining = tasks.token();
        let statuses = names.clone();
        tasks.spawn(async move {
            draining.cancelled().await;
            for name in statuses.into_iter().chain([""]) {
                reporter
                    .set_service_status(name, ServingStatus::NotServing)
                    .await;
            }
        });
        tracing::info!(grpc_addr = %addr, tls, services = ?names, "gRPC serving");
        Ok(Addresses {
            grpc: addr,
            metrics: metrics_addr,
            health: health_addr,
        })
    }
}

/// Where a started [`GrpcServer`] listens: the bound addresses (port 0 in the settings
/// picks a free one, reported here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    /// The gRPC listener.
    pub grpc: SocketAddr,
    /// The Prometheus metrics listener, when metrics are served.
    pub metrics: Option<SocketAddr>,
    /// The plaintext health listener, when one is served.
    pub health: Option<SocketAddr>,
}
