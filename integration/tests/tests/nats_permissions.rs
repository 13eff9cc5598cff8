//! The permission matrix is not too tight: every service runs as a real process connected
//! to a NATS server of the platform's own as its own user (credentials and server
//! configuration from `cairn-tenancy nats credentials`, streams from `cairn-tenancy nats
//! setup`), and a deployment and its destroy go through — run requests, results, logs,
//! events and jobs all flow — while the server refuses nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn_integration_tests::platform::{Options, Platform};
use cairn_integration_tests::{DB_PASSWORD_REF, repo};
use serde_json::Value;

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deployment_and_its_destroy_run_with_every_service_under_its_own_nats_user() {
    let mut p = Platform::start(Options {
        nats_permissions: true,
        ..Options::default()
    })
    .await
    .expect("start the platform");
    let owner = p.cli("owner").await;
    let token_file = p.dir.path().join("owner.token");
    std::fs::write(&token_file, format!("{}\n", p.owner_api_token)).unwrap();
    owner
        .run(&["login", "--api-token-file", token_file.to_str().unwrap()])
        .await
        .ok();

    let shop_dir = p.targets_dir.join("local");
    let target = owner
        .json(&[
            "targets",
            "create",
            "local",
            "--local-dir",
            shop_dir.to_str().unwrap(),
        ])
        .await;
    let target_id = s(&target["target_id"]).to_owned();
    let credential_ref = s(&target["credential_ref"]).to_owned();
    p.serve_targets(&[(target_id, credential_ref)])
        .await
        .expect("start the runner");
    let web_stack = repo("modules/examples/web-stack/template.yaml");
    owner
        .json(&[
            "templates",
            "create",
            "web-stack",
            "-f",
            web_stack.to_str().unwrap(),
        ])
        .await;
    let password = format!("db_admin_password={DB_PASSWORD_REF}");
    owner
        .json(&[
            "instances",
            "create",
            "shop",
            "--template",
            "web-stack",
            "--target",
            "local",
            "--env",
            "development",
            "--param",
            "app_name=shop",
            "--param",
            &password,
        ])
        .await;

    let deployed = owner.json(&["deploy", "shop", "--wait"]).await;
    assert_eq!(deployed["status"], "succeeded", "{deployed:#}");
    assert!(shop_dir.join("shop/service.json").is_file());
    // The run logs came through CAIRN_RUNLOG to deployments.
    let id = s(&deployed["deployment_id"]).to_owned();
    let logs = owner.run(&["deployments", "logs", &id]).await.ok();
    assert!(!logs.stdout.trim().is_empty(), "{}", logs.describe());

    let destroyed = owner.json(&["destroy", "shop", "--yes", "--wait"]).await;
    assert_eq!(destroyed["status"], "succeeded", "{destroyed:#}");
    assert!(!shop_dir.join("shop/service.json").exists());
    p.check_alive().expect("every service still runs");

    let server = p.own_nats.as_ref().expect("the platform's own NATS server");
    let log = server.log();
    assert!(
        !log.contains("Violation"),
        "the server refused something a service needs:\n{log}"
    );
}
