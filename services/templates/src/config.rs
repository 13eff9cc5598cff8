//! Configuration from `CAIRN_*` environment variables (or flags); `--help` lists them all.
use std::net::SocketAddr;
use std::path::PathBuf;

use cairn_service::{DbArgs, JwksArgs, SharedArgs};
use clap::Parser;

/// The service's PostgreSQL schema unless `CAIRN_DATABASE_SCHEMA` names another.
pub const DEFAULT_SCHEMA: &str = "templates";

/// The templates service's settings.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cairn-templates",
    version,
    about = "Cairn templates: template versions, validation and resolution into snapshots"
)]
pub struct Config {
    #[command(flatten)]
    pub db: DbArgs,
    /// gRPC listen address (port 0 picks a free port).
    #[arg(long, env = "CAIRN_GRPC_ADDR", default_value = "127.0.0.1:50052")]
    pub grpc_addr: SocketAddr,
    // The settings libs/service applies: CAIRN_PROFILE, CAIRN_TLS_*, CAIRN_HEALTH_ADDR,
    // CAIRN_METRICS_ADDR, CAIRN_OTLP_ENDPOINT.
    #[command(flatten)]
    pub shared: SharedArgs,
    #[command(flatten)]
    pub jwks: JwksArgs,
    /// The module library: `<dir>/<family>/<kind>/` with `.tf` files and `module.cairn.json`.
    #[arg(long, env = "CAIRN_MODULES_DIR", default_value = "modules")]
    pub modules_dir: PathBuf,
    /// Largest accepted template document, in bytes.
    #[arg(long, env = "CAIRN_TEMPLATE_MAX_BYTES", default_value_t = 1024 * 1024)]
    pub template_max_bytes: usize,
    /// Most resources a template may declare.
    #[arg(long, env = "CAIRN_TEMPLATE_MAX_RESOURCES", default_value_t = 2_000)]
    pub template_max_resources: usize,
}

impl Config {
    /// Document limits from the settings.
    pub fn limits(&self) -> cairn_templating::Limits {
        cairn_templating::Limits {
            max_document_bytes: self.template_max_bytes,
            max_resources: self.template_max_resources,
            ..cairn_templating::Limits::default()
        }
    }

    /// Largest gRPC message either way: twice the largest document, at least 4 MiB.
    pub fn max_message_bytes(&self) -> usize {
        self.template_max_bytes
            .saturating_mul(2)
            .max(4 * 1024 * 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_example_parses() {
        let c = Config::try_parse_from([
            "cairn-templates",
            "--database-url",
            "postgres://cairn@127.0.0.1/cairn",
            "--jwt-public-keys-file",
            "/etc/cairn/jwks.json",
            "--modules-dir",
            "/opt/cairn/modules",
        ])
        .unwrap();
        assert_eq!(c.grpc_addr.port(), 50052);
        assert_eq!(c.db.schema(DEFAULT_SCHEMA), "templates");
        assert_eq!(c.db.migrate_url(), "postgres://cairn@127.0.0.1/cairn");
        assert_eq!(c.modules_dir, PathBuf::from("/opt/cairn/modules"));
        assert_eq!(c.limits().max_document_bytes, 1024 * 1024);
        assert_eq!(c.max_message_bytes(), 4 * 1024 * 1024);
    }
}
