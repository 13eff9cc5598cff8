//! Concurrent revokes of one API token: every call answers the revoked token, and exactly
//! one audit entry records the revocation (the revoking statement decides, not a read).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use cairn_proto::tenancy as pb;
use common::*;
use sqlx::{Connection, Row};

const REVOKES: i64 = 6;

#[tokio::test]
async fn concurrent_revokes_of_one_token_write_one_audit_entry() {
    let app = spawn_app().await;
    let a = app.a.id.to_string();
    let token_id = app
        .tokens(&app.a.owner_token)
        .create_api_token(pb::CreateApiTokenRequest {
            tenant_id: a.clone(),
            name: "race".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .token
        .unwrap()
        .token_id;

    // Hold the token's row lock so that every revoke reads the token live and then queues
    // on its UPDATE: they all overlap, deterministically.
    let mut holder = app.admin_conn().await;
    let mut tx = holder.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM tenancy.api_tokens WHERE token_id = $1::uuid FOR UPDATE")
        .bind(&token_id)
        .execute(&mut *tx)
        .await
        .unwrap();
    let revokes = (0..REVOKES).map(|_| {
        let mut client = app.tokens(&app.a.owner_token);
        let req = pb::RevokeApiTokenRequest {
            tenant_id: a.clone(),
            token_id: token_id.clone(),
        };
        tokio::spawn(async move { client.revoke_api_token(req).await })
    });
    let revokes: Vec<_> = revokes.collect();
    let mut watcher = app.admin_conn().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let waiting: i64 = sqlx::query(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut watcher)
        .await
        .unwrap()
        .get(0);
        if waiting >= REVOKES {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {waiting} of {REVOKES} revokes queued on the token's row"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tx.rollback().await.unwrap();
    for done in futures::future::join_all(revokes).await {
        let row = done.unwrap().expect("every revoke succeeds (idempotent)");
        assert!(row.into_inner().token.unwrap().revoked_at.is_some());
    }
    let entries: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM tenancy.audit_log WHERE object_id = $1 AND action LIKE '%revoked'",
    )
    .bind(&token_id)
    .fetch_one(&mut watcher)
    .await
    .unwrap();
    assert_eq!(entries, 1, "one revocation, one audit entry");
}
