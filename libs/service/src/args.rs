//! The `CAIRN_*` settings every service shares. A service flattens them into its own clap
//! config (`#[command(flatten)] db: DbArgs`), so `--help` lists them with the rest.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cairn_auth::{AuthError, KeySet};
use cairn_bus::{
    Bus, BusError, CredentialsError, Namespace, NatsCredentials, ServiceRole, SubjectError,
};

use crate::profile::{Fact, ListenArgs, Refusal};

/// The one parser of duration settings (`90s`, `5m`, `7d`, `0s`).
pub fn duration(s: &str) -> Result<Duration, humantime::DurationError> {
    humantime::parse_duration(s)
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
    #[error("read CAIRN_PROFILE")]
    Profile(#[source] Box<clap::Error>),
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

    /// Connects as `role` (refused by `CAIRN_PROFILE=production` without credentials) and
    /// checks that the streams the role uses exist; creating them is the admin's setup
    /// step (`cairn-tenancy nats setup`).
    pub async fn connect(&self, role: ServiceRole) -> Result<Bus, NatsSetupError> {
        let listen = ListenArgs::from_env().map_err(|e| NatsSetupError::Profile(Box::new(e)))?;
        listen.profile.check(self.profile_fact())?;
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
