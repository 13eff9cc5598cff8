//! The real binary under `CAIRN_PROFILE=production` (TLS on its listener) and a plaintext
//! `CAIRN_OTLP_ENDPOINT`: refused (exit 2, naming the setting) before anything connects when
//! the collector is off the host; accepted for a local agent on loopback, so the start goes
//! on (and here fails later, at the unreachable database).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use cairn_testkit::TestCa;
use tokio::process::Command;

/// A local port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Runs `cairn-templates` in production with `otlp_endpoint`; the exit code and stderr.
async fn start_in_production(otlp_endpoint: &str) -> (Option<i32>, String) {
    let dir = cairn_testkit::temp_dir();
    let cert = TestCa::new("templates-production").server();
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&crt, cert.cert).unwrap();
    std::fs::write(&key, cert.key).unwrap();
    let keys = cairn_testkit::TestKeys::new();
    let modules = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../libs/templating/tests/fixtures/modules");
    let run = Command::new(env!("CARGO_BIN_EXE_cairn-templates"))
        .env_clear()
        .env("CAIRN_PROFILE", "production")
        .env("CAIRN_TLS_CERT", &crt)
        .env("CAIRN_TLS_KEY", &key)
        .env("CAIRN_OTLP_ENDPOINT", otlp_endpoint)
        .env(
            "CAIRN_DATABASE_URL",
            format!("postgres://cairn@127.0.0.1:{}/cairn", closed_port()),
        )
        .env("CAIRN_GRPC_ADDR", "127.0.0.1:0")
        .env("CAIRN_JWT_PUBLIC_KEYS_FILE", keys.jwks_path())
        .env("CAIRN_MODULES_DIR", &modules)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("cairn-templates did not exit")
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn production_refuses_plaintext_export_off_the_host() {
    let (code, stderr) = start_in_production("http://collector.example:4317").await;
    assert_eq!(code, Some(2), "{stderr}");
    for part in [
        "refusing to start",
        "CAIRN_PROFILE=production refuses plaintext trace export to http://collector.example:4317",
        "CAIRN_OTLP_ENDPOINT",
    ] {
        assert!(stderr.contains(part), "{part:?} missing from {stderr}");
    }
    // Refused before the database was tried.
    assert!(!stderr.contains("PostgreSQL"), "{stderr}");
}

#[tokio::test]
async fn production_accepts_plaintext_export_to_a_local_agent() {
    let (code, stderr) = start_in_production("http://127.0.0.1:4317").await;
    // Past the profile: the start fails where it would without traces, at the database.
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("connect to PostgreSQL"), "{stderr}");
    assert!(!stderr.contains("CAIRN_OTLP_ENDPOINT"), "{stderr}");
    assert!(
        !stderr.contains("CAIRN_PROFILE=production refuses"),
        "{stderr}"
    );
}
