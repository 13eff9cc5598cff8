//! The runner's binary under `CAIRN_PROFILE=production`: it refuses to start (exit 2, naming
//! the rule) with the process executor or without NATS credentials, before it reads or
//! connects to anything; the Docker executor with credentials passes those rules.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_cairn-runner");

/// Runs `cairn-runner serve` in production with TLS on its listener, `CAIRN_NATS_CREDS` when
/// `nats_creds`, and nothing it could reach; returns the exit code and stderr.
async fn start(executor: &str, nats_creds: bool) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.path().join("tls.crt"), made.cert.pem()).unwrap();
    std::fs::write(dir.path().join("tls.key"), made.signing_key.serialize_pem()).unwrap();
    let file = |name: &str| dir.path().join(name).display().to_string();
    let mut command = Command::new(BIN);
    command
        .arg("serve")
        .env_clear()
        .env("CAIRN_PROFILE", "production")
        .env("CAIRN_TLS_CERT", file("tls.crt"))
        .env("CAIRN_TLS_KEY", file("tls.key"))
        .env("CAIRN_EXECUTOR", executor)
        .env("CAIRN_TOFU_IMAGE", "cairn/none:absent")
        .env("CAIRN_NATS_URL", "nats://127.0.0.1:9")
        .env("CAIRN_COORDINATOR_URL", "https://127.0.0.1:9")
        .env("CAIRN_GRPC_ADDR", "127.0.0.1:0")
        .env("CAIRN_SERVICE_TOKEN_FILE", "/nonexistent/runner.token")
        .env("CAIRN_CREDENTIALS_FILE", "/nonexistent/credentials.json")
        .env("CAIRN_JWT_PUBLIC_KEYS_FILE", "/nonexistent/jwks.json");
    if nats_creds {
        command.env("CAIRN_NATS_CREDS", "/nonexistent/runner.creds");
    }
    let out = command.output().await.unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn production_refuses_the_process_executor() {
    let (code, err) = start("process", true).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("refusing to start: CAIRN_PROFILE=production refuses the process executor (CAIRN_EXECUTOR=process"),
        "{err}"
    );

    // The Docker executor passes the rule: the start fails later, for another reason.
    let (code, err) = start("docker", true).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(!err.contains("CAIRN_PROFILE=production refuses"), "{err}");
}

#[tokio::test]
async fn production_refuses_nats_without_credentials_before_connecting() {
    let (code, err) = start("docker", false).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "refusing to start: CAIRN_PROFILE=production refuses NATS without credentials (CAIRN_NATS_CREDS)"
        ),
        "{err}"
    );
}
