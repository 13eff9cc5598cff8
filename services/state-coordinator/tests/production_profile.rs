//! The coordinator's binary under `CAIRN_PROFILE=production`: it refuses to start (exit 2,
//! saying which rule) without TLS, with a local key file and with a local object store,
//! before it connects to anything.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_cairn-state-coordinator");

/// A certificate and key for the listeners (TLS itself is tested in libs/service).
struct Tls {
    dir: tempfile::TempDir,
}

impl Tls {
    fn new() -> Tls {
        let dir = tempfile::tempdir().unwrap();
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        std::fs::write(dir.path().join("tls.crt"), made.cert.pem()).unwrap();
        std::fs::write(dir.path().join("tls.key"), made.signing_key.serialize_pem()).unwrap();
        Tls { dir }
    }
}

/// Runs the binary with only the given settings (nothing it could connect to); returns
/// the exit code and stderr.
async fn start(settings: &[(&str, String)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("CAIRN_PROFILE", "production")
        .env("CAIRN_DATABASE_URL", "postgres://nobody@127.0.0.1:9/none")
        .env("CAIRN_JWT_PUBLIC_KEYS_FILE", "/nonexistent/jwks.json")
        .env("CAIRN_NATS_URL", "nats://127.0.0.1:9")
        .env("CAIRN_GRPC_ADDR", "127.0.0.1:0")
        .env("CAIRN_HTTP_ADDR", "127.0.0.1:0");
    for (k, v) in settings {
        cmd.env(k, v);
    }
    let out = cmd.output().await.unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn with_tls(tls: &Tls, more: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let file = |name: &str| tls.dir.path().join(name).display().to_string();
    let mut v = vec![
        ("CAIRN_TLS_CERT", file("tls.crt")),
        ("CAIRN_TLS_KEY", file("tls.key")),
    ];
    v.extend(more.iter().map(|(k, val)| (*k, (*val).to_owned())));
    v
}

#[tokio::test]
async fn production_refuses_to_start_without_tls() {
    let (code, err) = start(&[]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("refusing to start: CAIRN_PROFILE=production refuses listeners without TLS"),
        "{err}"
    );
}

#[tokio::test]
async fn production_refuses_a_local_key_file() {
    let tls = Tls::new();
    let (code, err) = start(&with_tls(
        &tls,
        &[
            ("CAIRN_KMS_KEY", "local:/tmp/keys.json"),
            ("CAIRN_OBJECT_STORE", "s3://bucket/prefix"),
        ],
    ))
    .await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("CAIRN_PROFILE=production refuses a local key file in CAIRN_KMS_KEY"),
        "{err}"
    );
}

#[tokio::test]
async fn production_refuses_a_local_object_store() {
    let tls = Tls::new();
    let (code, err) = start(&with_tls(
        &tls,
        &[
            ("CAIRN_KMS_KEY", "alias/cairn-state"),
            ("CAIRN_OBJECT_STORE", "file:///tmp/objects"),
        ],
    ))
    .await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("CAIRN_PROFILE=production refuses a local object store in CAIRN_OBJECT_STORE"),
        "{err}"
    );
}
