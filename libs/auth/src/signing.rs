//! Ed25519 signing keys that mint access tokens (used by tenancy and by tests).

use std::fmt;

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use jsonwebtoken::{Algorithm, EncodingKey, Header};

use crate::claims::Claims;
use crate::error::AuthError;
use crate::jwk::{ED25519_PUBLIC_KEY_LEN, JwkSet, PublicJwk};

/// An Ed25519 private key with its key id.
#[derive(Clone)]
pub struct SigningKey {
    kid: String,
    /// Holds the PKCS#8 document; zeroized on drop by jsonwebtoken.
    encoding: EncodingKey,
    public: [u8; ED25519_PUBLIC_KEY_LEN],
}

impl SigningKey {
    /// Generates a fresh key named `kid`.
    pub fn generate(kid: impl Into<String>) -> Result<Self, AuthError> {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| AuthError::KeyGeneration)?;
        Self::from_pkcs8(kid, pkcs8.as_ref())
    }

    /// Loads a key from an unencrypted PKCS#8 (v1 or v2) Ed25519 private key document.
    pub fn from_pkcs8(kid: impl Into<String>, pkcs8_der: &[u8]) -> Result<Self, AuthError> {
        let kid = kid.into();
        if kid.is_empty() {
            return Err(AuthError::InvalidSigningKey("kid is empty".into()));
        }
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8_der)
            .map_err(|e| AuthError::InvalidSigningKey(format!("not an Ed25519 PKCS#8 key: {e}")))?;
        let public = <[u8; ED25519_PUBLIC_KEY_LEN]>::try_from(pair.public_key().as_ref())
            .map_err(|_| AuthError::InvalidSigningKey("public key is not 32 bytes".into()))?;
        Ok(SigningKey {
            kid,
            encoding: EncodingKey::from_ed_der(pkcs8_der),
            public,
        })
    }

    /// The key id put into the `kid` header of every token this key signs.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The private key as a PKCS#8 document, for storing it. Treat as a secret.
    pub fn pkcs8_der(&self) -> &[u8] {
        self.encoding.as_bytes()
    }

    /// The raw 32-byte public key.
    pub fn public_key(&self) -> &[u8; ED25519_PUBLIC_KEY_LEN] {
        &self.public
    }

    /// The public key as a JWK.
    pub fn public_jwk(&self) -> PublicJwk {
        PublicJwk::ed25519(self.kid.clone(), &self.public)
    }

    /// Signs `claims` as an EdDSA JWT with this key's `kid`.
    ///
    /// Refuses claims that verification would refuse regardless of the time: wrong issuer
    /// or audience, a lifetime above 15 minutes, or a tenant that does not fit the role.
    pub fn sign(&self, claims: &Claims) -> Result<String, AuthError> {
        claims.check_shape()?;
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).map_err(AuthError::Signing)
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .field("pkcs8", &"[redacted]")
            .finish()
    }
}

/// The JWK Set (JSON) publishing the public halves of `keys`.
pub fn jwks_json(keys: &[SigningKey]) -> String {
    let set = JwkSet {
        keys: keys.iter().map(SigningKey::public_jwk).collect(),
    };
    serde_json::to_string_pretty(&set).expect("a JWK set of plain strings serializes")
}
