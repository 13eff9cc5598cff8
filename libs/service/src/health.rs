//! The health-only listener ([`HealthArgs`]: `CAIRN_HEALTH_ADDR`): a second, plaintext gRPC
//! listener that serves `grpc.health.v1.Health` (Check and Watch) and nothing else, for
//! probes that cannot speak TLS (kubelet's `grpc:` probe). It answers from the same
//! [`HealthReporter`] as the main listener, so a service that stops serving (or drains)
//! shows `NOT_SERVING` here too; no reflection, no other service (their paths are
//! `UNIMPLEMENTED`), no token. It is always plaintext, and the production profile allows it
//! on any address ([`Profile::check`]: it carries only serving status). It stops with the
//! server ([`crate::GrpcServer`] binds and spawns it).
use std::net::SocketAddr;

use tokio::net::TcpListener;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

use crate::grpc::ServeError;
use crate::profile::{Fact, Profile};
use crate::tasks::Tasks;

/// Where the health-only listener listens.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HealthArgs {
    /// Plaintext listen address serving only gRPC health (grpc.health.v1 Check and Watch,
    /// the same statuses as the gRPC listener; no other service, no token) for probes
    /// without TLS, such as kubelet's grpc probe. CAIRN_PROFILE=production allows it on any
    /// address. Unset: health is served on the gRPC listener only.
    #[arg(long, env = "CAIRN_HEALTH_ADDR")]
    pub health_addr: Option<SocketAddr>,
}

/// A bound health-only listener.
pub(crate) struct HealthListener {
    listener: TcpListener,
    addr: SocketAddr,
}

impl HealthListener {
    /// Binds `addr` (port 0 picks a free port), stating its fact to `profile`.
    pub(crate) async fn bind(addr: SocketAddr, profile: Profile) -> Result<Self, ServeError> {
        profile.check(Some(Fact::PlaintextHealth { addr }))?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        Ok(HealthListener { listener, addr })
    }

    /// The bound address.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves `reporter`'s statuses in `tasks` until their token is cancelled.
    pub(crate) fn spawn(self, reporter: &HealthReporter, tasks: &mut Tasks) -> SocketAddr {
        let Self { listener, addr } = self;
        let health = HealthServer::new(HealthService::from_health_reporter(reporter.clone()));
        let server = tonic::transport::Server::builder().add_service(health);
        let stop = tasks.token();
        tasks.spawn(async move {
            let incoming = crate::accept::incoming(listener);
            if let Err(e) = server
                .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
                .await
            {
                tracing::error!(error = %cairn_telemetry::Chain(&e), "health listener stopped");
            }
        });
        addr
    }
}
