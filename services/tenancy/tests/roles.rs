//! The role matrix: every mutating RPC called by each role (and by a service principal)
//! succeeds exactly when the role is high enough; a refused call changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn_auth::Role;
use cairn_proto::tenancy as pb;
use common::*;
use tonic::Code;

/// The callers: a member per user role, and a service.
async fn callers(app: &TestApp) -> Vec<(Role, String)> {
    let mut out = Vec::new();
    for role in [Role::Viewer, Role::Operator, Role::Approver, Role::Admin] {
        let user = app
            .add_member(&app.a, &format!("{role}@example.com"), role)
            .await;
        out.push((role, app.mint(user, app.a.id, role)));
    }
    out.push((Role::Owner, app.a.owner_token.clone()));
    out.push((Role::Service, app.mint_service("workflow")));
    out
}

fn allowed(caller: Role, min: Role) -> bool {
    caller.satisfies(min)
}

async fn expect(
    app: &TestApp,
    rpc: &str,
    caller: Role,
    allowed: bool,
    call: impl Future<Output = Result<(), tonic::Status>>,
) {
    let before = app.snapshot().await;
    let result = call.await;
    if allowed {
        assert!(
            result.is_ok(),
            "{rpc} by {caller}: expected OK, got {result:?}"
        );
    } else {
        let status = result.expect_err(&format!("{rpc} by {caller}: expected PERMISSION_DENIED"));
        assert_eq!(
            status.code(),
            Code::PermissionDenied,
            "{rpc} by {caller}: {status:?}"
        );
        assert_eq!(
            app.snapshot().await,
            before,
            "{rpc} by {caller} was refused but changed something"
        );
    }
}

fn ok<T>(r: Result<tonic::Response<T>, tonic::Status>) -> Result<(), tonic::Status> {
    r.map(|_| ())
}

#[tokio::test]
async fn every_mutating_rpc_checks_the_role() {
    let app = spawn_app().await;
    let a = app.a.id.to_string();
    let callers = callers(&app).await;
    let owner_api_token = app
        .tokens(&app.a.owner_token)
        .create_api_token(pb::CreateApiTokenRequest {
            tenant_id: a.clone(),
            name: "owner".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .token
        .unwrap()
        .token_id;

    for (i, (role, token)) in callers.iter().enumerate() {
        let role = *role;
        // Users.AddUser: admin.
        expect(&app, "AddUser", role, allowed(role, Role::Admin), async {
            ok(app
                .users(token)
                .add_user(pb::AddUserRequest {
                    tenant_id: a.clone(),
                    email: format!("new-{i}@example.com"),
                    display_name: "New".into(),
                    password: PASSWORD.into(),
                    role: "viewer".into(),
                })
                .await)
        })
        .await;

        // Users.SetRole and Users.RemoveUser on fresh viewers: admin.
        let victim = app
            .add_member(&app.a, &format!("victim-{i}@example.com"), Role::Viewer)
            .await;
        expect(&app, "SetRole", role, allowed(role, Role::Admin), async {
            ok(app
                .users(token)
                .set_role(pb::SetRoleRequest {
                    tenant_id: a.clone(),
                    user_id: victim.to_string(),
                    role: "operator".into(),
                })
                .await)
        })
        .await;
        expect(
            &app,
            "RemoveUser",
            role,
            allowed(role, Role::Admin),
            async {
                ok(app
                    .users(token)
                    .remove_user(pb::RemoveUserRequest {
                        tenant_id: a.clone(),
                        user_id: victim.to_string(),
                    })
                    .await)
            },
        )
        .await;

        // Tokens.CreateApiToken: any member (not a service).
        expect(
            &app,
            "CreateApiToken",
            role,
            allowed(role, Role::Viewer),
            async {
                ok(app
                    .tokens(token)
                    .create_api_token(pb::CreateApiTokenRequest {
                        tenant_id: a.clone(),
                        name: format!("t{i}"),
                        ..Default::default()
                    })
                    .await)
            },
        )
        .await;

        // Tokens.RevokeApiToken of another member's token: admin.
        expect(
            &app,
            "RevokeApiToken",
            role,
            allowed(role, Role::Admin),
            async {
                ok(app
                    .tokens(token)
                    .revoke_api_token(pb::RevokeApiTokenRequest {
                        tenant_id: a.clone(),
                        token_id: owner_api_token.clone(),
                    })
                    .await)
            },
        )
        .await;

        // Targets: admin to create, update, delete.
        let name = format!("target-{i}");
        expect(
            &app,
            "CreateTarget",
            role,
            allowed(role, Role::Admin),
            async {
                ok(app
                    .targets(token)
                    .create_target(pb::CreateTargetRequest {
                        tenant_id: a.clone(),
                        name: name.clone(),
                        spec: Some(local_spec("/srv", 1)),
                    })
                    .await)
            },
        )
        .await;
        let target = app.create_target(&app.a, &format!("fixed-{i}")).await;
        expect(
            &app,
            "UpdateTarget",
            role,
            allowed(role, Role::Admin),
            async {
                ok(app
                    .targets(token)
                    .update_target(pb::UpdateTargetRequest {
                        tenant_id: a.clone(),
                        target_id: target.to_string(),
                        spec: Some(local_spec("/srv/x", 3)),
                    })
                    .await)
            },
        )
        .await;
        expect(
            &app,
            "DeleteTarget",
            role,
            allowed(role, Role::Admin),
            async {
                ok(app
                    .targets(token)
                    .delete_target(pb::DeleteTargetRequest {
                        tenant_id: a.clone(),
                        target_id: target.to_string(),
                    })
                    .await)
            },
        )
        .await;

        // Tenants.CreateTenant: platform admins only; of these callers only the bootstrap
        // owner's token carries the platform scope.
        expect(&app, "CreateTenant", role, role == Role::Owner, async {
            ok(app
                .tenants(token)
                .create_tenant(pb::CreateTenantRequest {
                    slug: format!("new-tenant-{i}"),
                    display_name: "N".into(),
                    owner_email: format!("n{i}@example.com"),
                    owner_display_name: "N".into(),
                    owner_password: PASSWORD.into(),
                })
                .await)
        })
        .await;

        // Reads marked for services work for them; audit needs admin.
        let read_targets = app
            .targets(token)
            .list_targets(pb::ListTargetsRequest {
                tenant_id: a.clone(),
                ..Default::default()
            })
            .await;
        assert!(
            read_targets.is_ok(),
            "ListTargets by {role}: {read_targets:?}"
        );
        let audit = app
            .audit(token)
            .list_audit_entries(pb::ListAuditEntriesRequest {
                tenant_id: a.clone(),
                ..Default::default()
            })
            .await;
        assert_eq!(
            audit.is_ok(),
            role.satisfies(Role::Admin),
            "ListAuditEntries by {role}: {audit:?}"
        );
    }
    app.finish().await;
}

#[tokio::test]
async fn owner_role_rules_and_the_last_owner() {
    let app = spawn_app().await;
    let a = app.a.id.to_string();
    let admin = app
        .add_member(&app.a, "admin@example.com", Role::Admin)
        .await;
    let admin_token = app.mint(admin, app.a.id, Role::Admin);
    let before = app.snapshot().await;

    // An admin may neither grant owner nor touch the owner.
    for (user, role) in [(admin, "owner"), (app.a.owner, "viewer")] {
        let err = app
            .users(&admin_token)
            .set_role(pb::SetRoleRequest {
                tenant_id: a.clone(),
                user_id: user.to_string(),
                role: role.into(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    }
    let err = app
        .users(&admin_token)
        .remove_user(pb::RemoveUserRequest {
            tenant_id: a.clone(),
            user_id: app.a.owner.to_string(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    // An admin may not mint a token above its role.
    let err = app
        .tokens(&admin_token)
        .create_api_token(pb::CreateApiTokenRequest {
            tenant_id: a.clone(),
            name: "up".into(),
            role: "owner".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    // The last owner keeps the role, even against themselves.
    let err = app
        .users(&app.a.owner_token)
        .set_role(pb::SetRoleRequest {
            tenant_id: a.clone(),
            user_id: app.a.owner.to_string(),
            role: "admin".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let err = app
        .users(&app.a.owner_token)
        .remove_user(pb::RemoveUserRequest {
            tenant_id: a.clone(),
            user_id: app.a.owner.to_string(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(app.snapshot().await, before);

    // With a second owner, the first may step down.
    app.users(&app.a.owner_token)
        .set_role(pb::SetRoleRequest {
            tenant_id: a.clone(),
            user_id: admin.to_string(),
            role: "owner".into(),
        })
        .await
        .unwrap();
    let member = app
        .users(&app.a.owner_token)
        .set_role(pb::SetRoleRequest {
            tenant_id: a.clone(),
            user_id: app.a.owner.to_string(),
            role: "admin".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .member
        .unwrap();
    assert_eq!(member.role, "admin");

    // SetPassword is for users only, and needs the current password when there is one.
    let err = app
        .users(&app.mint_service("workflow"))
        .set_password(pb::SetPasswordRequest {
            current_password: String::new(),
            new_password: "another long password".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    let before = app.snapshot().await;
    let err = app
        .users(&admin_token)
        .set_password(pb::SetPasswordRequest {
            current_password: "not the password".into(),
            new_password: "another long password".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert_eq!(app.snapshot().await, before);

    // A service principal may not create tokens or manage users.
    let svc = app.mint_service("workflow");
    let err = app
        .users(&svc)
        .add_user(pb::AddUserRequest {
            tenant_id: a.clone(),
            email: "s@example.com".into(),
            display_name: "s".into(),
            password: PASSWORD.into(),
            role: "viewer".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);

    // Any member may revoke their own token.
    let viewer = app.add_member(&app.a, "v@example.com", Role::Viewer).await;
    let viewer_token = app.mint(viewer, app.a.id, Role::Viewer);
    let own = app
        .tokens(&viewer_token)
        .create_api_token(pb::CreateApiTokenRequest {
            tenant_id: a.clone(),
            name: "mine".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .token
        .unwrap()
        .token_id;
    let revoked = app
        .tokens(&viewer_token)
        .revoke_api_token(pb::RevokeApiTokenRequest {
            tenant_id: a.clone(),
            token_id: own,
        })
        .await
        .unwrap()
        .into_inner()
        .token
        .unwrap();
    assert!(revoked.revoked_at.is_some());
    app.finish().await;
}
