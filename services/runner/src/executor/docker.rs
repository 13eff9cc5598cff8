//! The Docker executor: one throwaway container per tofu command (bollard), the run's work
//! volume at `/work`, the module library read-only at `/work/modules`, a shared plugin cache
//! volume, a local target's `base_dir` at the same path, secrets only in the container's
//! environment, resource limits, labels, and a graceful stop (SIGINT, grace, SIGKILL).
//!
//! The work volume is a named local volume bound to `<work_root>/<instance>/<run_id>`, where
//! `work_root` should be on a tmpfs (`/dev/shm` by default). A `type=tmpfs` volume does not do:
//! Docker unmounts it, losing its files, whenever no running container uses it, i.e. between
//! two commands of a run.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as DockerError;
use bollard::models::{
    ContainerCreateBody, ContainerSummary, HostConfig, HostConfigLogConfig, Mount, MountType,
    VolumeCreateRequest,
};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    ListVolumesOptionsBuilder, RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder,
};
use futures::StreamExt;

use super::error::ExecutorError;
use super::lines::LineSink;
use super::redact::Redactor;
use super::spec::{CommandOutcome, CommandSpec, OutputStream, RunId, RunnerInstance, StopReason};
use super::workdir::WorkDirs;
use super::{
    BoxFuture, Executor, ForeignAttempt, LABEL_ATTEMPT, LABEL_RUN_ID, LABEL_RUNNER_INSTANCE,
};

/// The work directory inside a container.
pub const CONTAINER_WORK_DIR: &str = "/work";
/// Where the plugin cache volume is mounted inside a container.
pub const CONTAINER_PLUGIN_CACHE: &str = "/plugin-cache";

/// The work volume of `instance`'s run.
fn volume_name(instance: &RunnerInstance, run_id: &RunId) -> String {
    format!("cairn-work-{instance}-{run_id}")
}

/// Configuration of a [`DockerExecutor`].
#[derive(Debug, Clone)]
pub struct DockerConfig {
    /// The OpenTofu image (`CAIRN_TOFU_IMAGE`); its entrypoint must be `tofu`.
    pub image: String,
    /// This runner's instance id, put on every container and volume as a label.
    pub instance: RunnerInstance,
    /// The module library on the Docker host, mounted read-only at `/work/modules`.
    pub module_library: PathBuf,
    /// Where work directories are made, on a tmpfs; the same path for the runner and the
    /// Docker host.
    pub work_root: PathBuf,
    /// The shared plugin cache volume.
    pub plugin_cache_volume: String,
    /// Memory limit of a container, in bytes.
    pub memory_bytes: Option<i64>,
    /// CPU limit of a container, in units of 10^-9 CPUs.
    pub nano_cpus: Option<i64>,
    /// Maximum number of processes in a container.
    pub pids_limit: Option<i64>,
    /// The container network (`host` in the local profile); Docker's default when `None`.
    pub network_mode: Option<String>,
    /// How long tofu gets after SIGINT before SIGKILL.
    pub grace: Duration,
}

/// Runs every tofu command in a container of its own.
#[derive(Debug)]
pub struct DockerExecutor {
    docker: Docker,
    config: DockerConfig,
    dirs: WorkDirs,
}

impl DockerExecutor {
    /// Connects to the engine (`DOCKER_HOST` or the default socket), agrees on an API version
    /// and creates the plugin cache volume. Fails if the image is not present (it is never
    /// pulled).
    pub async fn connect(config: DockerConfig) -> Result<Self, ExecutorError> {
        if !config.module_library.is_absolute() || !config.work_root.is_absolute() {
            return Err(ExecutorError::Config(
                "the module library and the work root must be absolute paths".into(),
            ));
        }
        let docker = Docker::connect_with_defaults()
            .map_err(ExecutorError::docker("connect to the engine"))?
            .negotiate_version()
            .await
            .map_err(ExecutorError::docker("negotiate the API version"))?;
        docker
            .inspect_image(&config.image)
            .await
            .map_err(ExecutorError::docker(format!(
                "find image {}",
                config.image
            )))?;
        let mut labels = HashMap::new();
        labels.insert("cairn.role".to_owned(), "plugin-cache".to_owned());
        docker
            .create_volume(VolumeCreateRequest {
                name: Some(config.plugin_cache_volume.clone()),
                labels: Some(labels),
                ..Default::default()
            })
            .await
            .map_err(ExecutorError::docker("create the plugin cache volume"))?;
        let dirs = WorkDirs::new(&config.work_root, &config.instance);
        Ok(Self {
            docker,
            config,
            dirs,
        })
    }

    /// The Docker client, e.g. to inspect what the executor created.
    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    fn labels(&self, run_id: &RunId) -> HashMap<String, String> {
        HashMap::from([
            (LABEL_RUN_ID.to_owned(), run_id.to_string()),
            (
                LABEL_RUNNER_INSTANCE.to_owned(),
                self.config.instance.to_string(),
            ),
        ])
    }

    fn container_body(&self, spec: &CommandSpec) -> ContainerCreateBody {
        let mut mounts = vec![
            Mount {
                typ: Some(MountType::VOLUME),
                source: Some(volume_name(&self.config.instance, &spec.run_id)),
                target: Some(CONTAINER_WORK_DIR.to_owned()),
                ..Default::default()
            },
            Mount {
                typ: Some(MountType::BIND),
                source: Some(self.config.module_library.to_string_lossy().into_owned()),
                target: Some(format!("{CONTAINER_WORK_DIR}/modules")),
                read_only: Some(true),
                ..Default::default()
            },
            Mount {
                typ: Some(MountType::VOLUME),
                source: Some(self.config.plugin_cache_volume.clone()),
                target: Some(CONTAINER_PLUGIN_CACHE.to_owned()),
                ..Default::default()
            },
        ];
        if let Some(base) = &spec.base_dir {
            let path = base.to_string_lossy().into_owned();
            mounts.push(Mount {
                typ: Some(MountType::BIND),
                source: Some(path.clone()),
                target: Some(path),
                ..Default::default()
            });
        }
        let mut env = vec![
            "TF_IN_AUTOMATION=1".to_owned(),
            "TF_INPUT=0".to_owned(),
            format!("TF_PLUGIN_CACHE_DIR={CONTAINER_PLUGIN_CACHE}"),
        ];
        env.extend(spec.plain_env.iter().map(|(k, v)| format!("{k}={v}")));
        env.extend(spec.env.iter().map(|(k, v)| format!("{k}={}", v.expose())));
        ContainerCreateBody {
            image: Some(self.config.image.clone()),
            cmd: Some(spec.args.clone()),
            env: Some(env),
            working_dir: Some(CONTAINER_WORK_DIR.to_owned()),
            labels: Some({
                let mut labels = self.labels(&spec.run_id);
                labels.insert(LABEL_ATTEMPT.to_owned(), spec.attempt.to_string());
                labels
            }),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            attach_stdin: Some(false),
            open_stdin: Some(false),
            tty: Some(false),
            host_config: Some(HostConfig {
                mounts: Some(mounts),
                memory: self.config.memory_bytes,
                nano_cpus: self.config.nano_cpus,
                pids_limit: self.config.pids_limit,
                network_mode: self.config.network_mode.clone(),
                // Output is read through the attach stream only and never stored by Docker.
                log_config: Some(HostConfigLogConfig {
                    typ: Some("none".to_owned()),
                    config: None,
                }),
                auto_remove: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    async fn run_command(&self, spec: CommandSpec) -> Result<CommandOutcome, ExecutorError> {
        self.dirs.existing(&spec.run_id).await?;
        // A local target's directory is made on the runner's disk when it is missing, as tofu
        // run on this host would make it; Docker refuses to bind a path that does not exist.
        if let Some(base) = &spec.base_dir {
            tokio::fs::create_dir_all(base)
                .await
                .map_err(|source| ExecutorError::Io {
                    op: "create the local target directory",
                    path: base.clone(),
                    source,
                })?;
        }
        let redactor = Redactor::new(spec.env.iter().map(|(_, v)| v.expose()))
            .map_err(ExecutorError::Redaction)?;
        // Creating, driving and removing the container run in a task of its own, so that a
        // container once created is stopped and removed even when the caller stops waiting
        // (a caller dropped right after the create left it behind in `Created`).
        let body = self.container_body(&spec);
        let docker = self.docker.clone();
        let grace = self.config.grace;
        tokio::spawn(async move {
            let created = docker
                .create_container(None, body)
                .await
                .map_err(ExecutorError::docker("create the tofu container"))?;
            let supervisor = Supervisor {
                docker,
                id: created.id,
                grace,
            };
            let result = supervisor.drive(&spec, redactor).await;
            let removed = supervisor.remove().await;
            let outcome = result?;
            removed?;
            Ok(outcome)
        })
        .await
        .map_err(ExecutorError::Supervisor)?
    }

    /// Every container (running or not) matching `filters`.
    async fn containers(
        &self,
        filters: HashMap<&str, Vec<String>>,
    ) -> Result<Vec<ContainerSummary>, ExecutorError> {
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        self.docker
            .list_containers(Some(options))
            .await
            .map_err(ExecutorError::docker("list containers"))
    }

    async fn remove_containers(
        &self,
        filters: HashMap<&str, Vec<String>>,
    ) -> Result<usize, ExecutorError> {
        let containers = self.containers(filters).await?;
        let mut removed = 0;
        for c in containers {
            let Some(id) = c.id else { continue };
            match self
                .docker
                .remove_container(
                    &id,
                    Some(RemoveContainerOptionsBuilder::new().force(true).build()),
                )
                .await
            {
                Ok(()) => removed += 1,
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(ExecutorError::docker(format!("remove container {id}"))(e)),
            }
        }
        Ok(removed)
    }

    /// Removes a volume; returns whether it existed.
    async fn remove_volume(&self, name: &str) -> Result<bool, ExecutorError> {
        let options = RemoveVolumeOptionsBuilder::new().force(true).build();
        match self.docker.remove_volume(name, Some(options)).await {
            Ok(()) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(ExecutorError::docker(format!("remove volume {name}"))(e)),
        }
    }

    /// Removes the containers and the work volume of `instance`'s run; returns how many.
    async fn remove_run(
        &self,
        instance: &RunnerInstance,
        run_id: &RunId,
    ) -> Result<usize, ExecutorError> {
        let containers = self.remove_containers(run_filter(instance, run_id)).await?;
        let volume = self.remove_volume(&volume_name(instance, run_id)).await?;
        Ok(containers + usize::from(volume))
    }

    /// Removes the containers of one dead attempt (all of the run's for `None`), then the
    /// run's work volume once no container of the instance's run is left.
    async fn remove_attempt(&self, dead: &ForeignAttempt) -> Result<usize, ExecutorError> {
        let mut filters = run_filter(&dead.instance, &dead.run_id);
        if let (Some(attempt), Some(labels)) = (dead.attempt, filters.get_mut("label")) {
            labels.push(format!("{LABEL_ATTEMPT}={attempt}"));
        }
        let mut removed = self.remove_containers(filters).await?;
        let left = self
            .containers(run_filter(&dead.instance, &dead.run_id))
            .await?;
        if left.is_empty() {
            let volume = volume_name(&dead.instance, &dead.run_id);
            removed += usize::from(self.remove_volume(&volume).await?);
        }
        Ok(removed)
    }
}

/// Drives one container from start to exit.
struct Supervisor {
    docker: Docker,
    id: String,
    grace: Duration,
}

impl Supervisor {
    async fn drive(
        &self,
        spec: &CommandSpec,
        redactor: Redactor,
    ) -> Result<CommandOutcome, ExecutorError> {
        let attach = self
            .docker
            .attach_container(
                &self.id,
                Some(
                    AttachContainerOptionsBuilder::new()
                        .stream(true)
                        .stdout(true)
                        .stderr(true)
                        .logs(false)
                        .build(),
                ),
            )
            .await
            .map_err(ExecutorError::docker("attach to the tofu container"))?;
        let mut output = attach.output;
        let mut stdout = LineSink::new(OutputStream::Stdout, redactor.clone(), spec.output.clone());
        let mut stderr = LineSink::new(OutputStream::Stderr, redactor, spec.output.clone());
        let reader = tokio::spawn(async move {
            while let Some(Ok(chunk)) = output.next().await {
                match chunk {
                    LogOutput::StdOut { message } | LogOutput::Console { message } => {
                        stdout.push(&message).await;
                    }
                    LogOutput::StdErr { message } => stderr.push(&message).await,
                    LogOutput::StdIn { .. } => {}
                }
            }
            stdout.finish().await;
            stderr.finish().await;
        });

        self.docker
            .start_container(&self.id, None)
            .await
            .map_err(ExecutorError::docker("start the tofu container"))?;

        let mut outcome = CommandOutcome {
            exit_code: None,
            timed_out: false,
            cancelled: false,
            killed: false,
        };
        let code = tokio::select! {
            code = self.wait() => code?,
            reason = spec.stop_requested() => {
                match reason {
                    StopReason::TimedOut => outcome.timed_out = true,
                    StopReason::Cancelled => outcome.cancelled = true,
                }
                self.kill("SIGINT").await?;
                match tokio::time::timeout(self.grace, self.wait()).await {
                    Ok(code) => code?,
                    Err(_) => {
                        outcome.killed = true;
                        self.kill("SIGKILL").await?;
                        self.wait().await?
                    }
                }
            }
        };
        outcome.exit_code = Some(code);
        // The attach stream ends when the container has exited.
        let _ = reader.await;
        Ok(outcome)
    }

    /// Waits for the container to exit and returns its exit code.
    async fn wait(&self) -> Result<i64, ExecutorError> {
        let mut stream = self.docker.wait_container(&self.id, None);
        match stream.next().await {
            Some(Ok(r)) => Ok(r.status_code),
            // bollard reports a non-zero exit as an error.
            Some(Err(DockerError::DockerContainerWaitError { code, .. })) => Ok(code),
            Some(Err(e)) => Err(ExecutorError::docker("wait for the tofu container")(e)),
            None => Err(ExecutorError::Config(
                "the engine ended the wait without an exit code".into(),
            )),
        }
    }

    async fn kill(&self, signal: &str) -> Result<(), ExecutorError> {
        let options = KillContainerOptionsBuilder::new().signal(signal).build();
        match self.docker.kill_container(&self.id, Some(options)).await {
            Ok(()) => Ok(()),
            // 409: it is not running any more.
            Err(DockerError::DockerResponseServerError {
                status_code: 409, ..
            }) => Ok(()),
            Err(e) => Err(ExecutorError::docker(format!(
                "send {signal} to the tofu container"
            ))(e)),
        }
    }

    async fn remove(&self) -> Result<(), ExecutorError> {
        let options = RemoveContainerOptionsBuilder::new().force(true).build();
        match self.docker.remove_container(&self.id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(ExecutorError::docker("remove the tofu container")(e)),
        }
    }
}

/// The label filter of `instance`'s containers of `run_id`.
fn run_filter(instance: &RunnerInstance, run_id: &RunId) -> HashMap<&'static str, Vec<String>> {
    HashMap::from([(
        "label",
        vec![
            format!("{LABEL_RUN_ID}={run_id}"),
            format!("{LABEL_RUNNER_INSTANCE}={instance}"),
        ],
    )])
}

fn is_not_found(e: &DockerError) -> bool {
    matches!(
        e,
        DockerError::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

impl Executor for DockerExecutor {
    fn prepare_run<'a>(&'a self, run_id: &'a RunId) -> BoxFuture<'a, Result<(), ExecutorError>> {
        Box::pin(async move {
            // A leftover of an earlier attempt: its containers, then its volume and directory.
            self.cleanup_run(run_id).await?;
            let dir = self.dirs.create_empty(run_id).await?;
            let opts = HashMap::from([
                ("type".to_owned(), "none".to_owned()),
                ("o".to_owned(), "bind".to_owned()),
                ("device".to_owned(), dir.to_string_lossy().into_owned()),
            ]);
            self.docker
                .create_volume(VolumeCreateRequest {
                    name: Some(volume_name(&self.config.instance, run_id)),
                    driver: Some("local".to_owned()),
                    driver_opts: Some(opts),
                    labels: Some(self.labels(run_id)),
                    ..Default::default()
                })
                .await
                .map_err(ExecutorError::docker("create the work volume"))?;
            Ok(())
        })
    }

    fn work_dir(&self, run_id: &RunId) -> PathBuf {
        self.dirs.path(run_id)
    }

    fn run(&self, spec: CommandSpec) -> BoxFuture<'_, Result<CommandOutcome, ExecutorError>> {
        Box::pin(self.run_command(spec))
    }

    fn cleanup_run<'a>(&'a self, run_id: &'a RunId) -> BoxFuture<'a, Result<(), ExecutorError>> {
        Box::pin(async move {
            self.remove_run(&self.config.instance, run_id).await?;
            self.dirs.remove(run_id).await
        })
    }

    fn reap_orphans<'a>(
        &'a self,
        instance: &'a RunnerInstance,
    ) -> BoxFuture<'a, Result<usize, ExecutorError>> {
        Box::pin(async move {
            let label = format!("{LABEL_RUNNER_INSTANCE}={instance}");
            let filters = HashMap::from([("label", vec![label.clone()])]);
            let mut reaped = self.remove_containers(filters).await?;
            // Then the work volumes (a new attempt of a run always starts afresh).
            let filters = HashMap::from([("label", vec![label])]);
            let volumes = self
                .docker
                .list_volumes(Some(
                    ListVolumesOptionsBuilder::new().filters(&filters).build(),
                ))
                .await
                .map_err(ExecutorError::docker("list volumes"))?;
            for volume in volumes.volumes.unwrap_or_default() {
                reaped += usize::from(self.remove_volume(&volume.name).await?);
            }
            WorkDirs::new(&self.config.work_root, instance)
                .remove_all()
                .await?;
            Ok(reaped)
        })
    }

    fn foreign_attempts<'a>(
        &'a self,
        own: &'a RunnerInstance,
    ) -> BoxFuture<'a, Result<Vec<ForeignAttempt>, ExecutorError>> {
        Box::pin(async move {
            let filters = HashMap::from([("label", vec![LABEL_RUNNER_INSTANCE.to_owned()])]);
            let containers = self.containers(filters).await?;
            let mut found = Vec::new();
            for c in containers {
                let labels = c.labels.unwrap_or_default();
                let (Some(instance), Some(run)) =
                    (labels.get(LABEL_RUNNER_INSTANCE), labels.get(LABEL_RUN_ID))
                else {
                    continue;
                };
                let (Ok(instance), Ok(run_id)) =
                    (RunnerInstance::parse(instance), RunId::parse("run_id", run))
                else {
                    continue;
                };
                // A label that is not a number is treated as no label: the run's lease decides.
                let attempt = labels.get(LABEL_ATTEMPT).and_then(|a| a.parse().ok());
                let item = ForeignAttempt {
                    instance,
                    run_id,
                    attempt,
                };
                if &item.instance != own && !found.contains(&item) {
                    found.push(item);
                }
            }
            Ok(found)
        })
    }

    fn reap_foreign<'a>(
        &'a self,
        dead: &'a ForeignAttempt,
    ) -> BoxFuture<'a, Result<usize, ExecutorError>> {
        Box::pin(self.remove_attempt(dead))
    }
}
