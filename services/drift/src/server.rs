//! The drift service's own edges: its schema, NATS (the event outbox and message outbox
//! relays, the event and result consumers), the coordinator with the service token, the
//! scheduler and the `Drift` gRPC service. The scaffold (libs/service) serves it with
//! health, reflection, auth, request ids and timeouts.
use std::sync::Arc;

use cairn_proto::drift::drift_server::DriftServer;
use cairn_service::Tasks;
use cairn_service::startup::{self, StartupError};
use tokio::sync::Notify;

use crate::app::{App, Settings};
use crate::config::{Config, DEFAULT_SCHEMA};
use crate::coordinator::CoordinatorClient;
use crate::domain::schedule::Schedule;
use crate::grpc::DriftService;

/// The drift schema's migrations.
pub const MIGRATOR: cairn_db::Migrator = sqlx::migrate!("../../migrations/drift");

/// Why the service refused to start (the scaffold prints the whole chain).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Startup(#[from] StartupError),
    #[error("consumers")]
    Consumers(#[source] cairn_bus::BusError),
}

impl Server {
    pub async fn start(config: Config) -> Result<Server, StartError> {
        config.validate().map_err(StartupError::Config)?;
        // 1. schema, as the migrator (after the profile's NATS rule); 2. NATS: the relays
        //    of both outboxes, then the consumers.
        let startup::Foundation {
            pool,
            bus,
            mut tasks,
            wakers,
        } = startup::foundation(
            config.shared.profile(),
            &config.nats,
            &config.db,
            DEFAULT_SCHEMA,
            &MIGRATOR,
            cairn_bus::ServiceRole::Drift,
        )
        .await?;
        let events = crate::background::events::bind(&bus.js, &bus.ns, config.drift_ack_wait)
            .await
            .map_err(StartError::Consumers)?;
        let results = crate::background::results::bind(&bus.js, &bus.ns, config.drift_ack_wait)
            .await
            .map_err(StartError::Consumers)?;

        // 3. The coordinator, as this service (its token refreshed in the background), over
        //    channels with the client TLS settings parsed with the command line.
        let peers = startup::peer_channels(&config.peers, &config.shared.client_tls(), &mut tasks)?;
        let coord = CoordinatorClient::new(
            &config.peers.coordinator_url,
            peers.coordinator,
            &peers.tokens,
        )
        .map_err(StartupError::Peers)?;
        let app = App {
            pool,
            coord,
            events_notify: wakers.events,
            messages_notify: wakers.messages,
            scheduler_notify: Arc::new(Notify::new()),
            settings: Arc::new(Settings {
                schedule: Schedule {
                    interval: config.drift_check_interval,
                },
                max_per_target: i32::try_from(config.drift_max_per_target).unwrap_or(i32::MAX),
                batch: i64::from(config.drift_batch),
                scan_timeout: config.drift_scan_timeout,
                replica: config.replica(),
                retry_after: config.drift_tick,
            }),
        };
        tasks.spawn(crate::background::events::run(
            events,
            app.clone(),
            tasks.child_token(),
        ));
        tasks.spawn(crate::background::results::run(
            results,
            app.clone(),
            tasks.child_token(),
        ));
        tasks.spawn(crate::background::events::prune_processed(
            app.pool.clone(),
            tasks.child_token(),
        ));
        tasks.spawn(crate::background::scheduler::run(
            app.clone(),
            config.drift_tick,
            tasks.child_token(),
        ));

        // 4. the gRPC service (port 0 works; the bound address is reported).
        let keys = startup::key_set(&config.jwks)?;
        let addrs = startup::grpc_listener(
            config.grpc_addr,
            keys,
            &config.shared,
            &[crate::metrics::METRICS],
        )
        .await?
        .add_service(DriftServer::new(DriftService { app: app.clone() }))
        .spawn(&mut tasks)
        .await
        .map_err(StartupError::Grpc)?;
        tracing::info!(replica = %app.settings.replica, interval = ?config.drift_check_interval, "drift started");
        Ok(Server { addrs, app, tasks })
    }
}

/// A running drift service: its use cases, its tasks and where it listens.
pub struct Server {
    app: App,
    tasks: Tasks,
    addrs: cairn_service::Addresses,
}

cairn_service::grpc_service!(Server {
    binary: "cairn-drift",
    name: "drift",
    config: Config,
    app: App,
    start_error: StartError,
});
