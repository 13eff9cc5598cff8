//! Issuing and exchanging tokens: login answers, claims of issued tokens, API token
//! expiry/revocation/role capping, service tokens, forged tokens refused, rate limits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use cairn_auth::{KeySet, Role};
use cairn_proto::tenancy as pb;
use common::*;
use serde_json::json;
use tonic::Code;

async fn jwks(app: &TestApp) -> KeySet {
    let keys = TokensClient::new(app.grpc.clone())
        .get_signing_keys(pb::GetSigningKeysRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(keys.active_kid, app.signer().active_kid());
    KeySet::from_jwks_json(&keys.jwks_json).unwrap()
}

fn header_of(token: &str) -> serde_json::Value {
    let h = token.split('.').next().unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(h).unwrap()).unwrap()
}

async fn list_targets(app: &TestApp, token: &str) -> Result<(), tonic::Status> {
    app.targets(token)
        .list_targets(pb::ListTargetsRequest {
            tenant_id: app.a.id.to_string(),
            ..Default::default()
        })
        .await
        .map(|_| ())
}

#[tokio::test]
async fn login_issues_a_verifiable_short_lived_token_and_refuses_uniformly() {
    let app = spawn_app().await;
    let viewer = app
        .add_member(&app.a, "ann@example.com", Role::Viewer)
        .await;
    let t = login(&app.grpc, "tenant-a", "ANN@example.com", PASSWORD)
        .await
        .unwrap();
    assert_eq!(t.role, "viewer");
    assert_eq!(t.tenant_id, app.a.id.to_string());
    let claims = jwks(&app).await.verify_claims(&t.access_token).unwrap();
    assert_eq!(claims.sub, viewer.to_string());
    assert_eq!(claims.iss, "cairn-tenancy");
    assert_eq!(claims.aud, "cairn");
    assert_eq!(claims.role, Role::Viewer);
    assert!(claims.exp - claims.iat <= 15 * 60 && claims.exp > claims.iat);
    assert_eq!(header_of(&t.access_token)["kid"], "k1");
    assert_eq!(header_of(&t.access_token)["alg"], "EdDSA");
    list_targets(&app, &t.access_token).await.unwrap();

    // Wrong password, unknown email, unknown tenant, not a member, no password at all:
    // one answer.
    let cases = [
        ("tenant-a", "ann@example.com", "wrong password here"),
        ("tenant-a", "nobody@example.com", PASSWORD),
        ("no-such-tenant", "ann@example.com", PASSWORD),
        ("tenant-b", "ann@example.com", PASSWORD),
        ("tenant-a", "owner-a@example.com", ""),
        ("tenant-a", "not an email", PASSWORD),
    ];
    let mut messages = Vec::new();
    for (tenant, email, password) in cases {
        let err = login(&app.grpc, tenant, email, password).await.unwrap_err();
        assert_eq!(
            err.code(),
            Code::Unauthenticated,
            "{tenant} {email}: {err:?}"
        );
        messages.push(err.message().to_owned());
    }
    messages.dedup();
    assert_eq!(messages, vec!["invalid credentials".to_owned()]);
    app.finish().await;
}

#[tokio::test]
async fn api_tokens_exchange_until_revoked_or_expired_and_never_exceed_the_member_role() {
    let app = spawn_app().await;
    let a = app.a.id.to_string();
    let admin = app.add_member(&app.a, "adm@example.com", Role::Admin).await;
    let admin_token = login(&app.grpc, "tenant-a", "adm@example.com", PASSWORD)
        .await
        .unwrap()
        .access_token;
    let created = app
        .tokens(&admin_token)
        .create_api_token(pb::CreateApiTokenRequest {
            tenant_id: a.clone(),
            name: "ci".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let secret = created.secret.clone();
    let meta = created.token.unwrap();
    assert_eq!(meta.role, "admin");
    assert!(secret.starts_with("cairn_"));
    // Stored hashed: the secret is nowhere in the table.
    let mut conn = app.admin_conn().await;
    let rows: Vec<String> = sqlx::query_scalar("SELECT t::text FROM tenancy.api_tokens t")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let secret_part = api_token_secret(&secret);
    assert!(rows.iter().all(|r| !r.contains(&secret_part)));
    // Not listed with its secret, and last-used is recorded at the exchange.
    let exchange = |s: String| {
        let grpc = app.grpc.clone();
        async move {
            TokensClient::new(grpc)
                .exchange_api_token(pb::ExchangeApiTokenRequest { api_token: s })
                .await
                .map(tonic::Response::into_inner)
        }
    };
    let issued = exchange(secret.clone()).await.unwrap();
    assert_eq!(issued.role, "admin");
    let claims = jwks(&app)
        .await
        .verify_claims(&issued.access_token)
        .unwrap();
    assert_eq!(claims.sub, admin.to_string());
    let listed = app
        .tokens(&admin_token)
        .list_api_tokens(pb::ListApiTokensRequest {
            tenant_id: a.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let row = listed
        .tokens
        .iter()
        .find(|t| t.token_id == meta.token_id)
        .unwrap();
    assert!(row.last_used_at.is_some());

    // Demoted to viewer: the token now yields viewer.
    app.users(&app.a.owner_token)
        .set_role(pb::SetRoleRequest {
            tenant_id: a.clone(),
            user_id: admin.to_string(),
            role: "viewer".into(),
        })
        .await
        .unwrap();
    assert_eq!(exchange(secret.clone()).await.unwrap().role, "viewer");

    // Tampered secrets and garbage are refused like unknown tokens.
    let mut tampered = secret.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'x' { 'y' } else { 'x' });
    for bad in [tampered, "cairn_garbage".to_owned(), String::new()] {
        let err = exchange(bad).await.unwrap_err();
        assert_eq!(
            (err.code(), err.message()),
            (Code::Unauthenticated, "invalid credentials")
        );
    }

    // Revoked: the next exchange is refused (the access token issued before stays valid
    // until it expires: no per-request lookup).
    app.tokens(&app.a.owner_token)
        .revoke_api_token(pb::RevokeApiTokenRequest {
            tenant_id: a.clone(),
            token_id: meta.token_id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(
        exchange(secret.clone()).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    list_targets(&app, &issued.access_token).await.unwrap();

    // Expired.
    let short = app
        .tokens(&app.a.owner_token)
        .create_api_token(pb::CreateApiTokenRequest {
            tenant_id: a.clone(),
            name: "short".into(),
            ttl_seconds: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .secret;
    exchange(short.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        exchange(short).await.unwrap_err().code(),
        Code::Unauthenticated
    );

    // A removed member's tokens stop working.
    let op = app
        .add_member(&app.a, "op@example.com", Role::Operator)
        .await;
    let op_token = login(&app.grpc, "tenant-a", "op@example.com", PASSWORD)
        .await
        .unwrap()
        .access_token;
    let op_secret = app
        .tokens(&op_token)
        .create_api_token(pb::CreateApiTokenRequest {
            tenant_id: a.clone(),
            name: "op".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .secret;
    exchange(op_secret.clone()).await.unwrap();
    app.users(&app.a.owner_token)
        .remove_user(pb::RemoveUserRequest {
            tenant_id: a.clone(),
            user_id: op.to_string(),
        })
        .await
        .unwrap();
    assert_eq!(
        exchange(op_secret).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    app.finish().await;
}

#[tokio::test]
async fn service_tokens_exchange_to_service_principals_limited_to_service_rpcs() {
    let app = spawn_app().await;
    let target = app.create_target(&app.a, "prod").await;
    let name = cairn_tenancy::domain::names::ServiceAccountName::parse("workflow").unwrap();
    let secret =
        cairn_tenancy::app::bootstrap::service_token(&app.server().app().pool, &name, None)
            .await
            .unwrap();
    let issued = TokensClient::new(app.grpc.clone())
        .exchange_api_token(pb::ExchangeApiTokenRequest {
            api_token: secret.expose().to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(issued.role, "service");
    assert!(issued.tenant_id.is_empty());
    let claims = jwks(&app)
        .await
        .verify_claims(&issued.access_token)
        .unwrap();
    assert_eq!(
        (claims.sub.as_str(), claims.tid.clone()),
        ("workflow", None)
    );

    // Through the SDK's token source and interceptor.
    let source = cairn_sdk::TokenSource::new(
        cairn_sdk::Credential::ApiToken(secret.expose().to_owned()),
        Some(app.grpc.clone()),
    );
    source.access_token().await.unwrap();
    let mut targets = TargetsClient::with_interceptor(app.grpc.clone(), source.interceptor());
    let got = targets
        .get_target(pb::GetTargetRequest {
            tenant_id: app.a.id.to_string(),
            target_id: target.to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .target
        .unwrap();
    assert_eq!(got.name, "prod");
    let err = targets
        .create_target(pb::CreateTargetRequest {
            tenant_id: app.a.id.to_string(),
            name: "x".into(),
            spec: Some(local_spec("/x", 1)),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    let err = app
        .audit(&issued.access_token)
        .list_audit_entries(pb::ListAuditEntriesRequest {
            tenant_id: app.a.id.to_string(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    app.finish().await;
}

#[tokio::test]
async fn forged_tokens_are_refused() {
    let app = spawn_app().await;
    let signer = app.signer();
    let key = &signer.keys()[0];
    let user = app.a.owner;
    let good = json!({ "alg": "EdDSA", "typ": "JWT", "kid": "k1" });
    let claims = claims_json(user, app.a.id, Role::Owner);

    // Sanity: a raw token built this way is accepted.
    list_targets(&app, &raw_ed25519_jwt(&good, &claims, key))
        .await
        .unwrap();

    let mut wrong_aud = claims.clone();
    wrong_aud["aud"] = json!("other");
    let mut wrong_iss = claims.clone();
    wrong_iss["iss"] = json!("evil");
    let mut expired = claims.clone();
    expired["iat"] = json!(claims["iat"].as_i64().unwrap() - 3600);
    expired["exp"] = json!(claims["exp"].as_i64().unwrap() - 3600);
    let unknown_kid = json!({ "alg": "EdDSA", "typ": "JWT", "kid": "k-unknown" });

    let seg = |v: &serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let alg_none = format!(
        "{}.{}.",
        seg(&json!({ "alg": "none", "kid": "k1" })),
        seg(&claims)
    );
    // HS256 keyed with the public key (both the raw bytes and the JWK's `x` string).
    let hs_input = format!(
        "{}.{}",
        seg(&json!({ "alg": "HS256", "typ": "JWT", "kid": "k1" })),
        seg(&claims)
    );
    let hs = |k: &[u8]| {
        let mac = aws_lc_rs::hmac::sign(
            &aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, k),
            hs_input.as_bytes(),
        );
        format!("{hs_input}.{}", URL_SAFE_NO_PAD.encode(mac.as_ref()))
    };
    let x = URL_SAFE_NO_PAD.encode(key.public_key());
    // Tampered: the claims changed to another tenant after signing.
    let signed = raw_ed25519_jwt(&good, &claims, key);
    let mut parts: Vec<String> = signed.split('.').map(str::to_owned).collect();
    let mut other = claims.clone();
    other["role"] = json!("owner");
    other["tid"] = json!(app.b.id.to_string());
    parts[1] = seg(&other);
    let tampered = parts.join(".");

    let forged = [
        ("wrong audience", raw_ed25519_jwt(&good, &wrong_aud, key)),
        ("wrong issuer", raw_ed25519_jwt(&good, &wrong_iss, key)),
        ("expired", raw_ed25519_jwt(&good, &expired, key)),
        ("unknown kid", raw_ed25519_jwt(&unknown_kid, &claims, key)),
        ("alg none", alg_none),
        ("HS256 with the raw public key", hs(key.public_key())),
        ("HS256 with the JWK x", hs(x.as_bytes())),
        ("tampered", tampered),
    ];
    let before = app.snapshot().await;
    for (what, token) in forged {
        let err = list_targets(&app, &token).await.unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{what}: {err:?}");
    }
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn login_is_rate_limited_per_email_even_for_unknown_ones() {
    let app = spawn_app_with(Options {
        login_attempts_per_minute: 3,
        ..Options::default()
    })
    .await;
    for _ in 0..3 {
        let err = login(&app.grpc, "tenant-a", "ghost@example.com", "x")
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated);
    }
    let err = login(&app.grpc, "tenant-a", "Ghost@Example.com", "x")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    // Another account is not affected.
    login(&app.grpc, "tenant-b", &app.b.owner_email, PASSWORD)
        .await
        .unwrap();
    app.finish().await;
}

#[tokio::test]
async fn credential_rpcs_are_rate_limited_per_peer_address() {
    // spawn_app itself uses two credential calls (one exchange, one login).
    let app = spawn_app_with(Options {
        attempts_per_address_per_minute: 6,
        ..Options::default()
    })
    .await;
    let mut codes = Vec::new();
    for _ in 0..6 {
        let err = TokensClient::new(app.grpc.clone())
            .exchange_api_token(pb::ExchangeApiTokenRequest {
                api_token: "cairn_nope".into(),
            })
            .await
            .unwrap_err();
        codes.push(err.code());
    }
    assert_eq!(&codes[..4], &[Code::Unauthenticated; 4]);
    assert_eq!(&codes[4..], &[Code::ResourceExhausted; 2]);
    // Other RPCs are not limited.
    list_targets(&app, &app.a.owner_token).await.unwrap();
    app.finish().await;
}
