//! No password, API token secret or access token appears in the logs, at any level.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use cairn_auth::Role;
use cairn_proto::tenancy as pb;
use common::*;
use tracing_subscriber::fmt::MakeWriter;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Buffer {
    type Writer = Buffer;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn secrets_never_reach_the_logs() {
    let buffer = Buffer::default();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(buffer.clone())
        .with_ansi(false)
        .init();

    let app = spawn_app().await;
    let a = app.a.id.to_string();
    let wrong = "WrongPassword-7f3a9c1e";
    let new_password = "NewPassword-0b8e41d2aa";
    app.add_member(&app.a, "logme@example.com", Role::Operator)
        .await;
    let access = login(&app.grpc, "tenant-a", "logme@example.com", PASSWORD)
        .await
        .unwrap()
        .access_token;
    let _ = login(&app.grpc, "tenant-a", "logme@example.com", wrong)
        .await
        .unwrap_err();
    let created = app
        .tokens(&access)
        .create_api_token(pb::CreateApiTokenRequest {
            tenant_id: a.clone(),
            name: "ci".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let exchanged = TokensClient::new(app.grpc.clone())
        .exchange_api_token(pb::ExchangeApiTokenRequest {
            api_token: created.secret.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .access_token;
    // Change the last character (to one it is not: the same character would not tamper).
    let mut tampered = created.secret.clone();
    let last = tampered.pop();
    tampered.push(if last == Some('A') { 'B' } else { 'A' });
    let _ = TokensClient::new(app.grpc.clone())
        .exchange_api_token(pb::ExchangeApiTokenRequest {
            api_token: tampered.clone(),
        })
        .await
        .unwrap_err();
    app.users(&access)
        .set_password(pb::SetPasswordRequest {
            current_password: PASSWORD.into(),
            new_password: new_password.into(),
        })
        .await
        .unwrap();
    // A forged bearer token reaches the auth layer's debug log.
    let _ = app
        .targets(&format!("{access}x"))
        .list_targets(pb::ListTargetsRequest {
            tenant_id: a.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();

    let logs = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("login refused"),
        "the test saw no logs: {logs}"
    );
    let secret_part = api_token_secret(&created.secret);
    let tampered_part = api_token_secret(&tampered);
    let signature = |t: &str| t.rsplit('.').next().unwrap().to_owned();
    for (what, needle) in [
        ("password", PASSWORD.to_owned()),
        ("wrong password", wrong.to_owned()),
        ("new password", new_password.to_owned()),
        ("API token secret", secret_part),
        ("tampered API token", tampered_part),
        (
            "bootstrap API token",
            api_token_secret(&app.bootstrap_api_token),
        ),
        ("access token", signature(&access)),
        ("exchanged access token", signature(&exchanged)),
        ("owner access token", signature(&app.a.owner_token)),
    ] {
        assert!(!logs.contains(&needle), "{what} appears in the logs");
    }
    app.finish().await;
}
