//! TestKeys mints tokens that the auth crate's key set, loaded from the written JWKS file,
//! accepts or refuses as each helper promises.
#![allow(clippy::unwrap_used)]

use cairn_auth::{AuthError, KeySet, Role};
use cairn_testkit::TestKeys;
use cairn_testkit::tokens::{TEST_SERVICE, TEST_USER};
use uuid::Uuid;

#[test]
fn valid_tokens_verify_against_the_jwks_file() {
    let keys = TestKeys::new();
    let set = KeySet::load(keys.jwks_path()).unwrap();
    assert!(set.contains(keys.signing_key().kid()));
    assert_eq!(set.len(), 1);

    let tenant = Uuid::new_v4();
    let user = set
        .verify(&keys.user_token(tenant, Role::Approver))
        .unwrap();
    assert_eq!(user.subject, TEST_USER);
    assert_eq!(user.tenant_id, Some(tenant));
    assert_eq!(user.role, Role::Approver);

    let named = keys
        .key_set()
        .verify(&keys.user_token_as("alice", tenant, Role::Viewer));
    assert_eq!(named.unwrap().subject, "alice");

    let service = set.verify(&keys.service_token()).unwrap();
    assert!(service.is_service());
    assert_eq!(service.subject, TEST_SERVICE);
    assert_eq!(
        set.verify(&keys.service_token_as("runner"))
            .unwrap()
            .subject,
        "runner"
    );
}

#[test]
fn bad_tokens_are_refused_for_the_right_reason() {
    let keys = TestKeys::new();
    let set = keys.key_set();
    let tenant = Uuid::new_v4();
    assert!(matches!(
        set.verify(&keys.expired_token(tenant, Role::Owner)),
        Err(AuthError::Expired)
    ));
    assert!(matches!(
        set.verify(&keys.expired_service_token()),
        Err(AuthError::Expired)
    ));
    assert!(matches!(
        set.verify(&keys.forged_token(tenant, Role::Owner)),
        Err(AuthError::BadSignature)
    ));
    assert!(matches!(
        set.verify(&keys.unknown_key_token(tenant, Role::Owner)),
        Err(AuthError::UnknownKeyId(_))
    ));
}

#[test]
fn each_test_gets_its_own_key_and_file() {
    let a = TestKeys::new();
    let b = TestKeys::new();
    assert_ne!(a.jwks_path(), b.jwks_path());
    assert_ne!(a.signing_key().kid(), b.signing_key().kid());
    let token = a.user_token(Uuid::new_v4(), Role::Admin);
    assert!(b.key_set().verify(&token).is_err());
    let path = a.jwks_path().to_owned();
    drop(a);
    assert!(!path.exists(), "the JWKS directory outlived its TestKeys");
}

#[test]
#[should_panic(expected = "sign test token for role service")]
fn a_user_token_cannot_carry_the_service_role() {
    TestKeys::new().user_token(Uuid::new_v4(), Role::Service);
}
