//! `cairn-runner serve`: the runner service. It removes what its instance left behind,
//! consumes `cairn.runq.<target>` for exactly the targets of its credential registry, listens
//! for cancel requests on `cairn.runctl.*`, and serves the admin gRPC API (with health and
//! reflection). On SIGTERM it stops taking requests, lets the runs in flight finish (they can
//! still be cancelled meanwhile), then stops.

mod active;
mod admin;
mod logs;
mod queue;
mod reaper;
mod report;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cairn_auth::{AuthLayer, KeySet};
use cairn_bus::{Chain, Consumer, ConsumerOptions, Namespace, StreamSettings};
use cairn_proto::runner as pb;
use cairn_sdk::{Credential, TokenSource};
use futures::StreamExt;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint};

pub use active::ActiveRuns;
pub use report::result_msg_id;

use crate::config::{ConfigError, ExecutorKind, ServeConfig};
use crate::coordinator::CoordinatorClient;
use crate::credentials::{CredentialRegistry, RegistryError};
use crate::executor::{
    DockerConfig, DockerExecutor, Executor, ExecutorError, ProcessConfig, ProcessExecutor,
    RunnerInstance,
};
use crate::secrets::AwsSecretManager;

/// Why the runner refused to start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A setting is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The credential registry is unusable.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The executor could not be set up, or leftovers could not be removed.
    #[error("executor: {0}")]
    Executor(#[from] ExecutorError),
    /// NATS is unreachable or its streams/consumers could not be set up.
    #[error("NATS: {0}")]
    Nats(String),
    /// The service token or the JWT keys are unusable.
    #[error("credentials: {0}")]
    Auth(String),
    /// The admin listener could not be bound.
    #[error("bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// A running runner.
pub struct Runner {
    grpc_addr: SocketAddr,
    instance: String,
    targets: Vec<String>,
    active: ActiveRuns,
    /// Stops taking run requests.
    stop_taking: CancellationToken,
    /// Stops everything else, once the runs in flight have finished.
    stop_all: CancellationToken,
    workers: JoinSet<()>,
    services: JoinSet<()>,
}

impl Runner {
    /// Starts the runner; fails, saying why, when anything it needs is missing.
    pub async fn start(config: ServeConfig) -> Result<Runner, StartError> {
        let instance_id = config.instance_id()?;
        let instance = RunnerInstance::parse(&instance_id)
            .map_err(|e| ConfigError::Invalid(format!("CAIRN_RUNNER_INSTANCE: {e}")))?;
        let mut registry = CredentialRegistry::load(&config.credentials_file)?;
        if registry.uses_secret_manager() {
            let manager = AwsSecretManager::from_env(config.secrets_endpoint.as_deref()).await;
            registry = registry.with_secret_manager(Arc::new(manager));
        }
        let targets = registry.targets();
        if targets.is_empty() {
            return Err(ConfigError::Invalid(format!(
                "the credential registry {} names no target: this runner would serve nothing",
                config.credentials_file.display()
            ))
            .into());
        }
        let extra_env = config.extra_env_with(|name| std::env::var(name).ok())?;
        let module_library = absolute(&config.modules_dir, "CAIRN_MODULES_DIR")?;
        if config.concurrency == 0 {
            return Err(
                ConfigError::Invalid("CAIRN_RUNNER_CONCURRENCY must be at least 1".into()).into(),
            );
        }

        // 1. The executor, then whatever this instance left behind (a crash, a SIGKILL).
        let exec = executor(&config, &instance, &module_library).await?;
        let reaped = exec.reap_orphans(&instance).await?;
        if reaped > 0 {
            tracing::warn!(instance = %instance, reaped, "removed what an earlier run of this instance left behind");
        }

        // 2. NATS: the streams (idempotent) and one durable consumer per target.
        let nats = async_nats::connect(&config.nats_url)
            .await
            .map_err(|e| StartError::Nats(format!("connect {}: {e}", config.nats_url)))?;
        let js = async_nats::jetstream::new(nats.clone());
        let ns = match &config.nats_prefix {
            Some(prefix) => Namespace::with_prefix(prefix)
                .map_err(|e| ConfigError::Invalid(format!("CAIRN_NATS_PREFIX: {e}")))?,
            None => Namespace::root(),
        };
        cairn_bus::ensure_streams(&js, &ns, &StreamSettings::default())
            .await
            .map_err(|e| StartError::Nats(Chain(&e).to_string()))?;
        let options = ConsumerOptions::new(config.ack_wait);
        let mut consumers = Vec::new();
        for target in &targets {
            let subject = ns
                .runq(target)
                .map_err(|e| ConfigError::Invalid(format!("target {target:?}: {e}")))?;
            let consumer = Consumer::with_options(
                &js,
                &ns.runq_stream(),
                &format!("runner-{target}"),
                &subject,
                options.clone(),
            )
            .await
            .map_err(|e| StartError::Nats(Chain(&e).to_string()))?;
            consumers.push((target.clone(), Arc::new(consumer)));
        }

        // 3. Who the runner is to the coordinator, and who may call its admin API.
        let credential = Credential::from_file(&config.service_token_file)
            .map_err(|e| StartError::Auth(e.to_string()))?;
        let tenancy = match &config.tenancy_url {
            Some(url) => Some(lazy_channel(url)?),
            None => None,
        };
        if matches!(credential, Credential::ApiToken(_)) && tenancy.is_none() {
            return Err(StartError::Auth(
                "the service token is an API token: set CAIRN_TENANCY_URL to exchange it".into(),
            ));
        }
        let tokens = TokenSource::new(credential, tenancy);
        let client =
            CoordinatorClient::with_source(lazy_channel(&config.coordinator_url)?, &tokens);
        let jwks = KeySet::load(&config.jwt_public_keys_file).map_err(|e| {
            StartError::Auth(format!("{}: {e}", config.jwt_public_keys_file.display()))
        })?;

        // 4. Containers of other instances whose run lease expired (never a live one's).
        let stop_all = CancellationToken::new();
        let stop_taking = CancellationToken::new();
        let mut services = JoinSet::new();
        services.spawn({
            let refresh = tokens.spawn_refresh(stop_all.clone());
            async move {
                let _ = refresh.await;
            }
        });
        if tokens.access_token().await.is_ok() {
            reaper::reap_expired(&*exec, &client, &instance).await;
        }

        // 5. Cancel requests.
        let active = ActiveRuns::default();
        let runctl = nats
            .subscribe(ns.runctl_filter())
            .await
            .map_err(|e| StartError::Nats(format!("subscribe to cancel requests: {e}")))?;
        services.spawn(listen_for_cancels(runctl, active.clone(), stop_all.clone()));

        // 6. The admin API.
        let listener = TcpListener::bind(config.grpc_addr)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.grpc_addr,
                source,
            })?;
        let grpc_addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: config.grpc_addr,
            source,
        })?;
        let admin = admin::AdminService {
            active: active.clone(),
            instance: instance_id.clone(),
            targets: targets.clone(),
        };
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_serving::<pb::runner_admin_server::RunnerAdminServer<admin::AdminService>>()
            .await;
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(cairn_proto::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(|e| StartError::Config(ConfigError::Invalid(format!("reflection: {e}"))))?;
        let grpc = tonic::transport::Server::builder()
            .layer(
                AuthLayer::new(Arc::new(jwks))
                    .allow_unauthenticated(["/grpc.health.v1.Health/", "/grpc.reflection."]),
            )
            .add_service(health_service)
            .add_service(reflection)
            .add_service(pb::runner_admin_server::RunnerAdminServer::new(admin));
        let grpc_stop = stop_all.clone();
        services.spawn(async move {
            let incoming = TcpListenerStream::new(listener);
            if let Err(e) = grpc
                .serve_with_incoming_shutdown(incoming, grpc_stop.cancelled_owned())
                .await
            {
                tracing::error!(error = %e, "admin gRPC server stopped");
            }
        });

        // 7. The run queues: `concurrency` runs at a time per target.
        let worker = Arc::new(queue::Worker {
            js,
            ns,
            client,
            exec,
            registry: Arc::new(registry),
            active: active.clone(),
            instance: instance_id.clone(),
            timeout: config.tofu_timeout,
            log_tail: config.log_tail,
            module_library,
            extra_env,
            ack_wait: config.ack_wait,
        });
        let mut workers = JoinSet::new();
        for (target, consumer) in consumers {
            for _ in 0..config.concurrency {
                workers.spawn(worker.clone().serve(
                    consumer.clone(),
                    target.clone(),
                    stop_taking.clone(),
                ));
            }
        }
        tracing::info!(%grpc_addr, instance = instance_id, ?targets, executor = ?config.executor, "runner serving");
        Ok(Runner {
            grpc_addr,
            instance: instance_id,
            targets,
            active,
            stop_taking,
            stop_all,
            workers,
            services,
        })
    }

    /// The admin gRPC address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// This instance's id.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The targets served.
    pub fn targets(&self) -> &[String] {
        &self.targets
    }

    /// The runs in flight.
    pub fn active(&self) -> &ActiveRuns {
        &self.active
    }

    /// A handle that starts the shutdown when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.stop_taking.clone()
    }

    /// Stops taking requests, lets the runs in flight finish, then stops.
    pub async fn shutdown(self) {
        self.stop_taking.cancel();
        self.wait().await;
    }

    /// Waits until told to stop, lets the runs in flight finish, then stops everything.
    pub async fn wait(mut self) {
        self.stop_taking.cancelled().await;
        if !self.active.is_empty() {
            tracing::info!(
                runs = self.active.len(),
                "waiting for the runs in flight to finish"
            );
        }
        while self.workers.join_next().await.is_some() {}
        self.stop_all.cancel();
        while self.services.join_next().await.is_some() {}
        tracing::info!("runner stopped");
    }
}

async fn listen_for_cancels(
    mut sub: async_nats::Subscriber,
    active: ActiveRuns,
    stop: CancellationToken,
) {
    loop {
        let msg = tokio::select! {
            () = stop.cancelled() => return,
            msg = sub.next() => match msg {
                Some(msg) => msg,
                None => return,
            },
        };
        let Ok(cancel) = <pb::CancelRun as prost::Message>::decode(msg.payload) else {
            tracing::warn!(subject = %msg.subject, "cancel request is not a CancelRun message; ignored");
            continue;
        };
        // The subject names the run; a payload naming another run is not trusted.
        if !msg
            .subject
            .as_str()
            .ends_with(&format!(".{}", cancel.run_id))
        {
            tracing::warn!(subject = %msg.subject, "cancel request names another run than its subject; ignored");
            continue;
        }
        if active.cancel(&cancel.run_id) {
            tracing::warn!(
                run_id = cancel.run_id,
                reason = cancel.reason,
                "run cancelled on request"
            );
        }
    }
}

async fn executor(
    config: &ServeConfig,
    instance: &RunnerInstance,
    module_library: &Path,
) -> Result<Arc<dyn Executor>, StartError> {
    let work_root = absolute(&config.work_root, "CAIRN_WORK_ROOT")?;
    tokio::fs::create_dir_all(&work_root)
        .await
        .map_err(|e| ConfigError::Invalid(format!("create {}: {e}", work_root.display())))?;
    Ok(match config.executor {
        ExecutorKind::Docker => {
            let image = config.tofu_image.clone().ok_or_else(|| {
                ConfigError::Invalid("the Docker executor needs CAIRN_TOFU_IMAGE".into())
            })?;
            let mib = config.tofu_memory_mib;
            Arc::new(
                DockerExecutor::connect(DockerConfig {
                    image,
                    instance: instance.clone(),
                    module_library: module_library.to_path_buf(),
                    work_root,
                    plugin_cache_volume: config
                        .plugin_cache
                        .clone()
                        .unwrap_or_else(|| "cairn-plugin-cache".to_owned()),
                    memory_bytes: (mib > 0).then(|| mib.saturating_mul(1 << 20)),
                    nano_cpus: (config.tofu_cpus > 0.0)
                        .then(|| (config.tofu_cpus * 1e9).round() as i64),
                    pids_limit: (config.tofu_pids > 0).then_some(config.tofu_pids),
                    network_mode: config.docker_network.clone(),
                    grace: config.tofu_grace,
                })
                .await?,
            )
        }
        ExecutorKind::Process => {
            let plugin_cache_dir = config
                .plugin_cache
                .as_ref()
                .map_or_else(|| work_root.join("plugin-cache"), PathBuf::from);
            Arc::new(
                ProcessExecutor::new(ProcessConfig {
                    tofu_bin: config.tofu_bin.clone(),
                    instance: instance.clone(),
                    scratch_root: work_root,
                    module_library: module_library.to_path_buf(),
                    plugin_cache_dir,
                    grace: config.tofu_grace,
                })
                .await?,
            )
        }
    })
}

fn absolute(path: &Path, what: &str) -> Result<PathBuf, ConfigError> {
    std::path::absolute(path)
        .map_err(|e| ConfigError::Invalid(format!("{what} {}: {e}", path.display())))
}

fn lazy_channel(url: &str) -> Result<Channel, StartError> {
    Ok(Endpoint::from_shared(url.to_owned())
        .map_err(|e| ConfigError::Invalid(format!("endpoint {url}: {e}")))?
        .connect_timeout(Duration::from_secs(5))
        .connect_lazy())
}
