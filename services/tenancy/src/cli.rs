//! The command line: `serve` (the default, also without a subcommand), and the one-off
//! subcommands ([`Tool`]): `bootstrap`, `service-token`, `keys` and `nats`
//! ([`crate::nats_tool`]).
use std::error::Error as StdError;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::app::bootstrap;
use crate::config::Config;
use crate::domain::names::{Email, ServiceAccountName, Slug, display_name};
use crate::keys::{KeyFileError, Signer, write_private};
use crate::server::{StartError, migrate_and_connect};
use cairn_service::DbArgs;

#[derive(Debug, Parser)]
#[command(
    name = "cairn-tenancy",
    version,
    about = "Cairn tenancy: tenants, users, roles, API tokens, JWT issuing, targets, audit log",
    long_about = "Cairn tenancy. Without a subcommand it serves (see `cairn-tenancy serve --help` \
                  for the CAIRN_* variables)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve gRPC (the default).
    Serve(Box<Config>),
    #[command(flatten)]
    Tool(Tool),
}

impl Cli {
    /// What to do: serve (with the settings from `CAIRN_*` when no subcommand is given) or
    /// run a one-off subcommand.
    pub fn into_command(self) -> cairn_service::Command<Config, Tool> {
        match self.command {
            None => cairn_service::Command::Serve(Config::parse_from(["cairn-tenancy"])),
            Some(Command::Serve(config)) => cairn_service::Command::Serve(*config),
            Some(Command::Tool(tool)) => cairn_service::Command::Tool(tool),
        }
    }
}

/// The one-off subcommands.
#[derive(Debug, Subcommand)]
pub enum Tool {
    /// Create the first tenant and its owner on an empty database and print a one-time
    /// owner API token (with the platform-admin scope). Refuses to run twice.
    Bootstrap(BootstrapArgs),
    /// Mint a service API token for a named service account (created if needed) and write
    /// it to a file with mode 0600. The service reads it from CAIRN_SERVICE_TOKEN_FILE.
    ServiceToken(ServiceTokenArgs),
    /// Manage the signing keys file.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// NATS: the services' users and permissions, and the streams (admin).
    #[command(subcommand)]
    Nats(crate::nats_tool::NatsCommand),
}

#[derive(Debug, Args)]
pub struct BootstrapArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[arg(long)]
    pub tenant_slug: String,
    #[arg(long)]
    pub tenant_name: String,
    #[arg(long)]
    pub owner_email: String,
    #[arg(long)]
    pub owner_name: String,
}

#[derive(Debug, Args)]
pub struct ServiceTokenArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// The service account, e.g. `deployments` or `runner`.
    #[arg(long)]
    pub name: String,
    /// Where to write the token (mode 0600).
    #[arg(long)]
    pub out: PathBuf,
    /// Expiry of the token (e.g. `90d`); none by default.
    #[arg(long, value_parser = cairn_service::duration)]
    pub ttl: Option<Duration>,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Print the public JWK Set (for CAIRN_JWT_PUBLIC_KEYS_FILE of every service).
    Export {
        #[arg(long, env = "CAIRN_JWT_PRIVATE_KEYS_FILE")]
        private_keys_file: PathBuf,
    },
    /// Add a new Ed25519 key (creating the file, with the key active, if it is missing).
    Generate {
        #[arg(long, env = "CAIRN_JWT_PRIVATE_KEYS_FILE")]
        private_keys_file: PathBuf,
        #[arg(long)]
        kid: String,
        /// Make the new key the signing key (publish the JWKS first).
        #[arg(long)]
        activate: bool,
    },
    /// Make an existing key the signing key.
    Activate {
        #[arg(long, env = "CAIRN_JWT_PRIVATE_KEYS_FILE")]
        private_keys_file: PathBuf,
        #[arg(long)]
        kid: String,
    },
    /// Remove a retired key (after the longest token lifetime has passed).
    Remove {
        #[arg(long, env = "CAIRN_JWT_PRIVATE_KEYS_FILE")]
        private_keys_file: PathBuf,
        #[arg(long)]
        kid: String,
    },
}

/// Why a subcommand failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(transparent)]
    Keys(#[from] KeyFileError),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    App(#[from] crate::error::Error),
    #[error(transparent)]
    Nats(#[from] crate::nats_tool::NatsToolError),
    #[error("write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl From<crate::domain::Invalid> for CliError {
    fn from(e: crate::domain::Invalid) -> Self {
        CliError::Invalid(e.0)
    }
}

impl cairn_service::Tool for Tool {
    async fn run(self) -> Result<(), Box<dyn StdError + Send + Sync + 'static>> {
        Ok(run(self).await?)
    }
}

/// Runs a one-off subcommand; what it prints goes to stdout.
pub async fn run(tool: Tool) -> Result<(), CliError> {
    match tool {
        Tool::Bootstrap(args) => {
            let slug = Slug::parse(&args.tenant_slug)?;
            let email = Email::parse(&args.owner_email)?;
            let tenant_name = display_name("tenant-name", &args.tenant_name)?;
            let owner_name = display_name("owner-name", &args.owner_name)?;
            let pool = migrate_and_connect(&args.db).await?;
            let done =
                bootstrap::bootstrap(&pool, &slug, &tenant_name, &email, &owner_name).await?;
            println!("tenant_id={}", done.tenant_id);
            println!("owner_user_id={}", done.user_id);
            println!("api_token={}", done.api_token.expose());
            println!("# The API token is shown once; store it now.");
            Ok(())
        }
        Tool::ServiceToken(args) => {
            let name = ServiceAccountName::parse(&args.name)?;
            let pool = migrate_and_connect(&args.db).await?;
            let secret = bootstrap::service_token(&pool, &name, args.ttl).await?;
            write_private(&args.out, secret.expose().as_bytes()).map_err(|source| {
                CliError::Write {
                    path: args.out.clone(),
                    source,
                }
            })?;
            println!(
                "wrote a service API token for {} to {}",
                name.as_str(),
                args.out.display()
            );
            Ok(())
        }
        Tool::Nats(command) => Ok(crate::nats_tool::run(command).await?),
        Tool::Keys(KeysCommand::Export { private_keys_file }) => {
            let signer = Signer::load(&private_keys_file)?;
            println!("{}", signer.jwks_json());
            Ok(())
        }
        Tool::Keys(KeysCommand::Generate {
            private_keys_file,
            kid,
            activate,
        }) => {
            let signer = if private_keys_file.exists() {
                let mut signer = Signer::load(&private_keys_file)?;
                signer.add_generated(&kid, activate)?;
                signer
            } else {
                let key = cairn_auth::SigningKey::generate(kid.clone()).map_err(|source| {
                    KeyFileError::Key {
                        kid: kid.clone(),
                        source,
                    }
                })?;
                Signer::from_keys(vec![key])?
            };
            signer.save(&private_keys_file)?;
            println!(
                "{}: keys {:?}, active {}",
                private_keys_file.display(),
                signer.keys().iter().map(|k| k.kid()).collect::<Vec<_>>(),
                signer.active_kid()
            );
            Ok(())
        }
        Tool::Keys(KeysCommand::Activate {
            private_keys_file,
            kid,
        }) => {
            let mut signer = Signer::load(&private_keys_file)?;
            signer.activate(&kid)?;
            signer.save(&private_keys_file)?;
            println!("active key is now {kid}; restart tenancy");
            Ok(())
        }
        Tool::Keys(KeysCommand::Remove {
            private_keys_file,
            kid,
        }) => {
            let mut signer = Signer::load(&private_keys_file)?;
            signer.remove(&kid)?;
            signer.save(&private_keys_file)?;
            println!("removed key {kid}");
            Ok(())
        }
    }
}
