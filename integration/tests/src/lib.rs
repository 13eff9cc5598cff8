//! End-to-end harness: the whole platform as real processes started from the workspace's
//! binaries (tenancy, templates, the state coordinator, a runner with the Docker executor and
//! the tofu-sim image, deployments), on a fresh database, NATS prefix, bucket and KMS key, and
//! the `cairn` CLI driven the way a user drives it.
//!
//! - [`bins`]: where the binaries built with the tests are;
//! - [`process`]: one service process (start, wait until it listens, SIGKILL, restart, logs);
//! - [`platform`]: the platform, its bootstrap (keys, demo tenant, service tokens) and the
//!   runner's credential registry;
//! - [`cli`]: the `cairn` binary with a config directory of its own;
//! - [`world`]: what is really there afterwards (files under a target, containers, rows);
//! - [`receiver`]: a loopback webhook receiver that checks signatures;
//! - [`seed`]: a small seeded generator for the chaos driver (reproducible runs).
pub mod bins;
pub mod cli;
pub mod platform;
pub mod process;
pub mod receiver;
pub mod seed;
pub mod world;

/// The repository root.
pub fn repo(path: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// The database password reference the demo instances use, and the runner's registry
/// resolves (its value never reaches Cairn's services).
pub const DB_PASSWORD_REF: &str = "arn:aws:secretsmanager:us-east-1:000000000000:secret:e2e-db";
