//! Role order, role names and the authorization checks on a principal.
#![allow(clippy::unwrap_used)]

use std::cmp::Ordering;

use cairn_auth::{AuthError, Principal, Role};
use uuid::Uuid;

fn user(role: Role, tenant: Uuid) -> Principal {
    Principal {
        subject: "u".into(),
        tenant_id: Some(tenant),
        role,
        scopes: vec!["states:read".into()],
        token_id: "j".into(),
    }
}

fn service() -> Principal {
    Principal {
        subject: "svc".into(),
        tenant_id: None,
        role: Role::Service,
        scopes: vec![],
        token_id: "j".into(),
    }
}

const USER_ROLES: [Role; 5] = [
    Role::Viewer,
    Role::Operator,
    Role::Approver,
    Role::Admin,
    Role::Owner,
];

#[test]
fn user_roles_are_ordered() {
    assert!(Role::Viewer < Role::Operator);
    assert!(Role::Operator < Role::Approver);
    assert!(Role::Approver < Role::Admin);
    assert!(Role::Admin < Role::Owner);
    for (i, a) in USER_ROLES.iter().enumerate() {
        for (j, b) in USER_ROLES.iter().enumerate() {
            assert_eq!(a.partial_cmp(b), Some(i.cmp(&j)), "{a} vs {b}");
        }
    }
}

#[test]
// Negated comparisons are the point here: none of them may hold for an incomparable pair.
#[allow(clippy::neg_cmp_op_on_partial_ord)]
fn service_is_outside_the_order() {
    for role in USER_ROLES {
        assert_eq!(Role::Service.partial_cmp(&role), None);
        assert_eq!(role.partial_cmp(&Role::Service), None);
        assert!(!(Role::Service >= role));
        assert!(!(Role::Service <= role));
        assert!(!(role >= Role::Service));
    }
    assert_eq!(
        Role::Service.partial_cmp(&Role::Service),
        Some(Ordering::Equal)
    );
}

#[test]
fn names_round_trip() {
    let names = [
        "viewer", "operator", "approver", "admin", "owner", "service",
    ];
    for (role, name) in Role::ALL.into_iter().zip(names) {
        assert_eq!(role.to_string(), name);
        assert_eq!(name.parse::<Role>().unwrap(), role);
        assert_eq!(serde_json::to_value(role).unwrap(), name);
        assert_eq!(serde_json::from_value::<Role>(name.into()).unwrap(), role);
    }
    assert!("Admin".parse::<Role>().is_err());
    assert!("root".parse::<Role>().is_err());
    assert!(serde_json::from_value::<Role>("root".into()).is_err());
}

#[test]
fn require_role_follows_the_order() {
    let t = Uuid::new_v4();
    let admin = user(Role::Admin, t);
    admin.require_role(Role::Viewer).unwrap();
    admin.require_role(Role::Approver).unwrap();
    admin.require_role(Role::Admin).unwrap();
    let err = admin.require_role(Role::Owner).unwrap_err();
    assert!(
        matches!(
            err,
            AuthError::InsufficientRole {
                required: Role::Owner,
                actual: Role::Admin
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        tonic::Status::from(err).code(),
        tonic::Code::PermissionDenied
    );

    let viewer = user(Role::Viewer, t);
    assert!(viewer.require_role(Role::Operator).is_err());
    assert!(viewer.require_role(Role::Service).is_err());
}

#[test]
fn service_satisfies_no_user_role() {
    let svc = service();
    for role in USER_ROLES {
        assert!(svc.require_role(role).is_err(), "{role}");
    }
    svc.require_role(Role::Service).unwrap();
    svc.require_service().unwrap();
    assert!(svc.is_service());
}

#[test]
fn require_service_refuses_users() {
    let owner = user(Role::Owner, Uuid::new_v4());
    let err = owner.require_service().unwrap_err();
    assert!(matches!(err, AuthError::ServiceRequired));
    assert_eq!(
        tonic::Status::from(err).code(),
        tonic::Code::PermissionDenied
    );
}

#[test]
fn require_tenant_hides_other_tenants() {
    let mine = Uuid::new_v4();
    let other = Uuid::new_v4();
    let owner = user(Role::Owner, mine);
    owner.require_tenant(mine).unwrap();
    let err = owner.require_tenant(other).unwrap_err();
    assert!(matches!(err, AuthError::OtherTenant));
    let status = tonic::Status::from(err);
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert!(!status.message().contains(&other.to_string()));

    service().require_tenant(other).unwrap();
}

#[test]
fn has_scope_matches_exactly() {
    let p = user(Role::Viewer, Uuid::new_v4());
    assert!(p.has_scope("states:read"));
    assert!(!p.has_scope("states:write"));
    assert!(!p.has_scope("states"));
}

#[test]
fn token_errors_map_to_unauthenticated() {
    for err in [
        AuthError::MissingToken,
        AuthError::Expired,
        AuthError::BadSignature,
        AuthError::UnknownKeyId("k".into()),
        AuthError::UnsupportedAlgorithm("none".into()),
    ] {
        assert_eq!(
            tonic::Status::from(err).code(),
            tonic::Code::Unauthenticated
        );
    }
    assert_eq!(
        tonic::Status::from(AuthError::KeyGeneration).code(),
        tonic::Code::Internal
    );
}
