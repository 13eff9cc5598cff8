//! Configuration from `CAIRN_*` environment variables (or flags); `--help` of each
//! subcommand lists them.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use cairn_service::{DbArgs, NatsArgs, SharedArgs, duration};
use clap::Parser;

use crate::domain::password::HashCost;
use crate::webhook_config::WebhookArgs;

/// Tenancy's PostgreSQL schema unless `CAIRN_DATABASE_SCHEMA` names another.
pub const DEFAULT_SCHEMA: &str = "tenancy";

/// The server's settings.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cairn-tenancy serve",
    about = "Serve tenants, users, tokens, targets and the audit log over gRPC"
)]
pub struct Config {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub nats: NatsArgs,
    /// gRPC listen address (port 0 picks a free port).
    #[arg(long, env = "CAIRN_GRPC_ADDR", default_value = "127.0.0.1:50051")]
    pub grpc_addr: SocketAddr,
    // The settings libs/service applies: CAIRN_PROFILE, CAIRN_TLS_*, CAIRN_HEALTH_ADDR,
    // CAIRN_METRICS_ADDR, CAIRN_OTLP_ENDPOINT.
    #[command(flatten)]
    pub shared: SharedArgs,
    /// The private signing keys file (JSON: active kid and PKCS#8 keys; mode 0600).
    #[arg(long, env = "CAIRN_JWT_PRIVATE_KEYS_FILE")]
    pub jwt_private_keys_file: PathBuf,
    /// Lifetime of issued access tokens (at most 15m).
    #[arg(long, env = "CAIRN_ACCESS_TOKEN_TTL", default_value = "10m", value_parser = duration)]
    pub access_token_ttl: Duration,
    /// Login attempts allowed per email per minute (and as a burst).
    #[arg(long, env = "CAIRN_LOGIN_ATTEMPTS_PER_MINUTE", default_value_t = 10)]
    pub login_attempts_per_minute: u32,
    /// Login and token-exchange attempts allowed per peer address per minute (and burst).
    #[arg(
        long,
        env = "CAIRN_CREDENTIAL_ATTEMPTS_PER_ADDRESS_PER_MINUTE",
        default_value_t = 120
    )]
    pub credential_attempts_per_address_per_minute: u32,
    /// argon2id memory cost in KiB for new password hashes.
    #[arg(long, env = "CAIRN_PASSWORD_HASH_MEMORY_KIB", default_value_t = 19 * 1024)]
    pub password_hash_memory_kib: u32,
    /// argon2id iterations for new password hashes.
    #[arg(long, env = "CAIRN_PASSWORD_HASH_ITERATIONS", default_value_t = 2)]
    pub password_hash_iterations: u32,
    /// How long NATS waits for the audit consumer's acknowledgement before redelivering.
    #[arg(long, env = "CAIRN_EVENT_ACK_WAIT", default_value = "30s", value_parser = duration)]
    pub event_ack_wait: Duration,
    /// Webhook delivery (`CAIRN_WEBHOOK_*`).
    #[command(flatten)]
    pub webhooks: WebhookArgs,
}

impl Config {
    /// Checks what clap cannot (the webhook settings check themselves:
    /// [`WebhookArgs::validate`]).
    pub fn validate(&self) -> Result<(), String> {
        if self.access_token_ttl.is_zero() || self.access_token_ttl > cairn_auth::MAX_TOKEN_LIFETIME
        {
            return Err(format!(
                "CAIRN_ACCESS_TOKEN_TTL must be between 1s and {}s",
                cairn_auth::MAX_TOKEN_LIFETIME.as_secs()
            ));
        }
        if self.login_attempts_per_minute == 0
            || self.credential_attempts_per_address_per_minute == 0
        {
            return Err("login rate limits must be at least 1 per minute".to_owned());
        }
        Ok(())
    }

    pub fn hash_cost(&self) -> HashCost {
        HashCost {
            memory_kib: self.password_hash_memory_kib,
            iterations: self.password_hash_iterations,
            parallelism: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_example_parses() {
        let c = Config::try_parse_from([
            "cairn-tenancy",
            "--database-url",
            "postgres://cairn_tenancy@127.0.0.1/cairn",
            "--database-migrate-url",
            "postgres://cairn_migrator@127.0.0.1/cairn",
            "--jwt-private-keys-file",
            "/etc/cairn/jwt-private-keys.json",
            "--access-token-ttl",
            "5m",
        ])
        .unwrap();
        assert_eq!(c.grpc_addr.port(), 50051);
        assert_eq!(c.db.schema(DEFAULT_SCHEMA), "tenancy");
        assert_eq!(
            c.db.migrate_url(),
            "postgres://cairn_migrator@127.0.0.1/cairn"
        );
        assert_eq!(c.access_token_ttl, Duration::from_secs(300));
        assert!(!c.webhooks.webhook_allow_loopback);
        assert_eq!(
            c.webhooks.webhook_lease,
            WebhookArgs::default().webhook_lease
        );
        assert!(c.validate().is_ok());

        let mut long = c.clone();
        long.access_token_ttl = Duration::from_secs(16 * 60);
        assert!(long.validate().is_err());
    }
}
