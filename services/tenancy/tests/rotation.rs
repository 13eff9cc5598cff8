//! Key rotation: a new active key signs new tokens while tokens of the old key stay valid
//! until the old key is removed from the file (after they expired).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use cairn_auth::KeySet;
use cairn_proto::tenancy as pb;
use common::*;
use tonic::Code;

fn kid(token: &str) -> String {
    let h: serde_json::Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(token.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    h["kid"].as_str().unwrap().to_owned()
}

async fn get_tenant(app: &TestApp, token: &str) -> Result<(), tonic::Status> {
    app.tenants(token)
        .get_tenant(pb::GetTenantRequest {
            tenant_id: app.b.id.to_string(),
        })
        .await
        .map(|_| ())
}

#[tokio::test]
async fn rotation_keeps_old_tokens_valid_until_the_old_key_is_removed() {
    let mut app = spawn_app().await;
    let old = login(&app.grpc, "tenant-b", &app.b.owner_email, PASSWORD)
        .await
        .unwrap()
        .access_token;
    assert_eq!(kid(&old), "k1");

    // Add k2 and activate it, then restart tenancy.
    let mut signer = app.signer();
    signer.add_generated("k2", true).unwrap();
    signer.save(&app.keys_file).unwrap();
    app.restart().await;

    let new = login(&app.grpc, "tenant-b", &app.b.owner_email, PASSWORD)
        .await
        .unwrap()
        .access_token;
    assert_eq!(kid(&new), "k2");
    get_tenant(&app, &old).await.unwrap();
    get_tenant(&app, &new).await.unwrap();
    let keys = TokensClient::new(app.grpc.clone())
        .get_signing_keys(pb::GetSigningKeysRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(keys.active_kid, "k2");
    let set = KeySet::from_jwks_json(&keys.jwks_json).unwrap();
    assert!(set.contains("k1") && set.contains("k2"));
    set.verify(&old).unwrap();
    set.verify(&new).unwrap();

    // Once k1 is retired, its tokens are refused and k2's still work.
    let mut signer = app.signer();
    signer.remove("k1").unwrap();
    signer.save(&app.keys_file).unwrap();
    app.restart().await;
    assert_eq!(
        get_tenant(&app, &old).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    get_tenant(&app, &new).await.unwrap();
    app.finish().await;
}
