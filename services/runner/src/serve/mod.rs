//! `cairn-runner serve`: the runner service. It removes what its instance left behind,
//! consumes `cairn.runq.<target>` (run requests) and `cairn.runq.<target>.validate` (target
//! validation requests: [`validate`]) for exactly the targets of its credential registry,
//! through two durable consumers per target, listens for cancel requests on
//! `cairn.runctl.*`, and serves the admin gRPC API (with health and reflection). On SIGTERM
//! it stops taking requests, lets the runs in flight finish (they can still be cancelled
//! meanwhile), then stops.

mod active;
mod admin;
mod logs;
mod queue;
mod reaper;
mod report;
pub mod validate;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_auth::AuthError;
use cairn_bus::{BusError, Consumer, ConsumerOptions, SubjectError};
use cairn_proto::runner as pb;
use cairn_sdk::{Credential, SdkError, TokenSource};
use cairn_service::args::NatsSetupError;
use cairn_service::{Command, GrpcServer, ServeError, Service, Tasks};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

pub use active::ActiveRuns;
use queue::Requests;
pub use report::result_msg_id;

use crate::cli::{Cli, SummarizePlan};
use crate::config::{ConfigError, ExecutorKind, ServeConfig};
use crate::coordinator::CoordinatorClient;
use crate::credentials::{CredentialRegistry, RegistryError};
use crate::executor::{
    DockerConfig, DockerExecutor, Executor, ExecutorError, ProcessConfig, ProcessExecutor,
    RunnerInstance, RunnerInstanceError,
};
use crate::secrets::AwsSecretManager;
use crate::spool::{Spool, SpoolError};
use crate::sts::Sts;

/// Why the runner refused to start. Each variant says what failed; its cause is the source.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A setting is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `CAIRN_RUNNER_INSTANCE` (or the host name) is not a usable instance id.
    #[error("CAIRN_RUNNER_INSTANCE")]
    Instance(#[source] RunnerInstanceError),
    /// A path setting cannot be made absolute, or the work root cannot be created.
    #[error("{setting} {}", path.display())]
    Path {
        /// The setting.
        setting: &'static str,
        /// Its value.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The spool directory is unusable.
    #[error("CAIRN_RUNNER_SPOOL_DIR")]
    Spool(#[source] SpoolError),
    /// The credential registry is unusable.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The executor could not be set up, or leftovers could not be removed.
    #[error("executor")]
    Executor(#[from] ExecutorError),
    /// NATS is unreachable or its streams could not be set up.
    #[error("NATS")]
    Nats(#[source] Box<NatsSetupError>),
    /// A target of the registry names no valid run queue subject.
    #[error("run queue of target {target:?}")]
    RunQueue {
        /// The target.
        target: String,
        /// Why.
        #[source]
        source: SubjectError,
    },
    /// The durable consumer of a target's run queue could not be set up.
    #[error("NATS: the run queue consumer of target {target:?}")]
    Consumer {
        /// The target.
        target: String,
        /// Why.
        #[source]
        source: Box<BusError>,
    },
    /// The cancel requests could not be subscribed to.
    #[error("NATS: subscribe to cancel requests")]
    Subscribe(#[source] async_nats::SubscribeError),
    /// The service token is unusable.
    #[error("service token")]
    ServiceToken(#[source] Box<SdkError>),
    /// The coordinator's client could not be made (client TLS settings).
    #[error("coordinator client")]
    Coordinator(#[source] cairn_sdk::Error),
    /// The service token needs tenancy to be exchanged, and there is none.
    #[error("the service token is an API token: set CAIRN_TENANCY_URL to exchange it")]
    NoTenancy,
    /// The JWT keys are unusable.
    #[error("JWT public keys {}", path.display())]
    Jwks {
        /// The key file.
        path: PathBuf,
        /// Why.
        #[source]
        source: AuthError,
    },
    /// A gRPC endpoint setting is not a usable URL, or its TLS settings are not usable.
    #[error("endpoint {url}")]
    Endpoint {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: cairn_sdk::TlsSettingError,
    },
    /// The admin gRPC server could not be set up.
    #[error("admin gRPC")]
    Grpc(#[from] ServeError),
}

/// A running runner. Its stop has two phases: the queue workers stop taking requests and
/// finish the runs in flight (which can still be cancelled meanwhile), then everything else
/// (the admin API, the cancel listener, the token refresh) stops.
pub struct Runner {
    addrs: cairn_service::Addresses,
    instance: String,
    targets: Vec<String>,
    active: ActiveRuns,
    /// The queue workers; cancelling their token stops taking run requests.
    workers: Tasks,
    /// Everything else, stopped once the runs in flight have finished.
    services: Tasks,
}

impl Service for Runner {
    const BINARY: &'static str = "cairn-runner";
    const NAME: &'static str = "runner";
    type Cli = Cli;
    type Config = ServeConfig;
    type Tool = SummarizePlan;
    type StartError = StartError;

    fn command(cli: Cli) -> Command<ServeConfig, SummarizePlan> {
        cli.into_command()
    }

    fn shared(config: &ServeConfig) -> &cairn_service::SharedArgs {
        &config.shared
    }

    /// Starts the runner; fails, saying why, when anything it needs is missing.
    async fn start(config: ServeConfig) -> Result<Runner, StartError> {
        config.check_profile()?;
        let instance_id = config.instance_id()?;
        let instance = RunnerInstance::parse(&instance_id).map_err(StartError::Instance)?;
        let mut registry = CredentialRegistry::load(&config.credentials_file)?;
        if registry.uses_secret_manager() {
            let manager = AwsSecretManager::from_env(config.secrets_endpoint.as_deref()).await;
            registry = registry.with_secret_manager(Arc::new(manager));
        }
        let registry = registry.with_sts(Sts::new(config.sts_endpoint.clone()));
        let backend_tls = config.backend_tls()?;
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
        let spool = spool(&config)?;
        let exec = executor(&config, &instance, &module_library).await?;
        let reaped = exec.reap_orphans(&instance).await?;
        if reaped > 0 {
            tracing::warn!(instance = %instance, reaped, "removed what an earlier run of this instance left behind");
        }

        // 2. NATS: the streams exist, and two durable consumers per target: its run requests
        // and its validation requests (filters that do not overlap, as a work queue needs).
        let bus = config
            .nats
            .connect(cairn_bus::ServiceRole::Runner, config.shared.profile())
            .await
            .map_err(|e| StartError::Nats(Box::new(e)))?;
        let options = ConsumerOptions::new(config.ack_wait);
        let mut consumers = Vec::new();
        for target in &targets {
            let subject_error = |source| StartError::RunQueue {
                target: target.clone(),
                source,
            };
            let queues = [
                (
                    Requests::Runs,
                    format!("runner-{target}"),
                    bus.ns.runq(target).map_err(subject_error)?,
                ),
                (
                    Requests::Validations,
                    format!("validator-{target}"),
                    bus.ns.runq_validate(target).map_err(subject_error)?,
                ),
            ];
            for (requests, durable, subject) in queues {
                let consumer = Consumer::with_options(
                    &bus.js,
                    &bus.ns.runq_stream(),
                    &durable,
                    &subject,
                    options.clone(),
                )
                .await
                .map_err(|source| StartError::Consumer {
                    target: target.clone(),
                    source: Box::new(source),
                })?;
                consumers.push((target.clone(), requests, Arc::new(consumer)));
            }
        }

        // 3. Who the runner is to the coordinator, and who may call its admin API.
        let credential = Credential::from_file(&config.service_token_file)
            .map_err(|e| StartError::ServiceToken(Box::new(e)))?;
        // The peer channels' TLS: the client settings parsed with the command line.
        let client_tls = config.shared.client_tls();
        let tenancy = match &config.tenancy_url {
            Some(url) => Some(lazy_channel(url, &client_tls)?),
            None => None,
        };
        if matches!(credential, Credential::ApiToken(_)) && tenancy.is_none() {
            return Err(StartError::NoTenancy);
        }
        let tokens = TokenSource::new(credential, tenancy);
        let client = CoordinatorClient::with_source(
            &config.coordinator_url,
            lazy_channel(&config.coordinator_url, &client_tls)?,
            &tokens,
        )
        .map_err(StartError::Coordinator)?;
        let keys = config.jwks.load().map_err(|source| StartError::Jwks {
            path: config.jwks.jwt_public_keys_file.clone(),
            source,
        })?;

        // 4. Containers of other instances whose run lease expired (never a live one's).
        let mut services = Tasks::new();
        let refresh = tokens.spawn_refresh(services.child_token());
        services.spawn(async move {
            let _ = refresh.await;
        });
        if tokens.access_token().await.is_ok() {
            reaper::reap_expired(&*exec, &client, &instance).await;
        }
        // Errored states an earlier run of the runner could not hand in, before new work.
        let (sent, left) = crate::run::resend_spool(&client, &spool).await;
        if sent + left > 0 {
            tracing::warn!(sent, left, spool = %spool.dir().display(), "spooled errored states sent to the quarantine");
        }

        // 5. Cancel requests.
        let active = ActiveRuns::default();
        let runctl = bus
            .client
            .subscribe(bus.ns.runctl_filter())
            .await
            .map_err(StartError::Subscribe)?;
        services.spawn(listen_for_cancels(
            runctl,
            active.clone(),
            services.child_token(),
        ));

        // 6. The admin API.
        let admin = admin::AdminService {
            active: active.clone(),
            instance: instance_id.clone(),
            targets: targets.clone(),
        };
        let registry = Arc::new(registry);
        let addrs = GrpcServer::bind(config.grpc_addr, keys, &config.shared)
            .await?
            .metrics(&config.shared.metrics, &[crate::metrics::METRICS])
            .await?
            .add_service(pb::runner_admin_server::RunnerAdminServer::new(admin))
            .spawn(&mut services)
            .await?;

        // 7. The run queues: `concurrency` runs at a time per target, and its validations one
        // at a time (an STS call each) next to them.
        let worker = Arc::new(queue::Worker {
            js: bus.js,
            ns: bus.ns,
            client,
            exec,
            registry,
            active: active.clone(),
            instance: instance_id.clone(),
            timeout: config.tofu_timeout,
            log_tail: config.log_tail,
            module_library,
            extra_env,
            backend_tls,
            ack_wait: config.ack_wait,
            grace: config.tofu_grace,
            spool,
        });
        let mut workers = Tasks::new();
        for (target, requests, consumer) in consumers {
            let workers_of_queue = match requests {
                Requests::Runs => config.concurrency,
                Requests::Validations => 1,
            };
            for _ in 0..workers_of_queue {
                workers.spawn(worker.clone().serve(
                    consumer.clone(),
                    target.clone(),
                    requests,
                    workers.child_token(),
                ));
            }
        }
        tracing::info!(grpc_addr = %addrs.grpc, instance = instance_id, ?targets, executor = ?config.executor, "runner serving");
        Ok(Runner {
            addrs,
            instance: instance_id,
            targets,
            active,
            workers,
            services,
        })
    }

    /// A handle that starts the shutdown when cancelled: the queue workers stop taking
    /// requests.
    fn shutdown_token(&self) -> CancellationToken {
        self.workers.token()
    }

    /// Waits until told to stop, lets the runs in flight finish, then stops everything.
    async fn wait(self) {
        let Self {
            active,
            workers,
            services,
            ..
        } = self;
        workers.token().cancelled().await;
        if !active.is_empty() {
            tracing::info!(
                runs = active.len(),
                "waiting for the runs in flight to finish"
            );
        }
        workers.wait().await;
        services.shutdown().await;
        tracing::info!("runner stopped");
    }
}

impl Runner {
    /// The admin gRPC address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.addrs.grpc
    }

    /// The bound metrics address, when metrics are served (port 0 picks a free one).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.addrs.metrics
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

    /// Stops taking requests, lets the runs in flight finish, then stops.
    pub async fn shutdown(self) {
        self.workers.token().cancel();
        self.wait().await;
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
        .map_err(|source| StartError::Path {
            setting: "CAIRN_WORK_ROOT",
            path: work_root.clone(),
            source,
        })?;
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

/// The spool directory: absolute, outside the work root (which is removed with the runs),
/// created 0700.
fn spool(config: &ServeConfig) -> Result<Spool, StartError> {
    let dir = absolute(&config.spool_dir, "CAIRN_RUNNER_SPOOL_DIR")?;
    let work_root = absolute(&config.work_root, "CAIRN_WORK_ROOT")?;
    if dir.starts_with(&work_root) || work_root.starts_with(&dir) {
        return Err(ConfigError::Invalid(format!(
            "CAIRN_RUNNER_SPOOL_DIR {} must be outside CAIRN_WORK_ROOT {}",
            dir.display(),
            work_root.display()
        ))
        .into());
    }
    Spool::open(&dir).map_err(StartError::Spool)
}

fn absolute(path: &Path, setting: &'static str) -> Result<PathBuf, StartError> {
    std::path::absolute(path).map_err(|source| StartError::Path {
        setting,
        path: path.to_path_buf(),
        source,
    })
}

/// No per-call timeout: a saved plan or a state can take long to upload.
fn lazy_channel(url: &str, tls: &cairn_sdk::ClientTls) -> Result<Channel, StartError> {
    cairn_sdk::peer_channel(url, tls, None).map_err(|source| StartError::Endpoint {
        url: url.to_owned(),
        source,
    })
}
