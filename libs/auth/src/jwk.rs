//! The JSON Web Key (Set) format of Cairn's public keys: Ed25519 keys only (RFC 8037 OKP).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::error::AuthError;

/// Length of a raw Ed25519 public key.
pub const ED25519_PUBLIC_KEY_LEN: usize = 32;

/// One public key as published in a JWK Set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicJwk {
    /// Always `"OKP"`.
    pub kty: String,
    /// Always `"Ed25519"`.
    pub crv: String,
    /// Always `"EdDSA"`.
    pub alg: String,
    /// Always `"sig"`.
    #[serde(rename = "use")]
    pub use_: String,
    pub kid: String,
    /// The raw public key, base64url without padding.
    pub x: String,
}

impl PublicJwk {
    /// The JWK of a raw Ed25519 public key.
    pub fn ed25519(kid: impl Into<String>, public_key: &[u8; ED25519_PUBLIC_KEY_LEN]) -> Self {
        PublicJwk {
            kty: "OKP".to_owned(),
            crv: "Ed25519".to_owned(),
            alg: "EdDSA".to_owned(),
            use_: "sig".to_owned(),
            kid: kid.into(),
            x: URL_SAFE_NO_PAD.encode(public_key),
        }
    }
}

/// A JWK Set document: `{"keys": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JwkSet {
    pub keys: Vec<PublicJwk>,
}

/// A key as found in a JWK Set file, before checking it is an Ed25519 public key.
#[derive(Deserialize)]
struct RawJwk {
    kty: String,
    crv: Option<String>,
    kid: Option<String>,
    x: Option<String>,
    alg: Option<String>,
    #[serde(rename = "use")]
    use_: Option<String>,
    /// Present only in private keys, which must never be in the published set.
    d: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct RawJwkSet {
    keys: Vec<RawJwk>,
}

/// A checked key of a JWK Set: its id and raw public key.
pub(crate) struct Ed25519PublicKey {
    pub kid: String,
    pub key: [u8; ED25519_PUBLIC_KEY_LEN],
}

/// Parses a JWK Set and checks that every key is an Ed25519 public signing key with a `kid`.
pub(crate) fn parse_jwk_set(json: &str) -> Result<Vec<Ed25519PublicKey>, AuthError> {
    let set: RawJwkSet = serde_json::from_str(json)
        .map_err(|e| AuthError::InvalidKeySet(format!("not a JWK set: {e}")))?;
    set.keys
        .into_iter()
        .enumerate()
        .map(|(i, raw)| {
            check_key(raw).map_err(|why| AuthError::InvalidKeySet(format!("key #{i}: {why}")))
        })
        .collect()
}

fn check_key(raw: RawJwk) -> Result<Ed25519PublicKey, String> {
    let kid = raw.kid.filter(|k| !k.is_empty()).ok_or("has no kid")?;
    if raw.d.is_some() {
        return Err(format!("{kid:?} is a private key"));
    }
    if raw.kty != "OKP" || raw.crv.as_deref() != Some("Ed25519") {
        return Err(format!(
            "{kid:?} is not an Ed25519 key (kty OKP, crv Ed25519)"
        ));
    }
    if let Some(alg) = raw.alg.as_deref().filter(|alg| *alg != "EdDSA") {
        return Err(format!("{kid:?} has alg {alg:?}, expected EdDSA"));
    }
    if let Some(use_) = raw.use_.as_deref().filter(|u| *u != "sig") {
        return Err(format!("{kid:?} has use {use_:?}, expected sig"));
    }
    let x = raw.x.ok_or_else(|| format!("{kid:?} has no x"))?;
    let bytes = URL_SAFE_NO_PAD
        .decode(x.as_bytes())
        .map_err(|_| format!("{kid:?} has an x that is not base64url"))?;
    let key = <[u8; ED25519_PUBLIC_KEY_LEN]>::try_from(bytes.as_slice())
        .map_err(|_| format!("{kid:?} has an x of {} bytes, expected 32", bytes.len()))?;
    Ok(Ed25519PublicKey { kid, key })
}
