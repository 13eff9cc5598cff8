//! Errors of token verification, authorization checks, key sets and signing.

use std::path::PathBuf;

use crate::role::Role;

/// Everything that can go wrong in this crate. Token problems map to UNAUTHENTICATED,
/// role checks to PERMISSION_DENIED, another tenant's caller to NOT_FOUND and key
/// handling to INTERNAL (see the `From<AuthError> for tonic::Status` impl).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    // The request carries no usable token.
    #[error("missing bearer token")]
    MissingToken,
    #[error("authorization header is not `Bearer <token>`")]
    MalformedAuthorization,

    // The token is refused.
    #[error("malformed token: {0}")]
    MalformedToken(String),
    #[error("token algorithm {0:?} is not accepted (only EdDSA)")]
    UnsupportedAlgorithm(String),
    #[error("token header has no kid")]
    MissingKeyId,
    #[error("token signed with unknown key {0:?}")]
    UnknownKeyId(String),
    #[error("token signature is invalid")]
    BadSignature,
    #[error("token expired")]
    Expired,
    #[error("token issued in the future")]
    IssuedInFuture,
    #[error("token has the wrong issuer")]
    WrongIssuer,
    #[error("token has the wrong audience")]
    WrongAudience,
    #[error("token lifetime of {seconds}s exceeds {max_seconds}s")]
    LifetimeTooLong { seconds: i64, max_seconds: i64 },
    #[error("invalid token claims: {0}")]
    InvalidClaims(String),
    #[error("token rejected")]
    Rejected(#[source] jsonwebtoken::errors::Error),

    // The caller is known but may not do this.
    #[error("requires role {required}, caller has {actual}")]
    InsufficientRole { required: Role, actual: Role },
    #[error("only services may call this")]
    ServiceRequired,
    /// A user of another tenant; reported as not found so nothing leaks.
    #[error("not found")]
    OtherTenant,

    // Key handling (configuration and signing).
    #[error("invalid JWK set: {0}")]
    InvalidKeySet(String),
    #[error("read JWK set {}", path.display())]
    ReadKeySet {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("generate Ed25519 key")]
    KeyGeneration,
    #[error("invalid signing key: {0}")]
    InvalidSigningKey(String),
    #[error("sign token")]
    Signing(#[source] jsonwebtoken::errors::Error),
}

/// What an authentication or authorization failure means to a caller; each service maps it
/// once onto its own error type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// No valid credentials.
    Unauthenticated,
    /// Authenticated, but not allowed.
    PermissionDenied,
    /// Another tenant's object: reported as missing.
    NotFound,
    /// The service's own key material is broken.
    Internal,
}

impl AuthError {
    pub fn denial(&self) -> Denial {
        match self {
            AuthError::MissingToken
            | AuthError::MalformedAuthorization
            | AuthError::MalformedToken(_)
            | AuthError::UnsupportedAlgorithm(_)
            | AuthError::MissingKeyId
            | AuthError::UnknownKeyId(_)
            | AuthError::BadSignature
            | AuthError::Expired
            | AuthError::IssuedInFuture
            | AuthError::WrongIssuer
            | AuthError::WrongAudience
            | AuthError::LifetimeTooLong { .. }
            | AuthError::InvalidClaims(_)
            | AuthError::Rejected(_) => Denial::Unauthenticated,
            AuthError::InsufficientRole { .. } | AuthError::ServiceRequired => {
                Denial::PermissionDenied
            }
            AuthError::OtherTenant => Denial::NotFound,
            AuthError::InvalidKeySet(_)
            | AuthError::ReadKeySet { .. }
            | AuthError::KeyGeneration
            | AuthError::InvalidSigningKey(_)
            | AuthError::Signing(_) => Denial::Internal,
        }
    }
}

impl From<AuthError> for tonic::Status {
    fn from(err: AuthError) -> Self {
        let message = err.to_string();
        match err.denial() {
            Denial::Unauthenticated => tonic::Status::unauthenticated(message),
            Denial::PermissionDenied => tonic::Status::permission_denied(message),
            Denial::NotFound => tonic::Status::not_found(message),
            Denial::Internal => tonic::Status::internal(message),
        }
    }
}
