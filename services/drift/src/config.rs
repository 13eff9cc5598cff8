//! Configuration from `CAIRN_*` environment variables (or flags); `--help` lists them all.
use std::net::SocketAddr;
use std::time::Duration;

use cairn_service::{DbArgs, JwksArgs, NatsArgs, PeerArgs, SharedArgs, duration};
use clap::Parser;

/// The service's PostgreSQL schema unless `CAIRN_DATABASE_SCHEMA` names another.
pub const DEFAULT_SCHEMA: &str = "drift";

/// The drift service's settings.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cairn-drift",
    version,
    about = "Cairn drift: scheduled read-only scans of every applied resource"
)]
pub struct Config {
    /// gRPC listen address (port 0 picks a free port).
    #[arg(long, env = "CAIRN_GRPC_ADDR", default_value = "127.0.0.1:50056")]
    pub grpc_addr: SocketAddr,
    // The settings libs/service applies: CAIRN_PROFILE, CAIRN_TLS_*, CAIRN_HEALTH_ADDR,
    // CAIRN_METRICS_ADDR, CAIRN_OTLP_ENDPOINT.
    #[command(flatten)]
    pub shared: SharedArgs,
    #[command(flatten)]
    pub db: DbArgs,
    // NATS: domain events in and out, run requests, run results.
    #[command(flatten)]
    pub nats: NatsArgs,
    #[command(flatten)]
    pub jwks: JwksArgs,
    // Tenancy (the service token's exchange), the state coordinator (applied configs, scan
    // registration) and the service's token.
    #[command(flatten)]
    pub peers: PeerArgs,
    /// Each tracked resource is scanned once per interval, at its own phase (0: no
    /// scheduled scans; TriggerScan still works).
    #[arg(long, env = "CAIRN_DRIFT_CHECK_INTERVAL", default_value = "6h", value_parser = duration)]
    pub drift_check_interval: Duration,
    /// Scans in flight per target, across every replica.
    #[arg(long, env = "CAIRN_DRIFT_MAX_PER_TARGET", default_value_t = 2)]
    pub drift_max_per_target: u32,
    /// How often the scheduler looks for due resources (it is also woken by TriggerScan
    /// and finished scans).
    #[arg(long, env = "CAIRN_DRIFT_TICK", default_value = "10s", value_parser = duration)]
    pub drift_tick: Duration,
    /// Due resources one tick claims at most.
    #[arg(long, env = "CAIRN_DRIFT_BATCH", default_value_t = 200)]
    pub drift_batch: u32,
    /// A scan without a result after this long ends CHECK_FAILED (timed_out) and frees its
    /// slot.
    #[arg(long, env = "CAIRN_DRIFT_SCAN_TIMEOUT", default_value = "1h", value_parser = duration)]
    pub drift_scan_timeout: Duration,
    /// This replica's name on the scans it claims (default: random per process).
    #[arg(long, env = "CAIRN_DRIFT_REPLICA")]
    pub drift_replica: Option<String>,
    /// Ack wait of the event and result consumers.
    #[arg(long, env = "CAIRN_DRIFT_ACK_WAIT", default_value = "30s", value_parser = duration)]
    pub drift_ack_wait: Duration,
}

impl Config {
    /// Refuses settings that cannot work.
    pub fn validate(&self) -> Result<(), String> {
        if self.drift_max_per_target == 0 {
            return Err("CAIRN_DRIFT_MAX_PER_TARGET must be at least 1".to_owned());
        }
        if self.drift_tick.is_zero() {
            return Err("CAIRN_DRIFT_TICK must be longer than 0".to_owned());
        }
        if self.drift_batch == 0 {
            return Err("CAIRN_DRIFT_BATCH must be at least 1".to_owned());
        }
        if self.drift_scan_timeout.is_zero() {
            return Err("CAIRN_DRIFT_SCAN_TIMEOUT must be longer than 0".to_owned());
        }
        if self.drift_ack_wait < Duration::from_secs(1) {
            return Err("CAIRN_DRIFT_ACK_WAIT must be at least 1s".to_owned());
        }
        if !self.drift_check_interval.is_zero()
            && self.drift_check_interval < Duration::from_secs(1)
        {
            return Err("CAIRN_DRIFT_CHECK_INTERVAL must be 0 (off) or at least 1s".to_owned());
        }
        Ok(())
    }

    /// The replica name (the configured one, else a fresh one).
    pub fn replica(&self) -> String {
        self.drift_replica.clone().unwrap_or_else(|| {
            format!("drift-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_example_parses() {
        let c = Config::try_parse_from([
            "cairn-drift",
            "--database-url",
            "postgres://cairn@127.0.0.1/cairn",
            "--jwt-public-keys-file",
            "/etc/cairn/jwks.json",
            "--service-token-file",
            "/etc/cairn/drift.token",
        ])
        .unwrap();
        assert_eq!(c.grpc_addr.port(), 50056);
        assert_eq!(c.db.schema(DEFAULT_SCHEMA), "drift");
        assert_eq!(c.peers.coordinator_url, "http://127.0.0.1:50053");
        assert_eq!(c.drift_check_interval, Duration::from_secs(6 * 3600));
        assert_eq!(c.drift_max_per_target, 2);
        assert_eq!(c.drift_tick, Duration::from_secs(10));
        assert!(c.validate().is_ok());
        let off = Config {
            drift_check_interval: Duration::ZERO,
            ..c.clone()
        };
        assert!(off.validate().is_ok());
        let none = Config {
            drift_max_per_target: 0,
            ..c
        };
        assert!(none.validate().is_err());
    }
}
