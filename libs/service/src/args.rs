//! The `CAIRN_*` settings every service shares. A service flattens them into its own clap
//! config (`#[command(flatten)] db: DbArgs`), so `--help` lists them with the rest: every
//! serving config flattens [`SharedArgs`] (profile, TLS, health, metrics, traces) as
//! `shared`, which libs/service reads from there, never from the environment again.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cairn_auth::{AuthError, KeySet};
use cairn_bus::{
    Bus, BusError, CredentialsError, Namespace, NatsCredentials, ServiceRole, SubjectError,
};

use crate::health::HealthArgs;
use crate::metrics::MetricsArgs;
use crate::profile::{Fact, ListenArgs, Profile, Refusal};

/// The one parser of duration settings (`90s`, `5m`, `7d`, `0s`).
pub fn duration(s: &str) -> Result<Duration, humantime::DurationError> {
    humantime::parse_duration(s)
}

/// The settings of every serving service that libs/service applies: the profile and the
/// listeners' TLS (`CAIRN_PROFILE`, `CAIRN_TLS_*`), the health-only listener
/// (`CAIRN_HEALTH_ADDR`), metrics (`CAIRN_METRICS_ADDR`) and traces (`CAIRN_OTLP_ENDPOINT`).
/// A service's config flattens it as `shared` (`#[command(flatten)] pub shared:
/// SharedArgs`); [`crate::run()`] and [`crate::GrpcServer::bind`] take it from there. The
/// default is the local profile without TLS, health listener, metrics or traces (tests).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SharedArgs {
    #[command(flatten)]
    pub listen: ListenArgs,
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
}

/// Where traces go.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TraceArgs {
    /// OTLP/gRPC collector the service exports its spans to as OpenTelemetry traces (e.g.
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
                "CAIRN_TLS_CERT",
                "CAIRN_TLS_CLIENT_CA",
                "CAIRN_TLS_KEY",
                "CAIRN_TLS_RELOAD_INTERVAL",
            ]
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
