//! The `CAIRN_*` settings every service shares. A service flattens them into its own clap
//! config (`#[command(flatten)] db: DbArgs`), so `--help` lists them with the rest: every
//! serving config flattens [`SharedArgs`] (profile, TLS, client TLS, health, metrics,
//! traces) as `shared`, which libs/service reads from there, never from the environment
//! again.
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cairn_auth::{AuthError, KeySet};
use cairn_bus::{
    Bus, BusError, CredentialsError, Namespace, NatsCredentials, ServiceRole, SubjectError,
};
use cairn_sdk::{ClientTls, TlsSettingError};
use cairn_telemetry::OtlpExport;

use crate::health::HealthArgs;
use crate::metrics::MetricsArgs;
use crate::profile::{Fact, ListenArgs, Profile, Refusal};

/// The one parser of duration settings (`90s`, `5m`, `7d`, `0s`).
pub fn duration(s: &str) -> Result<Duration, humantime::DurationError> {
    humantime::parse_duration(s)
}

/// The settings of every serving service that libs/service applies: the profile and the
/// listeners' TLS (`CAIRN_PROFILE`, `CAIRN_TLS_*`), the client side's TLS (`CAIRN_TLS_CA`,
/// `CAIRN_TLS_CLIENT_CERT`/`_KEY`), the health-only listener (`CAIRN_HEALTH_ADDR`), metrics
/// (`CAIRN_METRICS_ADDR`) and traces (`CAIRN_OTLP_ENDPOINT`). A service's config flattens it
/// as `shared` (`#[command(flatten)] pub shared: SharedArgs`); [`crate::run()`] and
/// [`crate::GrpcServer::bind`] take it from there, and a service builds its peer channels
/// with [`SharedArgs::client_tls`]. The default is the local profile without TLS, health
/// listener, metrics or traces (tests).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SharedArgs {
    #[command(flatten)]
    pub listen: ListenArgs,
    #[command(flatten)]
    pub client: ClientTlsArgs,
    #[command(flatten)]
    pub health: HealthArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub traces: TraceArgs,
}

impl SharedArgs {
    /// The environment variables of these settings (what every service's `--help` lists).
    pub fn env_names() -> Vec<String> {
        <Self as clap::Args>::augment_args(clap::Command::new("cairn"))
            .get_arguments()
            .filter_map(clap::Arg::get_env)
            .map(|name| name.to_string_lossy().into_owned())
            .collect()
    }

    /// The start-up profile.
    pub fn profile(&self) -> Profile {
        self.listen.profile
    }

    /// How this service's clients verify `https://` servers and whom they present (its peer
    /// channels, the OTLP exporter, the runner's tofu backend settings).
    pub fn client_tls(&self) -> ClientTls {
        self.client.client_tls()
    }

    /// The profile's rules that the settings alone decide, before anything connects, binds
    /// or exports: TLS on the listeners ([`ListenArgs::check`]) and where traces go
    /// ([`TraceArgs::profile_fact`]).
    pub fn check(&self) -> Result<(), Refusal> {
        self.listen.check()?;
        self.profile().check(self.traces.profile_fact())
    }

    /// The OTLP exporter's channel, with the client TLS settings for `https://` (none
    /// without `CAIRN_OTLP_ENDPOINT`). Inside a Tokio runtime: the channel is lazy.
    pub fn otlp_export(&self) -> Result<Option<OtlpExport>, TlsSettingError> {
        self.traces.export(&self.client_tls())
    }
}

/// A PEM file named by a setting, read once when the command line is parsed (so a wrong path
/// fails there, naming the setting). `Debug` shows the path, never the content.
#[derive(Clone)]
pub struct PemFile {
    path: PathBuf,
    pem: Arc<[u8]>,
}

impl std::fmt::Debug for PemFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PemFile").field(&self.path).finish()
    }
}

/// A PEM file setting that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{setting}: read {path}: {source}")]
pub struct PemFileError {
    setting: &'static str,
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

impl PemFile {
    /// Reads `path`, the value of `setting`.
    pub fn read(setting: &'static str, path: &Path) -> Result<PemFile, PemFileError> {
        let pem = std::fs::read(path).map_err(|source| PemFileError {
            setting,
            path: path.to_path_buf(),
            source,
        })?;
        Ok(PemFile {
            path: path.to_path_buf(),
            pem: pem.into(),
        })
    }

    /// Where it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its content.
    pub fn pem(&self) -> &[u8] {
        &self.pem
    }

    fn ca(value: &str) -> Result<PemFile, PemFileError> {
        Self::read("CAIRN_TLS_CA", Path::new(value))
    }

    fn client_cert(value: &str) -> Result<PemFile, PemFileError> {
        Self::read("CAIRN_TLS_CLIENT_CERT", Path::new(value))
    }

    fn client_key(value: &str) -> Result<PemFile, PemFileError> {
        Self::read("CAIRN_TLS_CLIENT_KEY", Path::new(value))
    }
}

/// The client side of TLS: how the service verifies the `https://` servers it calls (its
/// peers, the OTLP collector; the runner's tofu also verifies the coordinator's backend with
/// it) and the certificate it presents to those that require one (mTLS). The same names and
/// meaning as the CLI's and the SDK's (`cairn_sdk::ClientTls::from_env`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientTlsArgs {
    /// PEM CA certificates that https:// peers and the OTLP collector are verified against;
    /// unset: the system roots.
    #[arg(long, env = "CAIRN_TLS_CA", value_name = "PEM_FILE", value_parser = PemFile::ca)]
    pub tls_ca: Option<PemFile>,
    /// PEM client certificate chain presented to servers that require one (mTLS); with
    /// CAIRN_TLS_CLIENT_KEY.
    #[arg(
        long,
        env = "CAIRN_TLS_CLIENT_CERT",
        value_name = "PEM_FILE",
        value_parser = PemFile::client_cert,
        requires = "tls_client_key"
    )]
    pub tls_client_cert: Option<PemFile>,
    /// PEM key of CAIRN_TLS_CLIENT_CERT.
    #[arg(
        long,
        env = "CAIRN_TLS_CLIENT_KEY",
        value_name = "PEM_FILE",
        value_parser = PemFile::client_key,
        requires = "tls_client_cert"
    )]
    pub tls_client_key: Option<PemFile>,
}

impl ClientTlsArgs {
    /// The settings as the SDK takes them.
    pub fn client_tls(&self) -> ClientTls {
        let mut tls = ClientTls::default();
        if let Some(ca) = &self.tls_ca {
            tls = tls.with_ca_pem(ca.pem());
        }
        // Both or neither: clap requires the other of each.
        if let (Some(cert), Some(key)) = (&self.tls_client_cert, &self.tls_client_key) {
            tls = tls.with_identity_pem(cert.pem(), key.pem());
        }
        tls
    }
}

/// Where traces go.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TraceArgs {
    /// OTLP/gRPC collector the service exports its spans to as OpenTelemetry traces:
    /// https://… (verified with CAIRN_TLS_CA, presenting CAIRN_TLS_CLIENT_CERT when set), or
    /// http://… (plaintext; production accepts it on loopback only, e.g. a local agent at
    /// http://127.0.0.1:4317); unset: no exporter, and no trace context is read or written.
    #[arg(long, env = cairn_telemetry::trace::OTLP_ENDPOINT_VAR)]
    pub otlp_endpoint: Option<String>,
}

impl TraceArgs {
    /// The collector, if one is set (blank counts as unset).
    pub fn endpoint(&self) -> Option<&str> {
        self.otlp_endpoint
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty())
    }

    /// What the profile is told: export without TLS (anything but `https://`), and whether
    /// its host is loopback (`localhost` or a loopback address; an endpoint that does not
    /// parse counts as off-host). [`Profile::check`] decides.
    pub fn profile_fact(&self) -> Option<Fact> {
        let endpoint = self.endpoint()?;
        let uri = endpoint.parse::<http::Uri>().ok();
        if uri.as_ref().and_then(http::Uri::scheme_str) == Some("https") {
            return None;
        }
        let loopback = uri
            .as_ref()
            .and_then(http::Uri::host)
            .is_some_and(is_loopback_host);
        Some(Fact::PlaintextOtlp {
            endpoint: endpoint.to_owned(),
            loopback,
        })
    }

    /// The exporter's channel to the collector: `cairn_sdk::endpoint`'s one rule (TLS per
    /// `tls` for `https://`), a 5 s connect timeout, the exporter's own timeout per export,
    /// connected lazily (the collector may come up later; a failed export drops its spans).
    pub fn export(&self, tls: &ClientTls) -> Result<Option<OtlpExport>, TlsSettingError> {
        let Some(url) = self.endpoint() else {
            return Ok(None);
        };
        let channel = cairn_sdk::endpoint(url, tls)?
            .connect_timeout(Duration::from_secs(5))
            .timeout(cairn_telemetry::trace::EXPORT_TIMEOUT)
            .connect_lazy();
        Ok(Some(OtlpExport::new(url, channel)))
    }
}

/// `localhost` or a loopback address (`127.0.0.1`, `[::1]`).
fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Where the service's schema lives and with which credentials.
#[derive(Debug, Clone, clap::Args)]
pub struct DbArgs {
    /// PostgreSQL URL of the runtime role.
    #[arg(long, env = "CAIRN_DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// PostgreSQL URL of the migrator role (owns the schema); defaults to CAIRN_DATABASE_URL.
    #[arg(long, env = "CAIRN_DATABASE_MIGRATE_URL", hide_env_values = true)]
    pub database_migrate_url: Option<String>,
    /// The service's PostgreSQL schema; defaults to the service's own (tenancy, templates,
    /// state, deployments, drift).
    #[arg(long, env = "CAIRN_DATABASE_SCHEMA")]
    pub database_schema: Option<String>,
}

impl DbArgs {
    /// The migrator's URL.
    pub fn migrate_url(&self) -> &str {
        self.database_migrate_url
            .as_deref()
            .unwrap_or(&self.database_url)
    }

    /// The schema: the one configured, else the service's `default`.
    pub fn schema<'a>(&'a self, default: &'a str) -> &'a str {
        self.database_schema.as_deref().unwrap_or(default)
    }

    /// The database as libs/db takes it.
    pub fn database<'a>(&'a self, default_schema: &'a str) -> cairn_db::Database<'a> {
        cairn_db::Database {
            url: &self.database_url,
            migrate_url: self.migrate_url(),
            schema: self.schema(default_schema),
        }
    }

    /// Migrates the schema as the migrator (granting the runtime role) and returns a lazy
    /// pool of the runtime role.
    pub async fn migrate_and_connect(
        &self,
        default_schema: &str,
        migrator: &cairn_db::Migrator,
        append_only_tables: &[&str],
    ) -> Result<sqlx::PgPool, cairn_db::DbError> {
        cairn_db::migrate_and_connect(self.database(default_schema), migrator, append_only_tables)
            .await
    }
}

/// The NATS server, the service's credentials and the subject namespace.
#[derive(Debug, Clone, clap::Args)]
pub struct NatsArgs {
    /// NATS server URL (JetStream required).
    #[arg(
        long,
        env = "CAIRN_NATS_URL",
        hide_env_values = true,
        default_value = "nats://127.0.0.1:4222"
    )]
    pub nats_url: String,
    /// Optional subject and stream prefix (tests and side-by-side installations); none in
    /// production.
    #[arg(long, env = "CAIRN_NATS_PREFIX")]
    pub nats_prefix: Option<String>,
    /// The service's NATS user: an nkey seed file (what `cairn-tenancy nats credentials`
    /// writes, 0600) or a NATS `.creds` file (user JWT and seed). None: an open server
    /// (refused by CAIRN_PROFILE=production).
    #[arg(long, env = "CAIRN_NATS_CREDS")]
    pub nats_creds: Option<PathBuf>,
}

/// Why NATS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NatsSetupError {
    #[error("CAIRN_NATS_PREFIX")]
    Prefix(#[source] SubjectError),
    #[error("CAIRN_NATS_CREDS")]
    Credentials(#[source] CredentialsError),
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Bus(#[from] BusError),
}

impl NatsArgs {
    /// The subject and stream names.
    pub fn namespace(&self) -> Result<Namespace, NatsSetupError> {
        match &self.nats_prefix {
            Some(p) => Namespace::with_prefix(p).map_err(NatsSetupError::Prefix),
            None => Ok(Namespace::root()),
        }
    }

    /// What the production profile refuses here: no NATS credentials.
    pub fn profile_fact(&self) -> Option<Fact> {
        self.nats_creds.is_none().then_some(Fact::NoNatsCredentials)
    }

    /// The credentials file's content, if one is configured.
    pub fn credentials(&self) -> Result<Option<NatsCredentials>, NatsSetupError> {
        self.nats_creds
            .as_deref()
            .map(NatsCredentials::load)
            .transpose()
            .map_err(NatsSetupError::Credentials)
    }

    /// Connects as `role` (refused by the production `profile` without credentials) and
    /// checks that the streams the role uses exist; creating them is the admin's setup
    /// step (`cairn-tenancy nats setup`).
    pub async fn connect(
        &self,
        role: ServiceRole,
        profile: Profile,
    ) -> Result<Bus, NatsSetupError> {
        profile.check(self.profile_fact())?;
        let ns = self.namespace()?;
        let credentials = self.credentials()?;
        Ok(cairn_bus::connect(&self.nats_url, ns, role, credentials.as_ref()).await?)
    }

    /// Connects as the admin (no stream check): for the setup step.
    pub async fn connect_admin(&self) -> Result<async_nats::Client, NatsSetupError> {
        let credentials = self.credentials()?;
        Ok(cairn_bus::connect_as(&self.nats_url, ServiceRole::Admin, credentials.as_ref()).await?)
    }
}

/// The public keys that verify access tokens.
#[derive(Debug, Clone, clap::Args)]
pub struct JwksArgs {
    /// JWKS file with the public keys that verify access tokens.
    #[arg(long, env = "CAIRN_JWT_PUBLIC_KEYS_FILE")]
    pub jwt_public_keys_file: PathBuf,
}

impl JwksArgs {
    /// Loads the key set.
    pub fn load(&self) -> Result<Arc<KeySet>, AuthError> {
        KeySet::load(&self.jwt_public_keys_file).map(Arc::new)
    }
}

/// The peers a service that acts on its own behalf calls (deployments, drift): tenancy,
/// which also exchanges the service's API token, and the state coordinator, with the file
/// of the token it calls them with ([`crate::startup::peer_channels`]).
#[derive(Debug, Clone, clap::Args)]
pub struct PeerArgs {
    /// Tenancy's gRPC endpoint: targets, and the exchange of the service API token.
    #[arg(
        long,
        env = "CAIRN_TENANCY_URL",
        default_value = "http://127.0.0.1:50051"
    )]
    pub tenancy_url: String,
    /// The state coordinator's gRPC endpoint: runs, states, applied configs.
    #[arg(
        long,
        env = "CAIRN_COORDINATOR_URL",
        default_value = "http://127.0.0.1:50053"
    )]
    pub coordinator_url: String,
    /// File holding the service's token: a service API token (`cairn_…`) exchanged with
    /// tenancy, or an access token (JWT) used as is.
    #[arg(long, env = "CAIRN_SERVICE_TOKEN_FILE")]
    pub service_token_file: PathBuf,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        nats: NatsArgs,
        #[arg(long, value_parser = duration, default_value = "2m")]
        lease: Duration,
        #[command(flatten)]
        shared: SharedArgs,
    }

    #[test]
    fn shared_args_parse_with_their_defaults() {
        // Flags win over the CAIRN_* environment the test may run in.
        let c = Cli::try_parse_from([
            "x",
            "--database-url",
            "postgres://rt@h/db",
            "--nats-url",
            "nats://n:4222",
        ])
        .unwrap();
        assert_eq!(c.db.migrate_url(), "postgres://rt@h/db");
        assert_eq!(c.db.schema("tenancy"), "tenancy");
        assert_eq!(c.nats.nats_url, "nats://n:4222");
        assert!(c.nats.namespace().unwrap().prefix().is_none());
        assert_eq!(c.lease, Duration::from_secs(120));
        let c = Cli::try_parse_from([
            "x",
            "--database-url",
            "postgres://rt@h/db",
            "--database-migrate-url",
            "postgres://mig@h/db",
            "--database-schema",
            "other",
            "--nats-prefix",
            "t1",
        ])
        .unwrap();
        assert_eq!(c.db.migrate_url(), "postgres://mig@h/db");
        assert_eq!(c.db.schema("tenancy"), "other");
        assert_eq!(c.nats.namespace().unwrap().prefix(), Some("t1"));
        assert_eq!(c.nats.nats_creds, None);
        assert!(
            Cli::try_parse_from(["x", "--database-url", "u", "--nats-prefix", "a.b"])
                .unwrap()
                .nats
                .namespace()
                .is_err()
        );
    }

    #[test]
    fn shared_args_parse_with_the_rest() {
        let c = Cli::try_parse_from([
            "x",
            "--database-url",
            "u",
            "--profile",
            "production",
            "--tls-cert",
            "/tls.crt",
            "--tls-key",
            "/tls.key",
            "--health-addr",
            "0.0.0.0:8086",
            "--metrics-addr",
            "127.0.0.1:9464",
            "--otlp-endpoint",
            "http://collector:4317",
        ])
        .unwrap();
        assert_eq!(c.shared.profile(), crate::profile::Profile::Production);
        assert!(c.shared.listen.tls.enabled());
        assert_eq!(
            c.shared.health.health_addr,
            Some("0.0.0.0:8086".parse().unwrap())
        );
        assert_eq!(
            c.shared.metrics.metrics_addr,
            Some("127.0.0.1:9464".parse().unwrap())
        );
        assert_eq!(c.shared.traces.endpoint(), Some("http://collector:4317"));
        let blank = TraceArgs {
            otlp_endpoint: Some("  ".into()),
        };
        assert_eq!(blank.endpoint(), None);
        let mut names = SharedArgs::env_names();
        names.sort();
        assert_eq!(
            names,
            [
                "CAIRN_HEALTH_ADDR",
                "CAIRN_METRICS_ADDR",
                "CAIRN_OTLP_ENDPOINT",
                "CAIRN_PROFILE",
                "CAIRN_TLS_CA",
                "CAIRN_TLS_CERT",
                "CAIRN_TLS_CLIENT_CA",
                "CAIRN_TLS_CLIENT_CERT",
                "CAIRN_TLS_CLIENT_KEY",
                "CAIRN_TLS_KEY",
                "CAIRN_TLS_RELOAD_INTERVAL",
            ]
        );
    }

    #[test]
    fn client_tls_files_are_read_when_parsed_and_a_bad_one_fails_there() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        };
        let (ca, cert, key) = (
            write("ca.pem", "CA PEM"),
            write("client.crt", "CERT PEM"),
            write("client.key", "KEY PEM"),
        );
        let parse = |more: &[&str]| {
            let mut args = vec!["x", "--database-url", "u"];
            args.extend_from_slice(more);
            Cli::try_parse_from(args)
        };

        let c = parse(&[]).unwrap();
        let tls = c.shared.client_tls();
        assert_eq!((tls.ca_pem(), tls.identity_pem()), (None, None));

        let c = parse(&[
            "--tls-ca",
            &ca,
            "--tls-client-cert",
            &cert,
            "--tls-client-key",
            &key,
        ])
        .unwrap();
        let tls = c.shared.client_tls();
        assert_eq!(tls.ca_pem(), Some(&b"CA PEM"[..]));
        assert_eq!(
            tls.identity_pem(),
            Some((&b"CERT PEM"[..], &b"KEY PEM"[..]))
        );
        // The key stays out of Debug.
        assert!(!format!("{c:?}", c = c.shared).contains("KEY PEM"));

        // A path that does not read fails the parse, naming the setting and the cause.
        let missing = dir.path().join("nope.pem").display().to_string();
        let err = parse(&["--tls-ca", &missing]).err().unwrap().to_string();
        assert!(
            err.contains("CAIRN_TLS_CA") && err.contains(&missing) && err.contains("No such file"),
            "{err}"
        );
        // A certificate without its key (or the reverse) is refused too.
        for half in [["--tls-client-cert", &cert], ["--tls-client-key", &key]] {
            let err = parse(&half).err().unwrap();
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::MissingRequiredArgument,
                "{err}"
            );
        }
    }

    #[test]
    fn plaintext_trace_export_is_refused_in_production_off_the_host_only() {
        let traces = |endpoint: &str| TraceArgs {
            otlp_endpoint: Some(endpoint.into()),
        };
        let production =
            |endpoint: &str| Profile::Production.check(traces(endpoint).profile_fact());
        // Off the host without TLS: refused, naming the setting.
        for endpoint in [
            "http://collector.example:4317",
            "http://10.0.0.7:4317",
            "collector.example:4317",
        ] {
            let refusal = production(endpoint).unwrap_err();
            assert_eq!(
                refusal.0,
                Fact::PlaintextOtlp {
                    endpoint: endpoint.into(),
                    loopback: false
                }
            );
            assert!(
                refusal.to_string().contains("CAIRN_OTLP_ENDPOINT"),
                "{refusal}"
            );
        }
        // A local agent, and TLS anywhere: accepted.
        for endpoint in [
            "http://127.0.0.1:4317",
            "http://localhost:4317",
            "http://[::1]:4317",
            "https://collector.example:4317",
        ] {
            assert_eq!(production(endpoint), Ok(()), "{endpoint}");
        }
        assert_eq!(
            traces("https://collector.example:4317").profile_fact(),
            None
        );
        assert_eq!(TraceArgs::default().profile_fact(), None);
        // The local profile accepts it all.
        assert_eq!(
            Profile::Local.check(traces("http://collector.example:4317").profile_fact()),
            Ok(())
        );
        // And SharedArgs::check states it with the listeners' rule.
        let mut shared = SharedArgs {
            traces: traces("http://collector.example:4317"),
            ..SharedArgs::default()
        };
        assert_eq!(shared.check(), Ok(()));
        shared.listen.profile = Profile::Production;
        assert_eq!(shared.check(), Err(Refusal(Fact::TlsNotConfigured)));
        shared.listen.tls.tls_cert = Some("/tls.crt".into());
        shared.listen.tls.tls_key = Some("/tls.key".into());
        assert!(matches!(
            shared.check(),
            Err(Refusal(Fact::PlaintextOtlp {
                loopback: false,
                ..
            }))
        ));
        shared.traces = traces("http://127.0.0.1:4317");
        assert_eq!(shared.check(), Ok(()));
    }

    #[test]
    fn an_otlp_endpoint_that_is_no_url_fails_the_exporter_naming_it() {
        let traces = TraceArgs {
            otlp_endpoint: Some("http://bad host:4317".into()),
        };
        let err = traces.export(&ClientTls::default()).err().unwrap();
        assert!(err.to_string().contains("bad host"), "{err}");
        assert!(
            TraceArgs::default()
                .export(&ClientTls::default())
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn production_refuses_nats_without_credentials() {
        use crate::profile::Profile;
        let args = |creds: Option<&str>| NatsArgs {
            nats_url: "nats://n:4222".into(),
            nats_prefix: None,
            nats_creds: creds.map(PathBuf::from),
        };
        assert_eq!(
            Profile::Production.check(args(None).profile_fact()),
            Err(Refusal(Fact::NoNatsCredentials))
        );
        assert_eq!(Profile::Local.check(args(None).profile_fact()), Ok(()));
        assert_eq!(
            Profile::Production.check(args(Some("/run/nats/deployments.creds")).profile_fact()),
            Ok(())
        );
        assert!(
            Refusal(Fact::NoNatsCredentials)
                .to_string()
                .contains("CAIRN_NATS_CREDS")
        );
    }
}
