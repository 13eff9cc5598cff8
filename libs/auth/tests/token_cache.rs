//! The verified-token cache of a key set: a cached token is answered exactly as the cold
//! path would answer it, and an expired, tampered or re-keyed token is never served from it.
#![allow(clippy::unwrap_used)]

mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use cairn_auth::{
    AuthError, AuthLayer, Claims, DEFAULT_TOKEN_CACHE_CAPACITY, KeySet, Principal, Role, SigningKey,
};
use common::{FIVE_MIN, now};
use tower::{Layer, ServiceExt};
use uuid::Uuid;

fn key_and_set() -> (SigningKey, KeySet) {
    let key = SigningKey::generate("k1").unwrap();
    let set = KeySet::from_signing_keys(std::slice::from_ref(&key)).unwrap();
    (key, set)
}

fn user_token(key: &SigningKey) -> String {
    let claims = Claims::new_user("alice", Uuid::new_v4(), Role::Approver, FIVE_MIN)
        .with_scopes(["states:read"]);
    key.sign(&claims).unwrap()
}

/// `token` with the character at `index` replaced by another base64url character.
fn change_char(token: &str, index: usize) -> String {
    let mut bytes = token.as_bytes().to_vec();
    bytes[index] = if bytes[index] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).unwrap()
}

#[test]
fn a_cached_token_yields_the_same_principal_and_claims_as_the_cold_path() {
    let (key, cached) = key_and_set();
    let uncached = KeySet::from_signing_keys(std::slice::from_ref(&key))
        .unwrap()
        .with_token_cache(0);
    let claims = Claims::new_user("alice", Uuid::new_v4(), Role::Approver, FIVE_MIN)
        .with_scopes(["states:read", "deployments:approve"]);
    let token = key.sign(&claims).unwrap();

    let cold = uncached.verify(&token).unwrap();
    assert_eq!(cached.cached_tokens(), 0);
    let first = cached.verify(&token).unwrap();
    assert_eq!(cached.cached_tokens(), 1, "caching is on by default");
    let second = cached.verify(&token).unwrap();
    assert_eq!(first, cold);
    assert_eq!(second, cold);
    assert_eq!(cached.verify_claims(&token).unwrap(), claims);
    assert_eq!(cached.cached_tokens(), 1);
    assert_eq!(uncached.cached_tokens(), 0, "capacity 0 caches nothing");
    assert_eq!(cached.token_cache_capacity(), DEFAULT_TOKEN_CACHE_CAPACITY);
    assert_eq!(uncached.token_cache_capacity(), 0);

    let service = key.sign(&Claims::new_service("svc", FIVE_MIN)).unwrap();
    let cold = uncached.verify(&service).unwrap();
    cached.verify(&service).unwrap();
    assert_eq!(cached.verify(&service).unwrap(), cold);
    assert_eq!(cached.cached_tokens(), 2);
}

#[tokio::test]
async fn a_cached_token_is_refused_once_it_expires() {
    let (key, set) = key_and_set();
    // Accepted now only thanks to the 30 s leeway, and for two seconds more.
    let mut claims = Claims::new_user("alice", Uuid::new_v4(), Role::Viewer, FIVE_MIN);
    claims.iat = now() - 300;
    claims.exp = now() - 28;
    let token = key.sign(&claims).unwrap();
    set.verify(&token).unwrap();
    assert_eq!(set.cached_tokens(), 1);

    // Wait until the leeway has passed, then ask again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while now() <= claims.exp + 30 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the clock stands still"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let err = set.verify(&token).unwrap_err();
    assert!(matches!(err, AuthError::Expired), "{err:?}");
    let err = set.verify_claims(&token).unwrap_err();
    assert!(matches!(err, AuthError::Expired), "{err:?}");
    assert_eq!(set.cached_tokens(), 0, "the expired entry was kept");
}

#[test]
fn a_tampered_token_is_refused_while_the_original_is_cached() {
    let (key, set) = key_and_set();
    let token = user_token(&key);
    let original = set.verify(&token).unwrap();
    assert_eq!(set.cached_tokens(), 1);

    let header_end = token.find('.').unwrap();
    let signature_start = token.rfind('.').unwrap() + 1;
    let in_payload = change_char(&token, (header_end + signature_start) / 2);
    let in_signature = change_char(&token, signature_start + 10);
    for tampered in [&in_payload, &in_signature] {
        assert_ne!(tampered, &token);
        let err = set.verify(tampered).unwrap_err();
        assert!(matches!(err, AuthError::BadSignature), "{err:?}");
        let err = set.verify_claims(tampered).unwrap_err();
        assert!(matches!(err, AuthError::BadSignature), "{err:?}");
    }
    // A few bytes appended or removed are different tokens too.
    assert!(set.verify(&format!("{token}A")).is_err());
    assert!(set.verify(&token[..token.len() - 1]).is_err());

    assert_eq!(set.verify(&token).unwrap(), original);
    assert_eq!(set.cached_tokens(), 1, "a refused token was cached");
}

#[test]
fn a_cached_token_is_refused_by_a_key_set_without_its_key() {
    let (key, set) = key_and_set();
    let token = user_token(&key);
    set.verify(&token).unwrap();
    assert_eq!(set.cached_tokens(), 1);

    // Rotated: only a new key is trusted.
    let rotated = KeySet::from_signing_keys(&[SigningKey::generate("k2").unwrap()]).unwrap();
    let err = rotated.verify(&token).unwrap_err();
    assert!(
        matches!(err, AuthError::UnknownKeyId(ref kid) if kid == "k1"),
        "{err:?}"
    );

    // Re-keyed under the same kid: the old key's signature no longer verifies.
    let same_kid = KeySet::from_signing_keys(&[SigningKey::generate("k1").unwrap()]).unwrap();
    let err = same_kid.verify(&token).unwrap_err();
    assert!(matches!(err, AuthError::BadSignature), "{err:?}");
    assert_eq!(rotated.cached_tokens() + same_kid.cached_tokens(), 0);

    // Through the layer: the server with the new set answers UNAUTHENTICATED.
    let bearer = format!("Bearer {token}");
    assert_eq!(call(Arc::new(set), &bearer), Ok("alice".to_owned()));
    assert_eq!(
        call(Arc::new(same_kid), &bearer),
        Err(tonic::Code::Unauthenticated)
    );
    assert_eq!(
        call(Arc::new(rotated), &bearer),
        Err(tonic::Code::Unauthenticated)
    );
}

/// One request through an [`AuthLayer`] over `keys`: the subject the inner service saw, or
/// the gRPC status the layer answered with.
fn call(keys: Arc<KeySet>, authorization: &str) -> Result<String, tonic::Code> {
    let inner = tower::service_fn(|req: http::Request<()>| async move {
        let subject = req
            .extensions()
            .get::<Principal>()
            .map(|p| p.subject.clone())
            .unwrap_or_default();
        Ok::<_, Infallible>(http::Response::new(subject))
    });
    let mut req = http::Request::new(());
    req.headers_mut()
        .insert(http::header::AUTHORIZATION, authorization.parse().unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let response = rt
        .block_on(AuthLayer::new(keys).layer(inner).oneshot(req))
        .unwrap();
    match response.headers().get("grpc-status") {
        None => Ok(response.into_body()),
        Some(status) => Err(tonic::Code::from_bytes(status.as_bytes())),
    }
}

#[test]
fn the_layer_serves_a_repeated_token_and_refuses_a_tampered_one() {
    let (key, set) = key_and_set();
    let keys = Arc::new(set);
    let token = user_token(&key);
    let bearer = format!("Bearer {token}");
    for _ in 0..3 {
        assert_eq!(call(Arc::clone(&keys), &bearer), Ok("alice".to_owned()));
    }
    assert_eq!(keys.cached_tokens(), 1);
    let signature_start = token.rfind('.').unwrap() + 1;
    let tampered = format!("Bearer {}", change_char(&token, signature_start + 3));
    assert_eq!(
        call(Arc::clone(&keys), &tampered),
        Err(tonic::Code::Unauthenticated)
    );
    assert_eq!(call(keys, &bearer), Ok("alice".to_owned()));
}

#[test]
fn the_cache_holds_at_most_its_capacity() {
    let key = SigningKey::generate("k1").unwrap();
    let set = KeySet::from_signing_keys(std::slice::from_ref(&key))
        .unwrap()
        .with_token_cache(50);
    let tokens: Vec<String> = (0..200).map(|_| user_token(&key)).collect();
    for (i, token) in tokens.iter().enumerate() {
        set.verify(token).unwrap();
        assert!(
            set.cached_tokens() <= 50,
            "{} after {i}",
            set.cached_tokens()
        );
    }
    assert!(set.cached_tokens() > 0);
    // Evicted tokens still verify (on the cold path), and the bound still holds.
    for token in &tokens {
        set.verify(token).unwrap();
    }
    assert!(set.cached_tokens() <= 50);
    assert!(set.token_cache_capacity() <= 50);
}

#[test]
fn concurrent_callers_share_the_cache_within_its_bound() {
    let key = SigningKey::generate("k1").unwrap();
    let set = KeySet::from_signing_keys(std::slice::from_ref(&key))
        .unwrap()
        .with_token_cache(64);
    let shared = user_token(&key);
    let expected = set.verify(&shared).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..50 {
                    let own = user_token(&key);
                    assert_eq!(set.verify(&own).unwrap().subject, "alice");
                    assert_eq!(set.verify(&shared).unwrap(), expected);
                    assert!(set.cached_tokens() <= 64);
                }
            });
        }
    });
    assert!(set.cached_tokens() <= 64);
}
