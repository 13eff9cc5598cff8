//! The SDK's token source against a real tenancy: it exchanges the API token once, reuses
//! the access token while fresh, refreshes it before it expires, and fails closed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use cairn_proto::tenancy as pb;
use cairn_sdk::{Credential, TokenSource};
use common::*;
use tonic::service::Interceptor;

#[tokio::test]
async fn token_source_reuses_then_refreshes_before_expiry() {
    let app = spawn_app_with(Options {
        access_token_ttl: Duration::from_secs(3),
        ..Options::default()
    })
    .await;
    let source = TokenSource::new(
        Credential::ApiToken(app.bootstrap_api_token.clone()),
        Some(app.grpc.clone()),
    );
    let first = source.access_token().await.unwrap();
    assert_eq!(
        source.access_token().await.unwrap(),
        first,
        "a fresh token was exchanged again"
    );

    // A third of the lifetime before expiry, the next call exchanges again.
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    let second = source.access_token().await.unwrap();
    assert_ne!(second, first);
    app.tenants(&second)
        .get_tenant(pb::GetTenantRequest {
            tenant_id: app.a.id.to_string(),
        })
        .await
        .unwrap();

    // The background refresher keeps the interceptor supplied past several lifetimes.
    let cancel = tokio_util::sync::CancellationToken::new();
    let refresher = source.spawn_refresh(cancel.clone());
    tokio::time::sleep(Duration::from_secs(7)).await;
    let mut tenants = TenantsClient::with_interceptor(app.grpc.clone(), source.interceptor());
    tenants
        .get_tenant(pb::GetTenantRequest {
            tenant_id: app.a.id.to_string(),
        })
        .await
        .unwrap();
    cancel.cancel();
    refresher.await.unwrap();

    // An API token tenancy refuses: the source has no token, and the interceptor refuses
    // to send the call.
    let bad = TokenSource::new(
        Credential::ApiToken(
            "cairn_00000000000000000000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
                .into(),
        ),
        Some(app.grpc.clone()),
    );
    assert!(
        matches!(bad.access_token().await, Err(cairn_sdk::SdkError::Exchange(s)) if s.code() == tonic::Code::Unauthenticated)
    );
    let err = bad.interceptor().call(tonic::Request::new(())).unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    app.finish().await;
}
