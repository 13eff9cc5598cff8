//! `cairn-runner serve` settings from `CAIRN_*` environment variables (or flags); `--help`
//! lists them all.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use cairn_sdk::ClientTls;
use cairn_service::{Fact, JwksArgs, NatsArgs, Refusal, SharedArgs, duration};
use clap::{Args, ValueEnum};

use crate::executor::Secret;
use crate::pipeline::BackendTls;

/// Which executor runs the tofu commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExecutorKind {
    /// A throwaway container per command from `CAIRN_TOFU_IMAGE` (production).
    Docker,
    /// `CAIRN_TOFU_BIN` as a child process in its own process group (development).
    Process,
}

/// The runner service's settings.
#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    /// This runner's instance id: a label on everything it creates. Keep it stable across
    /// restarts (a restarted instance removes what it left behind); defaults to the host name.
    #[arg(long, env = "CAIRN_RUNNER_INSTANCE")]
    pub instance: Option<String>,
    // NATS: the run queues, results, logs and cancel requests.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// The state coordinator's gRPC endpoint.
    #[arg(
        long,
        env = "CAIRN_COORDINATOR_URL",
        default_value = "http://127.0.0.1:50053"
    )]
    pub coordinator_url: String,
    /// Tenancy's gRPC endpoint, to exchange a service API token for access tokens (not
    /// needed when the token file holds an access token).
    #[arg(long, env = "CAIRN_TENANCY_URL")]
    pub tenancy_url: Option<String>,
    /// File holding the runner's service token: an access token (JWT) used as is, or a
    /// service API token (`cairn_…`) exchanged with tenancy.
    #[arg(long, env = "CAIRN_SERVICE_TOKEN_FILE")]
    pub service_token_file: PathBuf,
    /// The credential registry (JSON); the runner serves exactly the targets it names.
    #[arg(long, env = "CAIRN_CREDENTIALS_FILE")]
    pub credentials_file: PathBuf,
    /// Endpoint override for the secret manager (AWS Secrets Manager API); the standard AWS
    /// environment configures region and credentials.
    #[arg(long, env = "CAIRN_SECRETS_ENDPOINT")]
    pub secrets_endpoint: Option<String>,
    /// Endpoint override for STS, through which AWS targets' roles are assumed with the
    /// registry's base credentials (unset: STS's regional endpoint).
    #[arg(long, env = "CAIRN_STS_ENDPOINT")]
    pub sts_endpoint: Option<String>,
    /// Admin gRPC listen address (port 0 picks a free port).
    #[arg(long, env = "CAIRN_GRPC_ADDR", default_value = "127.0.0.1:50054")]
    pub grpc_addr: SocketAddr,
    // The settings libs/service applies: CAIRN_PROFILE, CAIRN_TLS_*, CAIRN_HEALTH_ADDR,
    // CAIRN_METRICS_ADDR, CAIRN_OTLP_ENDPOINT.
    #[command(flatten)]
    pub shared: SharedArgs,
    // The public keys that verify access tokens of admin calls.
    #[command(flatten)]
    pub jwks: JwksArgs,
    /// The executor.
    #[arg(long, env = "CAIRN_EXECUTOR", value_enum, default_value = "process")]
    pub executor: ExecutorKind,
    /// The OpenTofu image of the Docker executor (never pulled: it must be present).
    #[arg(long, env = "CAIRN_TOFU_IMAGE")]
    pub tofu_image: Option<String>,
    /// The CA (a PEM file) tofu verifies the coordinator's https state backend with, handed
    /// to every command as `TF_HTTP_CLIENT_CA_CERTIFICATE_PEM`; default: `CAIRN_TLS_CA`.
    /// With neither, tofu uses its image's system roots. Under mTLS (`CAIRN_TLS_CLIENT_CERT`
    /// and `_KEY`) tofu also presents the runner's client certificate.
    #[arg(long, env = "CAIRN_TOFU_BACKEND_CA")]
    pub tofu_backend_ca: Option<PathBuf>,
    /// The OpenTofu binary of the process executor.
    #[arg(long, env = "CAIRN_TOFU_BIN", default_value = "tofu")]
    pub tofu_bin: PathBuf,
    /// The limit of each tofu command; then SIGINT, the grace period, SIGKILL.
    #[arg(long, env = "CAIRN_TOFU_TIMEOUT", default_value = "45m", value_parser = duration)]
    pub tofu_timeout: Duration,
    /// How long tofu gets after SIGINT (to persist state and unlock) before SIGKILL.
    #[arg(long, env = "CAIRN_TOFU_GRACE", default_value = "30s", value_parser = duration)]
    pub tofu_grace: Duration,
    /// Extra environment of every tofu command: `NAME=value` or `NAME` (the runner's own
    /// value), separated by newlines or commas (e.g. a proxy). Not for secrets.
    #[arg(long, env = "CAIRN_EXECUTOR_EXTRA_ENV", default_value = "")]
    pub extra_env: String,
    /// The module library, mounted read-only at `modules/` in every work directory.
    #[arg(long, env = "CAIRN_MODULES_DIR", default_value = "modules")]
    pub modules_dir: PathBuf,
    /// Where run work directories are made; a tmpfs (the same path on the Docker host).
    #[arg(long, env = "CAIRN_WORK_ROOT", default_value = "/dev/shm/cairn-runner")]
    pub work_root: PathBuf,
    /// Where an `errored.tfstate` tofu left is kept until the coordinator has confirmed it
    /// (a restarted runner re-sends what is there before it takes new work): on the
    /// runner's own persistent disk, never inside the work root. Made 0700, files 0600.
    #[arg(
        long,
        env = "CAIRN_RUNNER_SPOOL_DIR",
        default_value = "/var/lib/cairn-runner/spool"
    )]
    pub spool_dir: PathBuf,
    /// The provider plugin cache: a Docker volume name (Docker) or a directory (process;
    /// default `<work root>/plugin-cache`).
    #[arg(long, env = "CAIRN_PLUGIN_CACHE")]
    pub plugin_cache: Option<String>,
    /// Memory limit of a tofu container, in MiB.
    #[arg(long, env = "CAIRN_TOFU_MEMORY_MIB", default_value_t = 2048)]
    pub tofu_memory_mib: i64,
    /// CPU limit of a tofu container.
    #[arg(long, env = "CAIRN_TOFU_CPUS", default_value_t = 1.0)]
    pub tofu_cpus: f64,
    /// Process limit of a tofu container.
    #[arg(long, env = "CAIRN_TOFU_PIDS", default_value_t = 512)]
    pub tofu_pids: i64,
    /// The Docker network of tofu containers (Docker's default when unset; `host` locally).
    #[arg(long, env = "CAIRN_DOCKER_NETWORK")]
    pub docker_network: Option<String>,
    /// Runs executed at once per target by this instance.
    #[arg(long, env = "CAIRN_RUNNER_CONCURRENCY", default_value_t = 2)]
    pub concurrency: usize,
    /// How long NATS waits for a sign of life before redelivering a run request (the
    /// runner sends progress acknowledgements while a run goes on).
    #[arg(long, env = "CAIRN_RUNNER_ACK_WAIT", default_value = "60s", value_parser = duration)]
    pub ack_wait: Duration,
    /// How many of the last redacted log lines go with a result.
    #[arg(long, env = "CAIRN_LOG_TAIL", default_value_t = 20)]
    pub log_tail: usize,
}

/// Why the settings are unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// An entry of `CAIRN_EXECUTOR_EXTRA_ENV` is not usable.
    #[error("CAIRN_EXECUTOR_EXTRA_ENV: {0}")]
    ExtraEnv(String),
    /// Another setting is not usable.
    #[error("{0}")]
    Invalid(String),
    /// A file setting cannot be read.
    #[error("{setting} {}", path.display())]
    File {
        /// The setting.
        setting: &'static str,
        /// Its value.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A PEM setting holds no certificate, or is not text.
    #[error("{setting}: {problem}")]
    Pem {
        /// The setting.
        setting: &'static str,
        /// What is wrong.
        problem: &'static str,
    },
    /// The production profile refuses these settings.
    #[error(transparent)]
    Refused(#[from] Refusal),
}

/// The text of a PEM setting; `certificate`: it must hold one.
fn pem_text(setting: &'static str, pem: &[u8], certificate: bool) -> Result<String, ConfigError> {
    let text = String::from_utf8(pem.to_vec()).map_err(|_| ConfigError::Pem {
        setting,
        problem: "not PEM text",
    })?;
    if certificate && !text.contains("-----BEGIN CERTIFICATE-----") {
        return Err(ConfigError::Pem {
            setting,
            problem: "no PEM certificate in it",
        });
    }
    Ok(text)
}

/// Variables the runner sets itself; the extra environment may not override them.
const RESERVED_PREFIXES: &[&str] = &["TF_HTTP_", "TF_VAR_", "CAIRN_"];
const RESERVED_NAMES: &[&str] = &["TF_IN_AUTOMATION", "TF_PLUGIN_CACHE_DIR", "TF_DATA_DIR"];

impl ServeConfig {
    /// `CAIRN_EXECUTOR_EXTRA_ENV` as pairs; a bare `NAME` takes the runner's own value
    /// through `lookup` (and is skipped when the runner has none).
    pub fn extra_env_with(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, ConfigError> {
        let mut out = Vec::new();
        for item in self
            .extra_env
            .split(['\n', ','])
            .map(str::trim)
            .filter(|i| !i.is_empty())
        {
            let (name, value) = match item.split_once('=') {
                Some((name, value)) => (name.trim(), Some(value.to_owned())),
                None => (item, None),
            };
            if !crate::credentials::is_env_name(name) {
                return Err(ConfigError::ExtraEnv(format!(
                    "{name:?} is not a variable name"
                )));
            }
            if RESERVED_NAMES.contains(&name)
                || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
            {
                return Err(ConfigError::ExtraEnv(format!(
                    "{name} is set by the runner itself"
                )));
            }
            if let Some(value) = value.or_else(|| lookup(name)) {
                out.push((name.to_owned(), value));
            }
        }
        Ok(out)
    }

    /// What the production profile refuses in these settings: the process executor and NATS
    /// without credentials. (The admin listener's facts are stated by libs/service when it
    /// binds.)
    pub fn profile_facts(&self) -> impl Iterator<Item = Fact> {
        (self.executor == ExecutorKind::Process)
            .then_some(Fact::ProcessExecutor)
            .into_iter()
            .chain(self.nats.profile_fact())
    }

    /// Checks [`ServeConfig::profile_facts`] against `CAIRN_PROFILE`, before anything starts.
    pub fn check_profile(&self) -> Result<(), ConfigError> {
        Ok(self.shared.profile().check(self.profile_facts())?)
    }

    /// What tofu verifies the coordinator's https backend with: `CAIRN_TOFU_BACKEND_CA` (else
    /// the client TLS settings' `CAIRN_TLS_CA`) and the client identity of
    /// `CAIRN_TLS_CLIENT_CERT`/`_KEY` (both parsed with the command line, in `shared`), read
    /// now (a bad file fails the start, naming it).
    pub fn backend_tls(&self) -> Result<BackendTls, ConfigError> {
        self.backend_tls_with(&self.shared.client_tls())
    }

    /// [`ServeConfig::backend_tls`] with the client TLS settings given.
    pub fn backend_tls_with(&self, client: &ClientTls) -> Result<BackendTls, ConfigError> {
        let ca = match &self.tofu_backend_ca {
            Some(path) => {
                let pem = std::fs::read(path).map_err(|source| ConfigError::File {
                    setting: "CAIRN_TOFU_BACKEND_CA",
                    path: path.clone(),
                    source,
                })?;
                Some(pem_text("CAIRN_TOFU_BACKEND_CA", &pem, true)?)
            }
            None => client
                .ca_pem()
                .map(|pem| pem_text("CAIRN_TLS_CA", pem, true))
                .transpose()?,
        };
        let identity = match client.identity_pem() {
            Some((cert, key)) => Some((
                pem_text("CAIRN_TLS_CLIENT_CERT", cert, true)?,
                Secret::new(pem_text("CAIRN_TLS_CLIENT_KEY", key, false)?),
            )),
            None => None,
        };
        Ok(BackendTls::new(ca, identity))
    }

    /// The instance id: `CAIRN_RUNNER_INSTANCE`, else the host name.
    pub fn instance_id(&self) -> Result<String, ConfigError> {
        if let Some(id) = &self.instance {
            return Ok(id.clone());
        }
        let host = rustix::system::uname();
        let name = host.nodename().to_string_lossy().into_owned();
        if name.is_empty() {
            return Err(ConfigError::Invalid(
                "no host name: set CAIRN_RUNNER_INSTANCE".into(),
            ));
        }
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeConfig,
    }

    fn parse(extra: &[&str]) -> ServeConfig {
        let mut args = vec![
            "cairn-runner",
            "--service-token-file",
            "/etc/cairn/runner.token",
            "--credentials-file",
            "/etc/cairn/credentials.json",
            "--jwt-public-keys-file",
            "/etc/cairn/jwks.json",
        ];
        args.extend_from_slice(extra);
        match Cli::try_parse_from(args) {
            Ok(cli) => cli.serve,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = parse(&[]);
        assert_eq!(c.grpc_addr.port(), 50054);
        assert_eq!(c.tofu_timeout, Duration::from_secs(45 * 60));
        assert_eq!(c.executor, ExecutorKind::Process);
        assert_eq!(c.concurrency, 2);
        assert_eq!(c.spool_dir, PathBuf::from("/var/lib/cairn-runner/spool"));
        assert!(!c.spool_dir.starts_with(&c.work_root));
    }

    #[test]
    fn the_backend_ca_is_its_own_setting_else_cairn_tls_ca_and_a_bad_file_names_the_setting() {
        let dir = std::env::temp_dir().join(format!("cairn-runner-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        let ca = dir.join("backend-ca.pem");
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        std::fs::write(&ca, pem).unwrap_or_default();
        let client = ClientTls::default()
            .with_ca_pem("-----BEGIN CERTIFICATE-----\nOTHER\n-----END CERTIFICATE-----\n")
            .with_identity_pem(pem, "-----BEGIN PRIVATE KEY-----\nKEY\n");
        let shown = |tls: &BackendTls| format!("{tls:?}");

        // Its own setting wins; the identity comes from the client settings.
        let c = parse(&["--tofu-backend-ca", &ca.display().to_string()]);
        let tls = c.backend_tls_with(&client).map_err(|e| e.to_string());
        assert_eq!(
            tls.as_ref().map(shown),
            Ok("BackendTls { ca: true, identity: true }".to_owned())
        );
        // Without it, CAIRN_TLS_CA; without either, nothing (tofu's system roots).
        let c = parse(&[]);
        assert!(c.backend_tls_with(&client).is_ok());
        assert_eq!(
            c.backend_tls_with(&ClientTls::default())
                .map(|t| shown(&t))
                .map_err(|e| e.to_string()),
            Ok("BackendTls { ca: false, identity: false }".to_owned())
        );

        // A missing file, or one without a certificate: an error naming the setting.
        let c = parse(&["--tofu-backend-ca", "/nonexistent/ca.pem"]);
        let err = c
            .backend_tls_with(&client)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(
            err,
            Err("CAIRN_TOFU_BACKEND_CA /nonexistent/ca.pem".to_owned())
        );
        std::fs::write(&ca, "not a certificate").unwrap_or_default();
        let c = parse(&["--tofu-backend-ca", &ca.display().to_string()]);
        let err = c
            .backend_tls_with(&client)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(
            err,
            Err("CAIRN_TOFU_BACKEND_CA: no PEM certificate in it".to_owned())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_process_executor_and_nats_without_credentials_are_production_facts() {
        assert_eq!(
            parse(&[]).profile_facts().collect::<Vec<_>>(),
            vec![Fact::ProcessExecutor, Fact::NoNatsCredentials]
        );
        assert_eq!(
            parse(&["--executor", "docker"])
                .profile_facts()
                .collect::<Vec<_>>(),
            vec![Fact::NoNatsCredentials]
        );
        let creds = parse(&[
            "--executor",
            "docker",
            "--nats-creds",
            "/run/nats/runner.creds",
        ]);
        assert_eq!(creds.profile_facts().count(), 0);
    }

    #[test]
    fn extra_env_takes_pairs_and_runner_values_and_refuses_reserved_names() {
        let c = parse(&[
            "--extra-env",
            "HTTPS_PROXY=http://proxy:3128, NO_PROXY\nTOFU_SIM_X=1",
        ]);
        let env = c
            .extra_env_with(|n| (n == "NO_PROXY").then(|| "localhost".to_owned()))
            .unwrap_or_default();
        assert_eq!(
            env,
            vec![
                ("HTTPS_PROXY".to_owned(), "http://proxy:3128".to_owned()),
                ("NO_PROXY".to_owned(), "localhost".to_owned()),
                ("TOFU_SIM_X".to_owned(), "1".to_owned()),
            ]
        );
        for bad in [
            "TF_HTTP_PASSWORD=x",
            "CAIRN_X=1",
            "TF_VAR_secret=1",
            "1BAD=2",
            "A-B=1",
        ] {
            let c = parse(&["--extra-env", bad]);
            assert!(c.extra_env_with(|_| None).is_err(), "{bad} accepted");
        }
    }
}
