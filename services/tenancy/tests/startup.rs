//! The real binary refuses to start when PostgreSQL is unreachable, exits 2, and says why
//! with the whole error chain, down to the refused connection.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use cairn_auth::SigningKey;
use cairn_tenancy::keys::Signer;
use tokio::process::Command;

/// A local port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn an_unreachable_database_is_refused_with_its_cause() {
    let dir = cairn_testkit::temp_dir();
    let keys = dir.path().join("keys.json");
    Signer::from_keys(vec![SigningKey::generate("k1").unwrap()])
        .unwrap()
        .save(&keys)
        .unwrap();
    let url = format!("postgres://cairn@127.0.0.1:{}/cairn", closed_port());
    let run = Command::new(env!("CARGO_BIN_EXE_cairn-tenancy"))
        .env("CAIRN_DATABASE_URL", &url)
        .env_remove("CAIRN_DATABASE_MIGRATE_URL")
        .env_remove("CAIRN_DATABASE_SCHEMA")
        .env("CAIRN_GRPC_ADDR", "127.0.0.1:0")
        .env("CAIRN_JWT_PRIVATE_KEYS_FILE", &keys)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("cairn-tenancy did not give up on an unreachable database")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for part in ["refusing to start", "database", "connect to PostgreSQL"] {
        assert!(stderr.contains(part), "{part:?} missing from {stderr}");
    }
    assert!(
        stderr.to_lowercase().contains("connection refused"),
        "the cause is missing from {stderr}"
    );
}
