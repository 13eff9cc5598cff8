//! Configuration from `CAIRN_*` environment variables (or flags); `--help` lists them all.
use std::net::SocketAddr;
use std::time::Duration;

use cairn_service::{DbArgs, JwksArgs, NatsArgs, PeerArgs, SharedArgs, duration};
use clap::Parser;

/// The service's PostgreSQL schema unless `CAIRN_DATABASE_SCHEMA` names another.
pub const DEFAULT_SCHEMA: &str = "deployments";

/// The deployments service's settings.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cairn-deployments",
    version,
    about = "Cairn deployments: instances, deployments and the per-resource workflow"
)]
pub struct Config {
    /// gRPC listen address (port 0 picks a free port).
    #[arg(long, env = "CAIRN_GRPC_ADDR", default_value = "127.0.0.1:50055")]
    pub grpc_addr: SocketAddr,
    // The settings libs/service applies: CAIRN_PROFILE, CAIRN_TLS_*, CAIRN_HEALTH_ADDR,
    // CAIRN_METRICS_ADDR, CAIRN_OTLP_ENDPOINT.
    #[command(flatten)]
    pub shared: SharedArgs,
    #[command(flatten)]
    pub db: DbArgs,
    // NATS: the job queue, run requests and results, domain events.
    #[command(flatten)]
    pub nats: NatsArgs,
    #[command(flatten)]
    pub jwks: JwksArgs,
    // Tenancy (targets, and the service token's exchange), the state coordinator (the
    // workflow registers runs there) and the service's token.
    #[command(flatten)]
    pub peers: PeerArgs,
    /// The templates service's gRPC endpoint: versions, resolution, diffs.
    #[arg(
        long,
        env = "CAIRN_TEMPLATES_URL",
        default_value = "http://127.0.0.1:50052"
    )]
    pub templates_url: String,
    /// Runs of one deployment in flight at the same time (requested, no result yet); as
    /// many steps again prepare theirs meanwhile.
    #[arg(long, env = "CAIRN_DEPLOY_PARALLELISM", default_value_t = 4)]
    pub deploy_parallelism: usize,
    /// Tries of a step that failed transiently (network, rate limit, lock busy, 5xx).
    #[arg(long, env = "CAIRN_DEPLOY_RETRIES", default_value_t = 3)]
    pub deploy_retries: u32,
    /// How long a deployment awaits approval before it ends EXPIRED (below the
    /// coordinator's plan TTL).
    #[arg(long, env = "CAIRN_APPROVAL_TTL", default_value = "24h", value_parser = duration)]
    pub approval_ttl: Duration,
    /// A step whose run is not admitted by a runner within this fails saying so.
    #[arg(long, env = "CAIRN_STEP_ADMIT_TIMEOUT", default_value = "10m", value_parser = duration)]
    pub step_admit_timeout: Duration,
    /// Deployment jobs this replica works on at once (0: this replica runs no worker, it
    /// only serves the API).
    #[arg(long, env = "CAIRN_DEPLOY_WORKERS", default_value_t = 8)]
    pub deploy_workers: usize,
    /// How long a job may go without a heartbeat before JetStream hands it to another
    /// replica (a crashed worker's deployment resumes after it).
    #[arg(long, env = "CAIRN_DEPLOY_ACK_WAIT", default_value = "60s", value_parser = duration)]
    pub deploy_ack_wait: Duration,
    /// The first wait before retrying a transient failure (doubling, with jitter).
    #[arg(long, env = "CAIRN_DEPLOY_RETRY_BACKOFF", default_value = "5s", value_parser = duration)]
    pub deploy_retry_backoff: Duration,
    /// After how long without its result a run is looked up at the coordinator (GetRun).
    #[arg(long, env = "CAIRN_RUN_RESULT_FALLBACK", default_value = "30s", value_parser = duration)]
    pub run_result_fallback: Duration,
    /// How long a deployment over its target's slot limit waits before it tries again.
    #[arg(long, env = "CAIRN_SLOT_WAIT", default_value = "5s", value_parser = duration)]
    pub slot_wait: Duration,
    /// Log lines stored per step (the first and the last are kept beyond it).
    #[arg(long, env = "CAIRN_STEP_LOG_LINES", default_value_t = 5_000)]
    pub step_log_lines: usize,
}

impl Config {
    /// The workflow's settings.
    pub fn flow(&self) -> crate::app::workflow::FlowSettings {
        crate::app::workflow::FlowSettings {
            parallelism: self.deploy_parallelism,
            retries: self.deploy_retries,
            retry_backoff: self.deploy_retry_backoff,
            admit_timeout: self.step_admit_timeout,
            approval_ttl: self.approval_ttl,
            result_poll: (self.run_result_fallback / 4)
                .clamp(Duration::from_millis(50), Duration::from_secs(1)),
            result_fallback: self.run_result_fallback,
            slot_wait: self.slot_wait,
        }
    }

    /// Refuses settings that cannot work.
    pub fn validate(&self) -> Result<(), String> {
        if self.deploy_parallelism == 0 {
            return Err("CAIRN_DEPLOY_PARALLELISM must be at least 1".to_owned());
        }
        if self.approval_ttl.is_zero() {
            return Err("CAIRN_APPROVAL_TTL must be longer than 0".to_owned());
        }
        if self.deploy_ack_wait < Duration::from_secs(1) {
            return Err("CAIRN_DEPLOY_ACK_WAIT must be at least 1s".to_owned());
        }
        if self.run_result_fallback.is_zero() || self.slot_wait.is_zero() {
            return Err(
                "CAIRN_RUN_RESULT_FALLBACK and CAIRN_SLOT_WAIT must be longer than 0".to_owned(),
            );
        }
        if self.step_admit_timeout.is_zero() {
            return Err("CAIRN_STEP_ADMIT_TIMEOUT must be longer than 0".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_example_parses() {
        let c = Config::try_parse_from([
            "cairn-deployments",
            "--database-url",
            "postgres://cairn@127.0.0.1/cairn",
            "--jwt-public-keys-file",
            "/etc/cairn/jwks.json",
            "--service-token-file",
            "/etc/cairn/deployments.token",
        ])
        .unwrap();
        assert_eq!(c.grpc_addr.port(), 50055);
        assert_eq!(c.db.schema(DEFAULT_SCHEMA), "deployments");
        assert_eq!(c.peers.tenancy_url, "http://127.0.0.1:50051");
        assert_eq!(c.templates_url, "http://127.0.0.1:50052");
        assert_eq!(c.peers.coordinator_url, "http://127.0.0.1:50053");
        assert_eq!(c.deploy_parallelism, 4);
        assert_eq!(c.deploy_retries, 3);
        assert_eq!(c.approval_ttl, Duration::from_secs(24 * 3600));
        assert_eq!(c.step_admit_timeout, Duration::from_secs(600));
        assert_eq!(c.step_log_lines, 5_000);
        assert_eq!(c.deploy_workers, 8);
        assert_eq!(c.deploy_ack_wait, Duration::from_secs(60));
        assert_eq!(c.deploy_retry_backoff, Duration::from_secs(5));
        assert_eq!(c.run_result_fallback, Duration::from_secs(30));
        assert!(c.validate().is_ok());
        let zero = Config {
            deploy_parallelism: 0,
            ..c
        };
        assert!(zero.validate().is_err());
    }
}
