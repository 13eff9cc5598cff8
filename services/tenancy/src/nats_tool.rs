//! `cairn-tenancy nats …`: the NATS set-up steps an operator (or run-platform.sh, or the
//! Kubernetes Job) runs before the services start:
//! - `nats credentials --dir DIR`: one nkey user per role of
//!   [`cairn_bus::permissions`](mod@cairn_bus::permissions) (`DIR/<role>.creds`, an nkey
//!   seed file, 0600; kept when it exists, so running it again changes no service's
//!   credentials) and `DIR/nats-server.conf`, the account and users
//!   with their permissions, rewritten every time (include it in the server's
//!   configuration, or pass it with `-c`);
//! - `nats setup`: connects with the admin's credentials and creates or updates the
//!   streams (the services only check that they exist).
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use cairn_bus::{NatsCredentials, NatsUser, ServiceRole, StreamSettings};
use cairn_service::NatsArgs;
use cairn_service::args::NatsSetupError;

use crate::keys::write_private;

#[derive(Debug, Subcommand)]
pub enum NatsCommand {
    /// Create or update the JetStream streams, as the admin (CAIRN_NATS_CREDS: admin.creds).
    Setup {
        #[command(flatten)]
        nats: NatsArgs,
    },
    /// Write one NATS user per service (DIR/ROLE.creds, 0600, kept when present) and the
    /// nats-server configuration that grants each its permissions (DIR/nats-server.conf).
    Credentials(CredentialsArgs),
}

#[derive(Debug, Args)]
pub struct CredentialsArgs {
    /// Where the credentials and the server configuration go (created, mode 0700).
    #[arg(long)]
    pub dir: PathBuf,
    /// Subject and stream prefix of the permissions (side-by-side installations).
    #[arg(long, env = "CAIRN_NATS_PREFIX")]
    pub nats_prefix: Option<String>,
}

/// Why a `nats` subcommand failed.
#[derive(Debug, thiserror::Error)]
pub enum NatsToolError {
    #[error(transparent)]
    Nats(#[from] NatsSetupError),
    #[error(transparent)]
    Bus(#[from] cairn_bus::BusError),
    #[error(transparent)]
    Credentials(#[from] cairn_bus::CredentialsError),
    #[error("CAIRN_NATS_PREFIX")]
    Prefix(#[from] cairn_bus::SubjectError),
    #[error("{} holds no nkey seed (a .creds JWT cannot be listed in the server configuration)", path.display())]
    NotASeed { path: PathBuf },
    #[error("write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Runs a `nats` subcommand; what it prints goes to stdout.
pub async fn run(command: NatsCommand) -> Result<(), NatsToolError> {
    match command {
        NatsCommand::Setup { nats } => {
            let ns = nats.namespace()?;
            let client = nats.connect_admin().await?;
            let js = async_nats::jetstream::new(client);
            cairn_bus::setup_streams(&js, &ns, &StreamSettings::default()).await?;
            println!(
                "the JetStream streams of {} exist and are up to date",
                nats.nats_url
            );
            Ok(())
        }
        NatsCommand::Credentials(args) => {
            let ns = match &args.nats_prefix {
                Some(p) => cairn_bus::Namespace::with_prefix(p)?,
                None => cairn_bus::Namespace::root(),
            };
            write_credentials(&args.dir, &ns)
        }
    }
}

fn write_credentials(dir: &Path, ns: &cairn_bus::Namespace) -> Result<(), NatsToolError> {
    use std::os::unix::fs::PermissionsExt;
    let wrap = |path: &Path| {
        let path = path.to_owned();
        move |source| NatsToolError::Write { path, source }
    };
    std::fs::create_dir_all(dir).map_err(wrap(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(wrap(dir))?;
    let mut users = Vec::new();
    for role in ServiceRole::ALL {
        let path = dir.join(format!("{role}.creds"));
        let public_key = if path.exists() {
            NatsCredentials::load(&path)?
                .public_key()
                .ok_or_else(|| NatsToolError::NotASeed { path: path.clone() })?
        } else {
            let (seed_file, public_key) = cairn_bus::new_user(role)?;
            write_private(&path, seed_file.as_bytes()).map_err(wrap(&path))?;
            println!("wrote the {role} user's seed to {}", path.display());
            public_key
        };
        users.push(NatsUser { role, public_key });
    }
    let conf = dir.join("nats-server.conf");
    write_private(&conf, cairn_bus::server_config(ns, &users).as_bytes()).map_err(wrap(&conf))?;
    println!("wrote the NATS server configuration to {}", conf.display());
    Ok(())
}
