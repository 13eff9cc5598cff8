//! The set of public keys a service trusts, and verification of access tokens against it.
//!
//! Each set keeps its own [`VerifiedCache`]: a token verified once is answered from memory
//! until it expires. A set's keys never change after it is built, so a cached token's key is
//! in the set for the cache's whole life; a different set (a service restarted with a
//! rotated JWKS, a test building a second set) starts with an empty cache.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::claims::{AUDIENCE, CLOCK_LEEWAY, Claims, ISSUER, unix_now};
use crate::error::AuthError;
use crate::jwk::parse_jwk_set;
use crate::principal::Principal;
use crate::signing::{SigningKey, jwks_json};
use crate::verified_cache::{
    DEFAULT_TOKEN_CACHE_CAPACITY, TokenDigest, VerifiedCache, VerifiedToken,
};

/// The Ed25519 public keys that may sign access tokens, by `kid`. Holds several keys
/// during a rotation.
///
/// Remembers up to [`DEFAULT_TOKEN_CACHE_CAPACITY`] tokens it has verified (see
/// [`KeySet::with_token_cache`]), so that verifying the same token again costs a SHA-256
/// and a map lookup instead of an Ed25519 check.
pub struct KeySet {
    keys: HashMap<String, DecodingKey>,
    validation: Validation,
    cache: VerifiedCache,
}

/// The part of a JWT header read before choosing a key.
#[derive(Deserialize)]
struct PeekHeader {
    alg: String,
    kid: Option<String>,
}

impl KeySet {
    /// Parses a JWK Set of Ed25519 public keys. Refuses an empty set, duplicate `kid`s,
    /// keys of other types and private keys.
    pub fn from_jwks_json(json: &str) -> Result<Self, AuthError> {
        let parsed = parse_jwk_set(json)?;
        if parsed.is_empty() {
            return Err(AuthError::InvalidKeySet("the set has no keys".into()));
        }
        let mut keys = HashMap::with_capacity(parsed.len());
        for key in parsed {
            let decoding = DecodingKey::from_ed_components(&URL_SAFE_NO_PAD.encode(key.key))
                .map_err(|e| AuthError::InvalidKeySet(format!("key {:?}: {e}", key.kid)))?;
            if keys.insert(key.kid.clone(), decoding).is_some() {
                return Err(AuthError::InvalidKeySet(format!(
                    "kid {:?} appears twice",
                    key.kid
                )));
            }
        }
        Ok(KeySet {
            keys,
            validation: validation(),
            cache: VerifiedCache::new(DEFAULT_TOKEN_CACHE_CAPACITY),
        })
    }

    /// Reads a JWK Set file (`CAIRN_JWT_PUBLIC_KEYS_FILE`).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, AuthError> {
        let path = path.as_ref();
        let json = std::fs::read_to_string(path).map_err(|source| AuthError::ReadKeySet {
            path: path.to_owned(),
            source,
        })?;
        Self::from_jwks_json(&json)
    }

    /// The key set publishing the public halves of `keys` (handy in tests).
    pub fn from_signing_keys(keys: &[SigningKey]) -> Result<Self, AuthError> {
        Self::from_jwks_json(&jwks_json(keys))
    }

    /// Replaces the verified-token cache with an empty one holding at most `capacity`
    /// tokens; 0 turns caching off, so every verification runs the full check.
    pub fn with_token_cache(mut self, capacity: usize) -> Self {
        self.cache = VerifiedCache::new(capacity);
        self
    }

    /// How many verified tokens the set remembers now (expired ones not yet dropped
    /// included); never more than the capacity given to [`KeySet::with_token_cache`].
    pub fn cached_tokens(&self) -> usize {
        self.cache.len()
    }

    /// The most verified tokens the set remembers at once (0: caching is off); at most the
    /// capacity asked for, rounded down to a multiple of the cache's shard count.
    pub fn token_cache_capacity(&self) -> usize {
        self.cache.capacity()
    }

    /// The key ids in the set, in no particular order.
    pub fn kids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    pub fn contains(&self, kid: &str) -> bool {
        self.keys.contains_key(kid)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Verifies an access token and returns its claims.
    ///
    /// Accepts only EdDSA tokens whose `kid` names a key of the set, signed by that key,
    /// with `iss` [`ISSUER`], `aud` [`AUDIENCE`], not expired and not issued in the future
    /// (30 s leeway each), living at most 15 minutes, with a tenant exactly when the role
    /// is a user role.
    ///
    /// A token this set accepted before is answered from its cache (the same claims) as long
    /// as those time rules still hold; any other token runs the full check.
    pub fn verify_claims(&self, token: &str) -> Result<Claims, AuthError> {
        self.verify_at(token, unix_now(), |v| v.claims().clone())
    }

    /// Verifies an access token and returns the principal it speaks for; the same rules
    /// and cache as [`KeySet::verify_claims`].
    pub fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        self.verify_at(token, unix_now(), VerifiedToken::principal)
    }

    /// Verification at `now` (Unix seconds): from the cache if it holds the token's exact
    /// bytes with the time rules met at `now` and its key still in the set, else the full
    /// check, whose success is then cached.
    pub(crate) fn verify_at<R>(
        &self,
        token: &str,
        now: i64,
        read: impl Fn(&VerifiedToken) -> R,
    ) -> Result<R, AuthError> {
        let digest = self.cache.is_enabled().then(|| TokenDigest::of(token));
        if let Some(digest) = &digest
            && let Some(hit) = self.cache.get(digest, now, |kid| self.contains(kid), &read)
        {
            return Ok(hit);
        }
        let verified = self.verify_uncached(token, now)?;
        let answer = read(&verified);
        if let Some(digest) = digest {
            self.cache.insert(digest, verified, now);
        }
        Ok(answer)
    }

    /// The full check: header, signature, claims' shape and time.
    fn verify_uncached(&self, token: &str, now: i64) -> Result<VerifiedToken, AuthError> {
        let header = peek_header(token)?;
        if header.alg != "EdDSA" {
            return Err(AuthError::UnsupportedAlgorithm(header.alg));
        }
        let kid = header.kid.ok_or(AuthError::MissingKeyId)?;
        let Some(key) = self.keys.get(&kid) else {
            return Err(AuthError::UnknownKeyId(kid));
        };
        let data =
            jsonwebtoken::decode::<Claims>(token, key, &self.validation).map_err(map_jwt_error)?;
        let claims = data.claims;
        let tenant_id = claims.check_shape()?;
        claims.check_time(now)?;
        Ok(VerifiedToken::new(claims, tenant_id, kid))
    }

    #[cfg(test)]
    pub(crate) fn cache(&self) -> &VerifiedCache {
        &self.cache
    }
}

impl fmt::Debug for KeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kids: Vec<&str> = self.kids().collect();
        kids.sort_unstable();
        f.debug_struct("KeySet").field("kids", &kids).finish()
    }
}

fn validation() -> Validation {
    let mut v = Validation::new(Algorithm::EdDSA);
    v.leeway = CLOCK_LEEWAY.as_secs();
    v.validate_exp = true;
    v.validate_nbf = false;
    v.validate_aud = true;
    v.set_issuer(&[ISSUER]);
    v.set_audience(&[AUDIENCE]);
    v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    v
}

fn peek_header(token: &str) -> Result<PeekHeader, AuthError> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::MalformedToken(
            "not three dot-separated parts".into(),
        ));
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| AuthError::MalformedToken("header is not base64url".into()))?;
    serde_json::from_slice(&bytes)
        .map_err(|_| AuthError::MalformedToken("header is not a JWT header".into()))
}

fn map_jwt_error(err: jsonwebtoken::errors::Error) -> AuthError {
    // `ErrorKind` is non-exhaustive, so a catch-all arm is required here.
    match err.kind() {
        ErrorKind::InvalidSignature => AuthError::BadSignature,
        ErrorKind::ExpiredSignature => AuthError::Expired,
        ErrorKind::InvalidIssuer => AuthError::WrongIssuer,
        ErrorKind::InvalidAudience => AuthError::WrongAudience,
        ErrorKind::InvalidAlgorithm => AuthError::UnsupportedAlgorithm("mismatch".into()),
        ErrorKind::MissingRequiredClaim(claim) => {
            AuthError::InvalidClaims(format!("missing claim {claim}"))
        }
        ErrorKind::InvalidClaimFormat(claim) => {
            AuthError::InvalidClaims(format!("malformed claim {claim}"))
        }
        ErrorKind::Json(_) => {
            AuthError::InvalidClaims("header or claims do not match the schema".into())
        }
        ErrorKind::InvalidToken | ErrorKind::Base64(_) | ErrorKind::Utf8(_) => {
            AuthError::MalformedToken("not a well-formed JWT".into())
        }
        _ => AuthError::Rejected(err),
    }
}
