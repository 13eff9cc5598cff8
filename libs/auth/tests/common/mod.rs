//! Shared helpers for the auth tests: clocks, claims and hand-crafted tokens.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::signature::Ed25519KeyPair;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use cairn_auth::{AUDIENCE, ISSUER, SigningKey};
use serde_json::{Value, json};
use uuid::Uuid;

pub const FIVE_MIN: Duration = Duration::from_secs(300);

pub fn now() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Valid user claims as JSON, to be altered by a test before signing with [`sign_raw`].
pub fn user_claims_json(tenant: Uuid) -> Value {
    let iat = now();
    json!({
        "sub": "user-1",
        "tid": tenant.to_string(),
        "role": "operator",
        "scopes": ["states:write"],
        "iat": iat,
        "exp": iat + 300,
        "jti": Uuid::new_v4().to_string(),
        "iss": ISSUER,
        "aud": AUDIENCE,
    })
}

/// The EdDSA header this crate would write for `key`.
pub fn eddsa_header(key: &SigningKey) -> Value {
    json!({ "alg": "EdDSA", "typ": "JWT", "kid": key.kid() })
}

/// Signs arbitrary header and claims JSON with `key`'s Ed25519 private key, bypassing every
/// check of `SigningKey::sign`.
pub fn sign_raw(key: &SigningKey, header: &Value, claims: &Value) -> String {
    let message = format!(
        "{}.{}",
        b64(&serde_json::to_vec(header).unwrap()),
        b64(&serde_json::to_vec(claims).unwrap())
    );
    let pair = Ed25519KeyPair::from_pkcs8(key.pkcs8_der()).unwrap();
    let signature = pair.sign(message.as_bytes());
    format!("{message}.{}", b64(signature.as_ref()))
}
