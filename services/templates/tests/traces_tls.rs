//! The real binary exports its spans to an OTLP collector over TLS
//! (`CAIRN_OTLP_ENDPOINT=https://…`), verified with `CAIRN_TLS_CA`: the collector receives
//! the `request` span of a health check. With a CA that did not sign the collector's
//! certificate, the collector receives nothing, and the service serves and stops as usual.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use cairn_testkit::{OtlpReceiver, TestCa};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// Starts `cairn-templates` exporting to `receiver`, trusting `ca_pem`; waits until it
/// serves and answers one health check (a `request` span); returns it still running (with
/// its database).
async fn serve_and_check_health(
    receiver: &OtlpReceiver,
    ca_pem: &str,
) -> (Child, cairn_db::TestDatabase) {
    let db = cairn_testkit::fresh_database().await;
    let dir = cairn_testkit::temp_dir();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let keys = cairn_testkit::TestKeys::new();
    let modules = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../libs/templating/tests/fixtures/modules");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn-templates"))
        .env_clear()
        .env("CAIRN_DATABASE_URL", &db.runtime_url)
        .env("CAIRN_DATABASE_MIGRATE_URL", &db.migrate_url)
        .env("CAIRN_GRPC_ADDR", "127.0.0.1:0")
        .env("CAIRN_JWT_PUBLIC_KEYS_FILE", keys.jwks_path())
        .env("CAIRN_MODULES_DIR", &modules)
        .env("CAIRN_OTLP_ENDPOINT", receiver.endpoint())
        .env("CAIRN_TLS_CA", &ca)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let json: serde_json::Value = serde_json::from_str(&line).expect("JSON log lines");
            if let Some(addr) = json.pointer("/fields/grpc_addr") {
                return addr.as_str().unwrap().to_owned();
            }
        }
        panic!("cairn-templates exited before serving");
    })
    .await
    .expect("cairn-templates did not report its address");
    // Keep reading its output so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let channel = cairn_testkit::connect_grpc(addr.parse().unwrap()).await;
    let status = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(status, ServingStatus::Serving as i32);
    (child, db)
}

/// SIGTERM, then the exit status (the graceful stop flushes the exporter).
async fn stop(mut child: Child) -> std::process::ExitStatus {
    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("cairn-templates did not stop on SIGTERM")
        .unwrap()
}

#[tokio::test]
async fn spans_reach_a_tls_collector_verified_with_cairn_tls_ca() {
    let ca = TestCa::new("collector-ca");
    let receiver = OtlpReceiver::start_tls(&ca.server(), None).await;
    let (child, _db) = serve_and_check_health(&receiver, &ca.pem()).await;
    // The stop flushes what is left, so the collector has it all once the process is gone.
    assert!(stop(child).await.success());
    let spans = receiver.spans();
    assert!(
        spans
            .iter()
            .any(|s| s.service == "templates" && s.name == "request"),
        "no request span among {spans:?}"
    );
    assert!(spans.iter().all(|s| s.service == "templates"), "{spans:?}");
}

#[tokio::test]
async fn a_collector_the_ca_did_not_sign_receives_nothing_and_the_service_runs_on() {
    let receiver = OtlpReceiver::start_tls(&TestCa::new("collector-ca").server(), None).await;
    let (child, _db) = serve_and_check_health(&receiver, &TestCa::new("another-ca").pem()).await;
    // The stop flushes every span made (the health check's among them, which the test above
    // sees arrive the same way) and exits cleanly although no export got through.
    assert!(stop(child).await.success());
    assert!(
        receiver.spans().is_empty(),
        "an untrusted collector received {:?}",
        receiver.spans()
    );
}
