//! Tenancy's binary under `CAIRN_PROFILE=production`, with TLS on its listener, NATS user
//! credentials and its signing keys: it refuses to start (exit 2, naming the rule) with
//! `CAIRN_WEBHOOK_ALLOW_LOOPBACK` or without `CAIRN_NATS_CREDS`, before it touches its
//! database or NATS.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;

use cairn_auth::SigningKey;
use cairn_tenancy::keys::Signer;
use cairn_testkit::{TempDir, TestCa};
use sqlx::Connection;
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_cairn-tenancy");

/// Everything a production start needs: a fresh database, a server certificate, signing
/// keys, NATS credentials (made by the binary's own `nats credentials`), and a stand-in
/// NATS server that only records whether anyone connected.
struct Production {
    db: cairn_db::TestDatabase,
    dir: TempDir,
    nats: TcpListener,
}

impl Production {
    async fn new() -> Production {
        let db = cairn_testkit::fresh_database().await;
        let dir = cairn_testkit::temp_dir();
        let cert = TestCa::new("tenancy-production").server();
        std::fs::write(dir.path().join("tls.crt"), cert.cert).unwrap();
        std::fs::write(dir.path().join("tls.key"), cert.key).unwrap();
        Signer::from_keys(vec![SigningKey::generate("k1").unwrap()])
            .unwrap()
            .save(&dir.path().join("keys.json"))
            .unwrap();
        let made = Command::new(BIN)
            .args(["nats", "credentials", "--dir"])
            .arg(dir.path().join("nats"))
            .output()
            .await
            .unwrap();
        assert!(made.status.success(), "{made:?}");
        assert!(dir.path().join("nats/tenancy.creds").is_file());
        let nats = TcpListener::bind("127.0.0.1:0").unwrap();
        nats.set_nonblocking(true).unwrap();
        Production { db, dir, nats }
    }

    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// Runs `cairn-tenancy` in production with `more` settings; the exit code and stderr.
    async fn start(&self, more: &[(&str, String)]) -> (Option<i32>, String) {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("CAIRN_PROFILE", "production")
            .env("CAIRN_TLS_CERT", self.file("tls.crt"))
            .env("CAIRN_TLS_KEY", self.file("tls.key"))
            .env("CAIRN_DATABASE_URL", &self.db.runtime_url)
            .env("CAIRN_DATABASE_MIGRATE_URL", &self.db.migrate_url)
            .env(
                "CAIRN_NATS_URL",
                format!("nats://{}", self.nats.local_addr().unwrap()),
            )
            .env("CAIRN_GRPC_ADDR", "127.0.0.1:0")
            .env("CAIRN_JWT_PRIVATE_KEYS_FILE", self.file("keys.json"));
        for (k, v) in more {
            cmd.env(k, v);
        }
        let out = tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
            .await
            .expect("the binary did not exit")
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Whether anything connected to the stand-in NATS server (a connection waits in the
    /// listener's backlog until accepted).
    fn nats_contacted(&self) -> bool {
        match self.nats.accept() {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(e) => panic!("accept: {e}"),
        }
    }

    /// The tables in the database's `tenancy` schema.
    async fn tenancy_tables(&self) -> i64 {
        let mut conn = sqlx::PgConnection::connect(&self.db.admin_url)
            .await
            .unwrap();
        sqlx::query_scalar(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'tenancy'",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap()
    }
}

fn creds(p: &Production) -> (&'static str, String) {
    ("CAIRN_NATS_CREDS", p.file("nats/tenancy.creds"))
}

#[tokio::test]
async fn production_refuses_webhooks_to_loopback_before_anything_changes() {
    let p = Production::new().await;
    let (code, err) = p
        .start(&[
            creds(&p),
            ("CAIRN_WEBHOOK_ALLOW_LOOPBACK", "true".to_owned()),
        ])
        .await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "refusing to start: CAIRN_PROFILE=production refuses CAIRN_WEBHOOK_ALLOW_LOOPBACK"
        ),
        "{err}"
    );
    assert_eq!(p.tenancy_tables().await, 0, "no schema was migrated");
    assert!(!p.nats_contacted(), "NATS was not contacted");
}

#[tokio::test]
async fn production_refuses_nats_without_credentials_before_anything_changes() {
    let p = Production::new().await;
    let (code, err) = p.start(&[]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "CAIRN_PROFILE=production refuses NATS without credentials (CAIRN_NATS_CREDS)"
        ),
        "{err}"
    );
    assert_eq!(p.tenancy_tables().await, 0, "no schema was migrated");
    assert!(!p.nats_contacted(), "NATS was not contacted");
}

/// The same settings with the credentials and without loopback webhooks pass the profile:
/// against the test NATS server (which does not ask for credentials) the start goes on until
/// it finds no streams under a fresh prefix.
#[tokio::test]
async fn the_same_settings_with_credentials_pass_the_profile() {
    let p = Production::new().await;
    let prefix = format!("t{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let (code, err) = p
        .start(&[
            creds(&p),
            ("CAIRN_NATS_URL", cairn_testkit::env::nats_url()),
            ("CAIRN_NATS_PREFIX", prefix),
        ])
        .await;
    assert_eq!(code, Some(2), "{err}");
    assert!(!err.contains("CAIRN_PROFILE=production refuses"), "{err}");
    assert!(err.contains("does not exist"), "{err}");
}
