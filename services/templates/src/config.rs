//! Configuration from `CAIRN_*` environment variables (or flags); `--help` lists them all.
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

/// The templates service's settings.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cairn-templates",
    version,
    about = "Cairn templates: template versions, validation and resolution into snapshots"
)]
pub struct Config {
    /// PostgreSQL URL of the runtime role.
    #[arg(long, env = "CAIRN_DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// PostgreSQL URL of the migrator role (owns the schema); defaults to CAIRN_DATABASE_URL.
    #[arg(long, env = "CAIRN_DATABASE_MIGRATE_URL", hide_env_values = true)]
    pub database_migrate_url: Option<String>,
    /// The service's PostgreSQL schema.
    #[arg(long, env = "CAIRN_DATABASE_SCHEMA", default_value = "templates")]
    pub database_schema: String,
    /// gRPC listen address (port 0 picks a free port).
    #[arg(long, env = "CAIRN_GRPC_ADDR", default_value = "127.0.0.1:50052")]
    pub grpc_addr: SocketAddr,
    /// JWKS file with the public keys that verify access tokens.
    #[arg(long, env = "CAIRN_JWT_PUBLIC_KEYS_FILE")]
    pub jwt_public_keys_file: PathBuf,
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
    pub fn migrate_url(&self) -> &str {
        self.database_migrate_url
            .as_deref()
            .unwrap_or(&self.database_url)
    }

    /// Document limits from the settings.
    pub fn limits(&self) -> cairn_templating::Limits {
        cairn_templating::Limits {
            max_document_bytes: self.template_max_bytes,
            max_resources: self.template_max_resources,
            ..cairn_templating::Limits::default()
        }
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
        assert_eq!(c.database_schema, "templates");
        assert_eq!(c.migrate_url(), "postgres://cairn@127.0.0.1/cairn");
        assert_eq!(c.modules_dir, PathBuf::from("/opt/cairn/modules"));
        assert_eq!(c.limits().max_document_bytes, 1024 * 1024);
    }
}
