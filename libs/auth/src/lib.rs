//! Authentication and authorization for Cairn services.
//!
//! Tenancy signs short-lived EdDSA access tokens ([`SigningKey`], [`Claims`]); every service
//! verifies them against a JWK Set ([`KeySet`]) in one tower layer ([`AuthLayer`]) that puts
//! the caller's [`Principal`] into the request, where handlers read it with [`principal`] and
//! check it with [`Principal::require_role`], [`Principal::require_tenant`] and friends.
//! Each key set remembers the tokens it verified (`verified_cache`), so a caller that sends
//! the same token on every request pays for the Ed25519 check once per token.

mod claims;
mod error;
mod jwk;
mod keyset;
mod layer;
mod principal;
mod role;
mod signing;
mod verified_cache;

pub use claims::{AUDIENCE, CLOCK_LEEWAY, Claims, ISSUER, MAX_TOKEN_LIFETIME};
pub use error::{AuthError, Denial};
pub use jwk::{ED25519_PUBLIC_KEY_LEN, JwkSet, PublicJwk};
pub use keyset::KeySet;
pub use layer::{AuthFuture, AuthLayer, AuthService, authenticate, principal};
pub use principal::{PLATFORM_ADMIN_SCOPE, Principal};
pub use role::{Role, UnknownRole};
pub use signing::{SigningKey, jwks_json};
pub use verified_cache::DEFAULT_TOKEN_CACHE_CAPACITY;
