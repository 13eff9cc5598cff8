//! Every RPC called with a token of tenant B on tenant A's objects answers NOT_FOUND and
//! changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn_auth::Role;
use cairn_proto::tenancy as pb;
use common::*;
use tonic::Code;

fn expect_not_found<T: std::fmt::Debug>(what: &str, r: Result<tonic::Response<T>, tonic::Status>) {
    match r {
        Err(s) if s.code() == Code::NotFound => {}
        other => panic!("{what}: expected NOT_FOUND, got {other:?}"),
    }
}

#[tokio::test]
async fn tenant_b_cannot_see_or_touch_tenant_a() {
    let app = spawn_app().await;
    let member_a = app
        .add_member(&app.a, "viewer-a@example.com", Role::Viewer)
        .await;
    let target_a = app.create_target(&app.a, "prod").await;
    let token_a = app
        .tokens(&app.a.owner_token)
        .create_api_token(pb::CreateApiTokenRequest {
            tenant_id: app.a.id.to_string(),
            name: "ci".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .token
        .unwrap()
        .token_id;

    // B's owner: the strongest tenant role there is, without the platform scope.
    let b = app.b.owner_token.clone();
    let a_id = app.a.id.to_string();
    let b_id = app.b.id.to_string();
    let before = app.snapshot().await;

    // Tenant A's id with B's token.
    expect_not_found(
        "GetTenant",
        app.tenants(&b)
            .get_tenant(pb::GetTenantRequest {
                tenant_id: a_id.clone(),
            })
            .await,
    );
    expect_not_found(
        "ListUsers",
        app.users(&b)
            .list_users(pb::ListUsersRequest {
                tenant_id: a_id.clone(),
                ..Default::default()
            })
            .await,
    );
    expect_not_found(
        "GetUser",
        app.users(&b)
            .get_user(pb::GetUserRequest {
                tenant_id: a_id.clone(),
                user_id: member_a.to_string(),
            })
            .await,
    );
    expect_not_found(
        "AddUser",
        app.users(&b)
            .add_user(pb::AddUserRequest {
                tenant_id: a_id.clone(),
                email: "intruder@example.com".into(),
                display_name: "Intruder".into(),
                password: PASSWORD.into(),
                role: "viewer".into(),
            })
            .await,
    );
    expect_not_found(
        "SetRole",
        app.users(&b)
            .set_role(pb::SetRoleRequest {
                tenant_id: a_id.clone(),
                user_id: member_a.to_string(),
                role: "admin".into(),
            })
            .await,
    );
    expect_not_found(
        "RemoveUser",
        app.users(&b)
            .remove_user(pb::RemoveUserRequest {
                tenant_id: a_id.clone(),
                user_id: member_a.to_string(),
            })
            .await,
    );
    expect_not_found(
        "CreateApiToken",
        app.tokens(&b)
            .create_api_token(pb::CreateApiTokenRequest {
                tenant_id: a_id.clone(),
                name: "x".into(),
                ..Default::default()
            })
            .await,
    );
    expect_not_found(
        "ListApiTokens",
        app.tokens(&b)
            .list_api_tokens(pb::ListApiTokensRequest {
                tenant_id: a_id.clone(),
                ..Default::default()
            })
            .await,
    );
    expect_not_found(
        "RevokeApiToken",
        app.tokens(&b)
            .revoke_api_token(pb::RevokeApiTokenRequest {
                tenant_id: a_id.clone(),
                token_id: token_a.clone(),
            })
            .await,
    );
    expect_not_found(
        "CreateTarget",
        app.targets(&b)
            .create_target(pb::CreateTargetRequest {
                tenant_id: a_id.clone(),
                name: "evil".into(),
                spec: Some(local_spec("/tmp", 1)),
            })
            .await,
    );
    expect_not_found(
        "GetTarget",
        app.targets(&b)
            .get_target(pb::GetTargetRequest {
                tenant_id: a_id.clone(),
                target_id: target_a.to_string(),
                ..Default::default()
            })
            .await,
    );
    expect_not_found(
        "ListTargets",
        app.targets(&b)
            .list_targets(pb::ListTargetsRequest {
                tenant_id: a_id.clone(),
                ..Default::default()
            })
            .await,
    );
    expect_not_found(
        "UpdateTarget",
        app.targets(&b)
            .update_target(pb::UpdateTargetRequest {
                tenant_id: a_id.clone(),
                target_id: target_a.to_string(),
                spec: Some(local_spec("/tmp", 9)),
            })
            .await,
    );
    expect_not_found(
        "DeleteTarget",
        app.targets(&b)
            .delete_target(pb::DeleteTargetRequest {
                tenant_id: a_id.clone(),
                target_id: target_a.to_string(),
            })
            .await,
    );
    expect_not_found(
        "ListAuditEntries",
        app.audit(&b)
            .list_audit_entries(pb::ListAuditEntriesRequest {
                tenant_id: a_id.clone(),
                ..Default::default()
            })
            .await,
    );

    // Tenant A's object ids under B's own tenant id.
    expect_not_found(
        "GetUser(B, a's user)",
        app.users(&b)
            .get_user(pb::GetUserRequest {
                tenant_id: b_id.clone(),
                user_id: member_a.to_string(),
            })
            .await,
    );
    expect_not_found(
        "SetRole(B, a's user)",
        app.users(&b)
            .set_role(pb::SetRoleRequest {
                tenant_id: b_id.clone(),
                user_id: member_a.to_string(),
                role: "admin".into(),
            })
            .await,
    );
    expect_not_found(
        "RemoveUser(B, a's user)",
        app.users(&b)
            .remove_user(pb::RemoveUserRequest {
                tenant_id: b_id.clone(),
                user_id: member_a.to_string(),
            })
            .await,
    );
    expect_not_found(
        "RevokeApiToken(B, a's token)",
        app.tokens(&b)
            .revoke_api_token(pb::RevokeApiTokenRequest {
                tenant_id: b_id.clone(),
                token_id: token_a.clone(),
            })
            .await,
    );
    expect_not_found(
        "GetTarget(B, a's target)",
        app.targets(&b)
            .get_target(pb::GetTargetRequest {
                tenant_id: b_id.clone(),
                target_id: target_a.to_string(),
                ..Default::default()
            })
            .await,
    );
    expect_not_found(
        "UpdateTarget(B, a's target)",
        app.targets(&b)
            .update_target(pb::UpdateTargetRequest {
                tenant_id: b_id.clone(),
                target_id: target_a.to_string(),
                spec: Some(local_spec("/tmp", 9)),
            })
            .await,
    );
    expect_not_found(
        "DeleteTarget(B, a's target)",
        app.targets(&b)
            .delete_target(pb::DeleteTargetRequest {
                tenant_id: b_id.clone(),
                target_id: target_a.to_string(),
            })
            .await,
    );

    assert_eq!(
        app.snapshot().await,
        before,
        "a refused call changed something"
    );

    // B's lists show B only.
    let tenants = app
        .tenants(&b)
        .list_tenants(pb::ListTenantsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        tenants
            .tenants
            .iter()
            .map(|t| t.tenant_id.clone())
            .collect::<Vec<_>>(),
        vec![b_id.clone()]
    );
    let targets = app
        .targets(&b)
        .list_targets(pb::ListTargetsRequest {
            tenant_id: b_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(targets.targets.is_empty());
    let entries = app
        .audit(&b)
        .list_audit_entries(pb::ListAuditEntriesRequest {
            tenant_id: b_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!entries.entries.is_empty());
    assert!(
        entries.entries.iter().all(|e| e.tenant_id == b_id),
        "B saw another tenant's audit entries"
    );

    // Logging in to tenant A with B's owner credentials fails like a wrong password.
    let err = login(&app.grpc, "tenant-a", &app.b.owner_email, PASSWORD)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    app.finish().await;
}

#[tokio::test]
async fn a_target_is_found_by_name_in_its_own_tenant_only() {
    let app = spawn_app().await;
    let target_a = app.create_target(&app.a, "prod").await;
    let by_name = |tenant: &Tenant| pb::GetTargetRequest {
        tenant_id: tenant.id.to_string(),
        name: "prod".into(),
        ..Default::default()
    };
    let found = app
        .targets(&app.a.owner_token)
        .get_target(by_name(&app.a))
        .await
        .unwrap()
        .into_inner()
        .target
        .unwrap();
    assert_eq!(found.target_id, target_a.to_string());
    // A service (the workflow) finds it by name as well.
    let service = app
        .targets(&app.mint_service("deployments"))
        .get_target(by_name(&app.a))
        .await
        .unwrap()
        .into_inner()
        .target
        .unwrap();
    assert_eq!(service.target_id, target_a.to_string());
    // Tenant B has no target of that name, and may not ask in tenant A.
    expect_not_found(
        "GetTarget(B, name prod)",
        app.targets(&app.b.owner_token)
            .get_target(by_name(&app.b))
            .await,
    );
    expect_not_found(
        "GetTarget(B in A, name prod)",
        app.targets(&app.b.owner_token)
            .get_target(by_name(&app.a))
            .await,
    );
    let bad = app
        .targets(&app.a.owner_token)
        .get_target(pb::GetTargetRequest {
            tenant_id: app.a.id.to_string(),
            name: "Not A Name".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
}
