//! The real binary: serves with its config from CAIRN_* variables, answers health checks,
//! logs JSON, and exits cleanly on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use cairn_auth::SigningKey;
use cairn_tenancy::keys::Signer;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

#[tokio::test]
async fn serves_and_stops_on_sigterm() {
    let db = cairn_testkit::fresh_database().await;
    let nats = cairn_testkit::connect_nats().await;
    let dir = cairn_testkit::temp_dir();
    let keys = dir.path().join("keys.json");
    Signer::from_keys(vec![SigningKey::generate("k1").unwrap()])
        .unwrap()
        .save(&keys)
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn-tenancy"))
        .env("CAIRN_DATABASE_URL", &db.runtime_url)
        .env("CAIRN_DATABASE_MIGRATE_URL", &db.migrate_url)
        .env("CAIRN_NATS_URL", &nats.url)
        .env("CAIRN_NATS_PREFIX", &nats.prefix)
        .env("CAIRN_GRPC_ADDR", "127.0.0.1:0")
        .env("CAIRN_JWT_PRIVATE_KEYS_FILE", &keys)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let json: serde_json::Value = serde_json::from_str(&line).expect("JSON log lines");
            if let Some(addr) = json
                .pointer("/fields/grpc_addr")
                .or_else(|| json.get("grpc_addr"))
            {
                return addr.as_str().unwrap().to_owned();
            }
        }
        panic!("the server exited before serving");
    })
    .await
    .expect("the server did not report its address");
    let channel = common::connect(addr.parse().unwrap()).await;
    let status = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: "cairn.tenancy.v1.Tokens".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(status, 1, "not SERVING");

    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server did not stop after SIGTERM")
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    nats.delete_streams().await;
}
