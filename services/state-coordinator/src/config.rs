//! Configuration from `CAIRN_*` environment variables (or flags); `--help` lists them all.
use std::net::SocketAddr;
use std::time::Duration;

use cairn_service::{DbArgs, JwksArgs, NatsArgs, SharedArgs, duration};
use clap::Parser;

/// The coordinator's PostgreSQL schema unless `CAIRN_DATABASE_SCHEMA` says otherwise.
pub const DEFAULT_SCHEMA: &str = "state";

/// The state coordinator's settings. Embedded defaults: a local directory object store and
/// a local key file; PostgreSQL and NATS are required.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cairn-state-coordinator",
    version,
    about = "Cairn state coordinator: OpenTofu states, generations, encryption, locks and recovery"
)]
pub struct Config {
    // PostgreSQL URLs and schema (default schema: DEFAULT_SCHEMA).
    #[command(flatten)]
    pub db: DbArgs,
    // NATS server and subject prefix.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// gRPC listen address (port 0 picks a free port).
    #[arg(long, env = "CAIRN_GRPC_ADDR", default_value = "127.0.0.1:50053")]
    pub grpc_addr: SocketAddr,
    // The settings libs/service applies: CAIRN_PROFILE, CAIRN_TLS_*, CAIRN_HEALTH_ADDR,
    // CAIRN_METRICS_ADDR, CAIRN_OTLP_ENDPOINT.
    #[command(flatten)]
    pub shared: SharedArgs,
    /// OpenTofu HTTP backend listen address.
    #[arg(long, env = "CAIRN_HTTP_ADDR", default_value = "127.0.0.1:8453")]
    pub http_addr: SocketAddr,
    /// Base URL runners use to reach the HTTP backend; defaults to http://<CAIRN_HTTP_ADDR>.
    #[arg(long, env = "CAIRN_PUBLIC_HTTP_URL")]
    pub public_http_url: Option<String>,
    /// `s3://bucket/prefix` (bucket versioning required) or `file:///dir`.
    #[arg(
        long,
        env = "CAIRN_OBJECT_STORE",
        default_value = "file:///var/lib/cairn/state-objects"
    )]
    pub object_store: String,
    /// S3 endpoint override (e.g. moto or MinIO).
    #[arg(long, env = "CAIRN_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// A KMS key id/ARN/alias, or `local:/path/to/keyfile` (created 0600 on first start).
    #[arg(
        long,
        env = "CAIRN_KMS_KEY",
        default_value = "local:/var/lib/cairn/state-keys.json"
    )]
    pub kms_key: String,
    /// KMS endpoint override.
    #[arg(long, env = "CAIRN_KMS_ENDPOINT")]
    pub kms_endpoint: Option<String>,
    // The public keys that verify access tokens.
    #[command(flatten)]
    pub jwks: JwksArgs,
    /// Lease of an admitted run attempt (renewed by the runner).
    #[arg(long, env = "CAIRN_RUN_LEASE", default_value = "2m", value_parser = duration)]
    pub run_lease: Duration,
    /// Largest accepted state document, in bytes.
    #[arg(long, env = "CAIRN_MAX_STATE_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub max_state_bytes: usize,
    /// Bytes of sealed state objects kept in memory for the next GET of the same
    /// generation (the object's version is still confirmed with the store); objects over an
    /// eighth of it are not kept; 0 turns the cache off.
    #[arg(long, env = "CAIRN_STATE_CACHE_BYTES", default_value_t = crate::app::sealed_cache::DEFAULT_BUDGET)]
    pub state_cache_bytes: usize,
    /// Largest accepted saved plan or root config, in bytes.
    #[arg(long, env = "CAIRN_MAX_PLAN_BYTES", default_value_t = 256 * 1024 * 1024)]
    pub max_plan_bytes: usize,
    /// How long an unused saved plan is kept.
    #[arg(long, env = "CAIRN_PLAN_TTL", default_value = "7d", value_parser = duration)]
    pub plan_ttl: Duration,
    /// Pending (uncommitted) writes older than this are swept with their objects.
    #[arg(long, env = "CAIRN_PENDING_TTL", default_value = "1h", value_parser = duration)]
    pub pending_ttl: Duration,
    /// Intermediate generations of finished runs are pruned after this age.
    #[arg(long, env = "CAIRN_INTERMEDIATE_RETENTION", default_value = "7d", value_parser = duration)]
    pub intermediate_retention: Duration,
    /// How long the event relay waits, once woken by a commit, before it publishes: the
    /// events committed meanwhile go in the same batch (one transaction and one wake-up per
    /// linger, not per write). Only tenancy's audit log and webhooks wait for these events.
    #[arg(long, env = "CAIRN_EVENT_RELAY_LINGER", default_value = "20ms", value_parser = duration)]
    pub event_relay_linger: Duration,
    /// How often the sweeper and retention run.
    #[arg(long, env = "CAIRN_SWEEP_INTERVAL", default_value = "1m", value_parser = duration)]
    pub sweep_interval: Duration,
    /// Decrypted data keys cached for reads: entries.
    #[arg(long, env = "CAIRN_KEY_CACHE_SIZE", default_value_t = 1024)]
    pub key_cache_size: usize,
    /// Decrypted data keys cached for reads: maximum age.
    #[arg(long, env = "CAIRN_KEY_CACHE_TTL", default_value = "5m", value_parser = duration)]
    pub key_cache_ttl: Duration,
    /// Start in after-restore mode: state-changing runs stay blocked until VerifyAll passes.
    #[arg(long, env = "CAIRN_AFTER_RESTORE", default_value_t = false)]
    pub after_restore: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_example_parses() {
        let c = Config::try_parse_from([
            "cairn-state-coordinator",
            "--database-url",
            "postgres://cairn@127.0.0.1/cairn",
            "--jwt-public-keys-file",
            "/etc/cairn/jwks.json",
            "--object-store",
            "s3://cairn-states/prod",
            "--run-lease",
            "90s",
        ])
        .unwrap();
        assert_eq!(c.run_lease, Duration::from_secs(90));
        assert_eq!(c.db.migrate_url(), "postgres://cairn@127.0.0.1/cairn");
        assert_eq!(c.db.schema(DEFAULT_SCHEMA), "state");
        assert_eq!(c.grpc_addr.port(), 50053);
        assert_eq!(c.http_addr.port(), 8453);
    }
}
