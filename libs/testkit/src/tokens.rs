//! A signing key per test, its JWK Set on disk for the services under test, and access
//! tokens minted with it (valid, expired, forged).
use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_auth::{Claims, KeySet, Role, SigningKey, jwks_json};
use uuid::Uuid;

use crate::temp::{TempDir, temp_dir};

/// Lifetime of the valid tokens minted here (well under the 15-minute maximum).
pub const TOKEN_TTL: Duration = Duration::from_secs(5 * 60);
/// Subject of [`TestKeys::user_token`].
pub const TEST_USER: &str = "test-user";
/// Subject of [`TestKeys::service_token`].
pub const TEST_SERVICE: &str = "test-service";

/// An Ed25519 key whose public half is published in `jwks_path()`; the directory holding the
/// file is removed when this is dropped.
#[derive(Debug)]
pub struct TestKeys {
    key: SigningKey,
    jwks_path: PathBuf,
    _dir: TempDir,
}

impl TestKeys {
    /// Generates a key with a random `kid` and writes its JWK Set file.
    pub fn new() -> TestKeys {
        let key = generate_key();
        let dir = temp_dir();
        let jwks_path = dir.path().join("jwks.json");
        if let Err(err) = std::fs::write(&jwks_path, jwks_json(std::slice::from_ref(&key))) {
            panic!("write {}: {err}", jwks_path.display());
        }
        TestKeys {
            key,
            jwks_path,
            _dir: dir,
        }
    }

    /// The JWK Set file to configure services with.
    pub fn jwks_path(&self) -> &Path {
        &self.jwks_path
    }

    /// The key set a service would load from [`Self::jwks_path`].
    pub fn key_set(&self) -> KeySet {
        match KeySet::load(&self.jwks_path) {
            Ok(set) => set,
            Err(err) => panic!("load {}: {err}", self.jwks_path.display()),
        }
    }

    pub fn signing_key(&self) -> &SigningKey {
        &self.key
    }

    /// Signs arbitrary claims; panics if the auth crate refuses them.
    pub fn sign(&self, claims: &Claims) -> String {
        sign_with(&self.key, claims)
    }

    /// A valid token of user [`TEST_USER`] in `tenant` with `role` (a user role).
    pub fn user_token(&self, tenant: Uuid, role: Role) -> String {
        self.user_token_as(TEST_USER, tenant, role)
    }

    /// A valid token of user `sub` in `tenant` with `role` (a user role).
    pub fn user_token_as(&self, sub: &str, tenant: Uuid, role: Role) -> String {
        self.sign(&Claims::new_user(sub, tenant, role, TOKEN_TTL))
    }

    /// A valid token of service account [`TEST_SERVICE`].
    pub fn service_token(&self) -> String {
        self.service_token_as(TEST_SERVICE)
    }

    /// A valid token of service account `sub`.
    pub fn service_token_as(&self, sub: &str) -> String {
        self.sign(&Claims::new_service(sub, TOKEN_TTL))
    }

    /// A user token signed by this key that expired an hour ago.
    pub fn expired_token(&self, tenant: Uuid, role: Role) -> String {
        self.sign(&expired(Claims::new_user(
            TEST_USER, tenant, role, TOKEN_TTL,
        )))
    }

    /// A service token signed by this key that expired an hour ago.
    pub fn expired_service_token(&self) -> String {
        self.sign(&expired(Claims::new_service(TEST_SERVICE, TOKEN_TTL)))
    }

    /// A user token carrying this key's `kid` but signed by another key: its signature does
    /// not verify.
    pub fn forged_token(&self, tenant: Uuid, role: Role) -> String {
        let other = generate_key_named(self.key.kid());
        sign_with(
            &other,
            &Claims::new_user(TEST_USER, tenant, role, TOKEN_TTL),
        )
    }

    /// A user token signed by a key whose `kid` is not in the JWK Set.
    pub fn unknown_key_token(&self, tenant: Uuid, role: Role) -> String {
        sign_with(
            &generate_key(),
            &Claims::new_user(TEST_USER, tenant, role, TOKEN_TTL),
        )
    }
}

impl Default for TestKeys {
    fn default() -> Self {
        TestKeys::new()
    }
}

fn generate_key() -> SigningKey {
    let id = Uuid::new_v4().simple().to_string();
    generate_key_named(&format!("test-{}", &id[..12]))
}

fn generate_key_named(kid: &str) -> SigningKey {
    match SigningKey::generate(kid) {
        Ok(key) => key,
        Err(err) => panic!("generate an Ed25519 key: {err}"),
    }
}

fn sign_with(key: &SigningKey, claims: &Claims) -> String {
    match key.sign(claims) {
        Ok(token) => token,
        Err(err) => panic!("sign test token for role {}: {err}", claims.role),
    }
}

/// The same claims moved an hour into the past (lifetime kept).
fn expired(mut claims: Claims) -> Claims {
    const HOUR: i64 = 3600;
    claims.iat -= HOUR;
    claims.exp -= HOUR;
    claims
}
