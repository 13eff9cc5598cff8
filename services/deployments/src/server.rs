//! The deployments service's own edges: its schema, NATS (the event outbox relay, the job
//! relay, the consumers of run results, run logs and drift events), the channels to tenancy
//! and templates with the service token, and its two gRPC services. The scaffold
//! (libs/service) serves them with health, reflection, auth, request ids and timeouts.
use std::sync::Arc;
use std::time::Duration;

use cairn_proto::deployments::{
    deployments_server::DeploymentsServer, instances_server::InstancesServer,
};
use cairn_sdk::Endpoint;
use cairn_service::Tasks;
use cairn_service::startup::{self, StartupError};

use crate::app::App;
use crate::app::watch::WatchHub;
use crate::background::log_consumer::LogConsumer;
use crate::background::worker::Worker;
use crate::config::{Config, DEFAULT_SCHEMA};
use crate::grpc::{DeploymentsService, InstancesService};
use crate::peers::Peers;

const MIGRATOR: cairn_db::Migrator = sqlx::migrate!("../../migrations/deployments");

/// Why the service refused to start (the scaffold prints the whole chain).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Startup(#[from] StartupError),
    #[error("workflow consumers")]
    Workflow(#[source] cairn_bus::BusError),
    #[error("run log consumer")]
    RunLog(#[source] cairn_bus::BusError),
    #[error("drift event consumer")]
    DriftEvents(#[source] cairn_bus::BusError),
}

impl Server {
    pub async fn start(config: Config) -> Result<Server, StartError> {
        config.validate().map_err(StartupError::Config)?;
        // 1. schema, as the migrator (after the profile's NATS rule); 2. NATS streams and the
        //    outboxes' relays (deployment jobs and run requests go through the message
        //    outbox); then the workflow's consumers.
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
            cairn_bus::ServiceRole::Deployments,
        )
        .await?;
        // The run log consumer's handle on JetStream (bound below, once the app exists).
        let runlog_js = bus.js.clone();
        let runlog_ns = bus.ns.clone();
        let drift_js = bus.js.clone();
        let run_wakers = Arc::new(crate::app::workflow::wakers::RunWakers::default());
        let results = crate::background::results::bind(&bus.js, &bus.ns, config.deploy_ack_wait)
            .await
            .map_err(StartError::Workflow)?;
        tasks.spawn(crate::background::results::run(
            results,
            pool.clone(),
            run_wakers.clone(),
            tasks.child_token(),
        ));
        let worker_consumer = if config.deploy_workers > 0 {
            Some(
                Worker::bind(&bus.js, &bus.ns, config.deploy_ack_wait)
                    .await
                    .map_err(StartError::Workflow)?,
            )
        } else {
            None
        };
        let (workflow_nats, workflow_ns) = (bus.client.clone(), bus.ns.clone());

        // 3. Who this service is to the others: its service token, refreshed in the
        //    background (an access token in the file is used as is), over channels with the
        //    client TLS settings parsed with the command line.
        let client_tls = config.shared.client_tls();
        let peers = startup::peer_channels(&config.peers, &client_tls, &mut tasks)?;
        let templates = startup::peer_channel(&config.templates_url, &client_tls)?;
        // The SDK's typed clients on those channels: tenancy and templates for the workflow's
        // inputs, the coordinator for its states and runs.
        let cairn = cairn_service::peer_client(
            &peers.tokens,
            cairn_service::peer_call_options(),
            [
                (
                    Endpoint::Tenancy,
                    config.peers.tenancy_url.as_str(),
                    peers.tenancy,
                ),
                (
                    Endpoint::Templates,
                    config.templates_url.as_str(),
                    templates,
                ),
                (
                    Endpoint::State,
                    config.peers.coordinator_url.as_str(),
                    peers.coordinator,
                ),
            ],
        )
        .map_err(StartupError::Peers)?;
        let (watch, watch_listener) = WatchHub::new(pool.clone(), tasks.child_token());
        tasks.spawn(watch_listener);
        let app = App {
            pool,
            peers: Peers::new(cairn.clone()),
            events_notify: wakers.events,
            jobs_notify: wakers.messages,
            watch,
            coord: crate::coordinator::CoordinatorClient::new(cairn),
            flow: Arc::new(config.flow()),
            run_wakers,
            nats: workflow_nats,
            ns: workflow_ns,
        };
        // The workflow worker (jobs of cairn.deployq) and the expiry of approvals.
        if let Some(consumer) = worker_consumer {
            let worker = Worker {
                app: app.clone(),
                jobs: config.deploy_workers,
                ack_wait: config.deploy_ack_wait,
            };
            tasks.spawn(worker.run(consumer, tasks.child_token()));
        }
        tasks.spawn(crate::background::expiry::run(
            app.clone(),
            tasks.child_token(),
        ));
        // Log lines of the steps' runs, stored per step and streamed to watchers.
        let log_consumer = LogConsumer {
            app: app.clone(),
            js: runlog_js,
            ns: runlog_ns,
            step_log_lines: config.step_log_lines,
            ack_wait: Duration::from_secs(30),
        };
        let runlog = log_consumer.bind().await.map_err(StartError::RunLog)?;
        tasks.spawn(log_consumer.run(runlog, tasks.child_token()));
        // The drift service's events: the drift status of the instances' resources.
        let drift_events =
            crate::background::drift_events::bind(&drift_js, &app.ns, Duration::from_secs(30))
                .await
                .map_err(StartError::DriftEvents)?;
        tasks.spawn(crate::background::drift_events::run(
            drift_events,
            app.pool.clone(),
            tasks.child_token(),
        ));
        tasks.spawn(crate::background::drift_events::prune_processed(
            app.pool.clone(),
            tasks.child_token(),
        ));

        // 4. the gRPC services (port 0 works; the bound address is reported).
        let keys = startup::key_set(&config.jwks)?;
        let addrs = startup::grpc_listener(
            config.grpc_addr,
            keys,
            &config.shared,
            &[crate::metrics::METRICS],
        )
        .await?
        .add_service(InstancesServer::new(InstancesService { app: app.clone() }))
        .add_service(DeploymentsServer::new(DeploymentsService {
            app: app.clone(),
        }))
        .spawn(&mut tasks)
        .await
        .map_err(StartupError::Grpc)?;
        Ok(Server { addrs, app, tasks })
    }
}

/// A running deployments service: its use cases, its tasks (the relays, the token
/// refresh, the gRPC server) and where it listens.
pub struct Server {
    app: App,
    tasks: Tasks,
    addrs: cairn_service::Addresses,
}

cairn_service::grpc_service!(Server {
    binary: "cairn-deployments",
    name: "deployments",
    config: Config,
    app: App,
    start_error: StartError,
});
