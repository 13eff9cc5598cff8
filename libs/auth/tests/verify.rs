//! Token verification: what the key set accepts and everything it must refuse.
#![allow(clippy::unwrap_used)]

mod common;

use cairn_auth::{AuthError, Claims, KeySet, MAX_TOKEN_LIFETIME, Role, SigningKey};
use common::{FIVE_MIN, b64, eddsa_header, now, sign_raw, user_claims_json};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use uuid::Uuid;

fn key_and_set() -> (SigningKey, KeySet) {
    let key = SigningKey::generate("k1").unwrap();
    let set = KeySet::from_signing_keys(std::slice::from_ref(&key)).unwrap();
    (key, set)
}

#[test]
fn valid_user_token_is_accepted() {
    let (key, set) = key_and_set();
    let tenant = Uuid::new_v4();
    let claims = Claims::new_user("alice", tenant, Role::Approver, FIVE_MIN)
        .with_scopes(["states:read", "deployments:approve"]);
    let token = key.sign(&claims).unwrap();

    let principal = set.verify(&token).unwrap();
    assert_eq!(principal.subject, "alice");
    assert_eq!(principal.tenant_id, Some(tenant));
    assert_eq!(principal.role, Role::Approver);
    assert_eq!(principal.scopes, vec!["states:read", "deployments:approve"]);
    assert_eq!(principal.token_id, claims.jti);
    assert!(!principal.is_service());

    assert_eq!(set.verify_claims(&token).unwrap(), claims);
}

#[test]
fn valid_service_token_is_accepted() {
    let (key, set) = key_and_set();
    let claims = Claims::new_service("svc-deployer", FIVE_MIN);
    assert_eq!(claims.tid, None);
    let principal = set.verify(&key.sign(&claims).unwrap()).unwrap();
    assert_eq!(principal.subject, "svc-deployer");
    assert_eq!(principal.tenant_id, None);
    assert_eq!(principal.role, Role::Service);
    assert!(principal.is_service());
}

#[test]
fn service_claims_omit_tid_on_the_wire() {
    let (key, _) = key_and_set();
    let token = key.sign(&Claims::new_service("svc", FIVE_MIN)).unwrap();
    let payload = token.split('.').nth(1).unwrap();
    let json: serde_json::Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload)
            .unwrap(),
    )
    .unwrap();
    assert!(json.get("tid").is_none(), "{json}");
    assert_eq!(json["role"], "service");
    assert_eq!(json["iss"], "cairn-tenancy");
    assert_eq!(json["aud"], "cairn");
}

#[test]
fn expired_token_is_refused() {
    let (key, set) = key_and_set();
    let mut claims = Claims::new_user("alice", Uuid::new_v4(), Role::Viewer, FIVE_MIN);
    claims.iat = now() - 600;
    claims.exp = now() - 60;
    let err = set.verify(&key.sign(&claims).unwrap()).unwrap_err();
    assert!(matches!(err, AuthError::Expired), "{err:?}");
}

#[test]
fn expiry_within_the_30s_leeway_is_accepted_and_beyond_it_refused() {
    let (key, set) = key_and_set();
    let mut claims = Claims::new_user("alice", Uuid::new_v4(), Role::Viewer, FIVE_MIN);
    claims.iat = now() - 300;
    claims.exp = now() - 10;
    set.verify(&key.sign(&claims).unwrap()).unwrap();

    claims.exp = now() - 35;
    let err = set.verify(&key.sign(&claims).unwrap()).unwrap_err();
    assert!(matches!(err, AuthError::Expired), "{err:?}");
}

#[test]
fn token_issued_in_the_future_is_refused() {
    let (key, set) = key_and_set();
    let mut claims = Claims::new_user("alice", Uuid::new_v4(), Role::Viewer, FIVE_MIN);
    claims.iat = now() + 120;
    claims.exp = now() + 400;
    let err = set.verify(&key.sign(&claims).unwrap()).unwrap_err();
    assert!(matches!(err, AuthError::IssuedInFuture), "{err:?}");
}

#[test]
fn wrong_audience_is_refused() {
    let (key, set) = key_and_set();
    let mut claims = user_claims_json(Uuid::new_v4());
    claims["aud"] = json!("someone-else");
    let err = set
        .verify(&sign_raw(&key, &eddsa_header(&key), &claims))
        .unwrap_err();
    assert!(matches!(err, AuthError::WrongAudience), "{err:?}");

    let mut typed = Claims::new_user("alice", Uuid::new_v4(), Role::Viewer, FIVE_MIN);
    typed.aud = "someone-else".into();
    assert!(matches!(key.sign(&typed), Err(AuthError::WrongAudience)));
}

#[test]
fn audience_as_array_with_a_foreign_value_is_refused() {
    let (key, set) = key_and_set();
    let mut claims = user_claims_json(Uuid::new_v4());
    claims["aud"] = json!(["other"]);
    let err = set
        .verify(&sign_raw(&key, &eddsa_header(&key), &claims))
        .unwrap_err();
    assert!(
        matches!(err, AuthError::WrongAudience | AuthError::InvalidClaims(_)),
        "{err:?}"
    );
}

#[test]
fn wrong_issuer_is_refused() {
    let (key, set) = key_and_set();
    let mut claims = user_claims_json(Uuid::new_v4());
    claims["iss"] = json!("evil-tenancy");
    let err = set
        .verify(&sign_raw(&key, &eddsa_header(&key), &claims))
        .unwrap_err();
    assert!(matches!(err, AuthError::WrongIssuer), "{err:?}");

    let mut typed = Claims::new_service("svc", FIVE_MIN);
    typed.iss = "evil-tenancy".into();
    assert!(matches!(key.sign(&typed), Err(AuthError::WrongIssuer)));
}

#[test]
fn missing_issuer_or_audience_is_refused() {
    let (key, set) = key_and_set();
    for claim in ["iss", "aud", "exp", "sub", "jti"] {
        let mut claims = user_claims_json(Uuid::new_v4());
        claims.as_object_mut().unwrap().remove(claim);
        let err = set
            .verify(&sign_raw(&key, &eddsa_header(&key), &claims))
            .unwrap_err();
        assert!(
            matches!(err, AuthError::InvalidClaims(_)),
            "{claim}: {err:?}"
        );
    }
}

#[test]
fn unknown_kid_is_refused() {
    let (_, set) = key_and_set();
    let stranger = SigningKey::generate("k-unknown").unwrap();
    let token = stranger
        .sign(&Claims::new_service("svc", FIVE_MIN))
        .unwrap();
    let err = set.verify(&token).unwrap_err();
    assert!(
        matches!(&err, AuthError::UnknownKeyId(kid) if kid == "k-unknown"),
        "{err:?}"
    );
}

#[test]
fn known_kid_with_another_keys_signature_is_refused() {
    let (_, set) = key_and_set();
    let impostor = SigningKey::generate("k1").unwrap();
    let token = impostor
        .sign(&Claims::new_service("svc", FIVE_MIN))
        .unwrap();
    let err = set.verify(&token).unwrap_err();
    assert!(matches!(err, AuthError::BadSignature), "{err:?}");
}

#[test]
fn missing_kid_is_refused() {
    let (key, set) = key_and_set();
    let header = json!({ "alg": "EdDSA", "typ": "JWT" });
    let token = sign_raw(&key, &header, &user_claims_json(Uuid::new_v4()));
    let err = set.verify(&token).unwrap_err();
    assert!(matches!(err, AuthError::MissingKeyId), "{err:?}");
}

#[test]
fn alg_none_is_refused() {
    let (key, set) = key_and_set();
    let claims = user_claims_json(Uuid::new_v4());
    let header = json!({ "alg": "none", "typ": "JWT", "kid": key.kid() });
    let unsigned = format!(
        "{}.{}.",
        b64(&serde_json::to_vec(&header).unwrap()),
        b64(&serde_json::to_vec(&claims).unwrap())
    );
    let err = set.verify(&unsigned).unwrap_err();
    assert!(
        matches!(&err, AuthError::UnsupportedAlgorithm(alg) if alg == "none"),
        "{err:?}"
    );

    // Same with a real signature attached: the algorithm alone decides.
    let signed = sign_raw(&key, &header, &claims);
    let err = set.verify(&signed).unwrap_err();
    assert!(matches!(err, AuthError::UnsupportedAlgorithm(_)), "{err:?}");
}

#[test]
fn hs256_with_the_public_key_as_secret_is_refused() {
    let (key, set) = key_and_set();
    let claims = Claims::new_user("alice", Uuid::new_v4(), Role::Owner, FIVE_MIN);
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(key.kid().to_owned());

    let raw_public = key.public_key().to_vec();
    let jwk_x = key.public_jwk().x.into_bytes();
    let jwks = cairn_auth::jwks_json(std::slice::from_ref(&key)).into_bytes();
    for secret in [raw_public, jwk_x, jwks] {
        let token = jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_secret(&secret).unwrap(),
        )
        .unwrap();
        let err = set.verify(&token).unwrap_err();
        assert!(
            matches!(&err, AuthError::UnsupportedAlgorithm(alg) if alg == "HS256"),
            "{err:?}"
        );
    }
}

#[test]
fn tampered_payload_is_refused() {
    let (key, set) = key_and_set();
    let tenant = Uuid::new_v4();
    let token = key
        .sign(&Claims::new_user("alice", tenant, Role::Viewer, FIVE_MIN))
        .unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims = user_claims_json(tenant);
    claims["sub"] = json!("alice");
    claims["role"] = json!("owner");
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        b64(&serde_json::to_vec(&claims).unwrap()),
        parts[2]
    );
    let err = set.verify(&forged).unwrap_err();
    assert!(matches!(err, AuthError::BadSignature), "{err:?}");

    // Flipping one signature character is refused as well.
    let mut sig = parts[2].to_owned().into_bytes();
    sig[5] = if sig[5] == b'A' { b'B' } else { b'A' };
    let flipped = format!(
        "{}.{}.{}",
        parts[0],
        parts[1],
        String::from_utf8(sig).unwrap()
    );
    assert!(set.verify(&flipped).is_err());
}

#[test]
fn lifetime_over_15_minutes_is_refused() {
    let (key, set) = key_and_set();
    let max = i64::try_from(MAX_TOKEN_LIFETIME.as_secs()).unwrap();

    let mut claims = user_claims_json(Uuid::new_v4());
    claims["exp"] = json!(claims["iat"].as_i64().unwrap() + max + 1);
    let err = set
        .verify(&sign_raw(&key, &eddsa_header(&key), &claims))
        .unwrap_err();
    assert!(matches!(err, AuthError::LifetimeTooLong { .. }), "{err:?}");

    // Exactly 15 minutes is fine.
    claims["exp"] = json!(claims["iat"].as_i64().unwrap() + max);
    set.verify(&sign_raw(&key, &eddsa_header(&key), &claims))
        .unwrap();

    // The signer refuses to mint one, too.
    let long = Claims::new_service(
        "svc",
        MAX_TOKEN_LIFETIME + std::time::Duration::from_secs(1),
    );
    assert!(matches!(
        key.sign(&long),
        Err(AuthError::LifetimeTooLong { .. })
    ));
}

#[test]
fn tenant_must_match_the_role() {
    let (key, set) = key_and_set();

    let mut user_without_tenant = user_claims_json(Uuid::new_v4());
    user_without_tenant.as_object_mut().unwrap().remove("tid");
    let err = set
        .verify(&sign_raw(&key, &eddsa_header(&key), &user_without_tenant))
        .unwrap_err();
    assert!(matches!(err, AuthError::InvalidClaims(_)), "{err:?}");

    let mut service_with_tenant = user_claims_json(Uuid::new_v4());
    service_with_tenant["role"] = json!("service");
    let err = set
        .verify(&sign_raw(&key, &eddsa_header(&key), &service_with_tenant))
        .unwrap_err();
    assert!(matches!(err, AuthError::InvalidClaims(_)), "{err:?}");

    let mut bad_tenant = user_claims_json(Uuid::new_v4());
    bad_tenant["tid"] = json!("not-a-uuid");
    let err = set
        .verify(&sign_raw(&key, &eddsa_header(&key), &bad_tenant))
        .unwrap_err();
    assert!(matches!(err, AuthError::InvalidClaims(_)), "{err:?}");

    let mut unknown_role = user_claims_json(Uuid::new_v4());
    unknown_role["role"] = json!("superuser");
    let err = set
        .verify(&sign_raw(&key, &eddsa_header(&key), &unknown_role))
        .unwrap_err();
    assert!(matches!(err, AuthError::InvalidClaims(_)), "{err:?}");
}

#[test]
fn garbage_is_refused_as_malformed() {
    let (_, set) = key_and_set();
    for token in ["", "abc", "a.b", "a.b.c.d", "!!!.e30.sig", "e30.e30.sig"] {
        let err = set.verify(token).unwrap_err();
        assert!(
            matches!(
                err,
                AuthError::MalformedToken(_) | AuthError::UnsupportedAlgorithm(_)
            ),
            "{token:?}: {err:?}"
        );
    }
}

#[test]
fn rotation_accepts_tokens_of_every_key_in_the_set() {
    let old = SigningKey::generate("2025-01").unwrap();
    let new = SigningKey::generate("2025-02").unwrap();
    let both = KeySet::from_signing_keys(&[old.clone(), new.clone()]).unwrap();
    assert_eq!(both.len(), 2);

    let by_old = old.sign(&Claims::new_service("svc", FIVE_MIN)).unwrap();
    let by_new = new
        .sign(&Claims::new_user(
            "bob",
            Uuid::new_v4(),
            Role::Admin,
            FIVE_MIN,
        ))
        .unwrap();
    assert_eq!(both.verify(&by_old).unwrap().subject, "svc");
    assert_eq!(both.verify(&by_new).unwrap().subject, "bob");

    // Once the old key is retired, its tokens stop verifying.
    let only_new = KeySet::from_signing_keys(std::slice::from_ref(&new)).unwrap();
    assert!(matches!(
        only_new.verify(&by_old),
        Err(AuthError::UnknownKeyId(_))
    ));
    assert!(only_new.verify(&by_new).is_ok());
}

#[test]
fn signing_key_round_trips_through_pkcs8() {
    let key = SigningKey::generate("k1").unwrap();
    let again = SigningKey::from_pkcs8("k1", key.pkcs8_der()).unwrap();
    assert_eq!(again.public_key(), key.public_key());
    let set = KeySet::from_signing_keys(&[key]).unwrap();
    set.verify(&again.sign(&Claims::new_service("svc", FIVE_MIN)).unwrap())
        .unwrap();

    assert!(SigningKey::from_pkcs8("k1", b"not a key").is_err());
    assert!(SigningKey::from_pkcs8("", again.pkcs8_der()).is_err());
    assert!(!format!("{again:?}").contains(&format!("{:?}", again.pkcs8_der())));
}
