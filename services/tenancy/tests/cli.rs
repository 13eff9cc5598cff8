//! The subcommands as an operator runs them: `keys generate`/`keys export`, `bootstrap`
//! (refuses a second run), `service-token` (a 0600 file the SDK's token source uses).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cairn_auth::KeySet;
use cairn_proto::tenancy as pb;
use common::*;
use tokio::process::Command;

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn run(db: &cairn_db::TestDatabase, keys: &Path, args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn-tenancy"))
        .args(args)
        .env("CAIRN_DATABASE_URL", &db.runtime_url)
        .env("CAIRN_DATABASE_MIGRATE_URL", &db.migrate_url)
        .env("CAIRN_DATABASE_SCHEMA", "tenancy")
        .env("CAIRN_JWT_PRIVATE_KEYS_FILE", keys)
        .output()
        .await
        .unwrap();
    Out {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn operator_commands_bootstrap_once_and_mint_service_tokens() {
    cairn_testkit::init_tracing();
    let db = cairn_testkit::fresh_database().await;
    let nats = cairn_testkit::connect_nats().await;
    let dir = cairn_testkit::temp_dir();
    let keys = dir.path().join("keys.json");

    let generated = run(&db, &keys, &["keys", "generate", "--kid", "k-2026"]).await;
    assert!(generated.ok, "{}", generated.stderr);
    assert_eq!(mode(&keys), 0o600);
    let exported = run(&db, &keys, &["keys", "export"]).await;
    assert!(exported.ok, "{}", exported.stderr);
    let set = KeySet::from_jwks_json(&exported.stdout).unwrap();
    assert!(set.contains("k-2026"));
    assert!(!exported.stdout.contains("pkcs8") && !exported.stdout.contains("\"d\""));

    let args = [
        "bootstrap",
        "--tenant-slug",
        "acme",
        "--tenant-name",
        "Acme",
        "--owner-email",
        "root@acme.example",
        "--owner-name",
        "Root",
    ];
    let first = run(&db, &keys, &args).await;
    assert!(first.ok, "{}", first.stderr);
    let api_token = first
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("api_token="))
        .unwrap()
        .to_owned();
    assert!(api_token.starts_with("cairn_"));
    let second = run(&db, &keys, &args).await;
    assert!(!second.ok, "bootstrap ran twice: {}", second.stdout);
    assert!(
        second.stderr.contains("bootstrap already ran"),
        "{}",
        second.stderr
    );
    assert!(!second.stdout.contains("api_token="));
    let other = run(
        &db,
        &keys,
        &[
            "bootstrap",
            "--tenant-slug",
            "other",
            "--tenant-name",
            "O",
            "--owner-email",
            "x@y.example",
            "--owner-name",
            "X",
        ],
    )
    .await;
    assert!(!other.ok, "a second bootstrap with other values succeeded");

    let token_file = dir.path().join("runner.token");
    let minted = run(
        &db,
        &keys,
        &[
            "service-token",
            "--name",
            "runner",
            "--out",
            token_file.to_str().unwrap(),
        ],
    )
    .await;
    assert!(minted.ok, "{}", minted.stderr);
    assert_eq!(mode(&token_file), 0o600);
    assert!(!minted.stdout.contains("cairn_"), "the token was printed");

    // A server on the same database and keys accepts both tokens.
    let config = config_for(&db, &nats, keys.clone(), &Options::default());
    let server = cairn_tenancy::Server::start(config).await.unwrap();
    let grpc = connect(server.grpc_addr()).await;
    let owner = TokensClient::new(grpc.clone())
        .exchange_api_token(pb::ExchangeApiTokenRequest { api_token })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(owner.role, "owner");
    assert_eq!(owner.scopes, vec!["platform:admin".to_owned()]);
    let source = cairn_sdk::TokenSource::new(
        cairn_sdk::Credential::from_file(&token_file).unwrap(),
        Some(grpc.clone()),
    );
    let cancel = tokio_util::sync::CancellationToken::new();
    let refresher = source.spawn_refresh(cancel.clone());
    let access = source.access_token().await.unwrap();
    let claims = set.verify_claims(&access).unwrap();
    assert_eq!(
        (claims.sub.as_str(), claims.role),
        ("runner", cairn_auth::Role::Service)
    );
    let mut tenants = TenantsClient::with_interceptor(grpc.clone(), source.interceptor());
    let acme = tenants
        .get_tenant(pb::GetTenantRequest {
            tenant_id: owner.tenant_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .tenant
        .unwrap();
    assert_eq!(acme.slug, "acme");
    cancel.cancel();
    refresher.await.unwrap();
    server.shutdown().await;
    nats.delete_streams().await;
}
