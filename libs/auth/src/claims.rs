//! The claims of a Cairn access token and the rules every token's claims must follow.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::AuthError;
use crate::role::Role;

/// The `iss` of every access token: tenancy signs them.
pub const ISSUER: &str = "cairn-tenancy";
/// The `aud` of every access token.
pub const AUDIENCE: &str = "cairn";
/// The longest an access token may live (`exp - iat`).
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Clock skew tolerated when checking `exp` and `iat`.
pub const CLOCK_LEEWAY: Duration = Duration::from_secs(30);

/// The payload of an access token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The user or service account the token speaks for.
    pub sub: String,
    /// The tenant of a user principal, as a UUID string; absent for services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<String>,
    pub role: Role,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Expiry, seconds since the Unix epoch.
    pub exp: i64,
    /// Issue time, seconds since the Unix epoch.
    pub iat: i64,
    /// Unique token id.
    pub jti: String,
    pub iss: String,
    pub aud: String,
}

impl Claims {
    /// Claims for a user of `tenant` with `role`, issued now and valid for `ttl`.
    ///
    /// A `ttl` above [`MAX_TOKEN_LIFETIME`] yields claims that signing and verification refuse.
    pub fn new_user(sub: impl Into<String>, tenant: Uuid, role: Role, ttl: Duration) -> Self {
        Self::issued_now(sub.into(), Some(tenant.to_string()), role, ttl)
    }

    /// Claims for a service account, issued now and valid for `ttl`.
    pub fn new_service(sub: impl Into<String>, ttl: Duration) -> Self {
        Self::issued_now(sub.into(), None, Role::Service, ttl)
    }

    /// Replaces the scopes.
    pub fn with_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    fn issued_now(sub: String, tid: Option<String>, role: Role, ttl: Duration) -> Self {
        let iat = unix_now();
        let ttl_secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
        Claims {
            sub,
            tid,
            role,
            scopes: Vec::new(),
            exp: iat.saturating_add(ttl_secs),
            iat,
            jti: Uuid::new_v4().to_string(),
            iss: ISSUER.to_owned(),
            aud: AUDIENCE.to_owned(),
        }
    }

    /// Checks the rules that do not depend on the current time: issuer, audience, lifetime,
    /// and that users carry a tenant while services do not. Returns the parsed tenant.
    pub(crate) fn check_shape(&self) -> Result<Option<Uuid>, AuthError> {
        if self.iss != ISSUER {
            return Err(AuthError::WrongIssuer);
        }
        if self.aud != AUDIENCE {
            return Err(AuthError::WrongAudience);
        }
        let lifetime = self.exp.saturating_sub(self.iat);
        if lifetime <= 0 {
            return Err(AuthError::InvalidClaims("exp is not after iat".into()));
        }
        if lifetime > secs(MAX_TOKEN_LIFETIME) {
            return Err(AuthError::LifetimeTooLong {
                seconds: lifetime,
                max_seconds: secs(MAX_TOKEN_LIFETIME),
            });
        }
        if self.sub.is_empty() {
            return Err(AuthError::InvalidClaims("sub is empty".into()));
        }
        if self.jti.is_empty() {
            return Err(AuthError::InvalidClaims("jti is empty".into()));
        }
        match (self.role, self.tid.as_deref()) {
            (Role::Service, None) => Ok(None),
            (Role::Service, Some(_)) => Err(AuthError::InvalidClaims(
                "a service token must not carry a tenant".into(),
            )),
            (
                Role::Viewer | Role::Operator | Role::Approver | Role::Admin | Role::Owner,
                Some(tid),
            ) => Uuid::parse_str(tid)
                .map(Some)
                .map_err(|_| AuthError::InvalidClaims("tid is not a UUID".into())),
            (Role::Viewer | Role::Operator | Role::Approver | Role::Admin | Role::Owner, None) => {
                Err(AuthError::InvalidClaims(
                    "a user token must carry a tenant".into(),
                ))
            }
        }
    }

    /// Checks the time rules at `now`: not expired (beyond [`CLOCK_LEEWAY`]) and not issued
    /// in the future (beyond [`CLOCK_LEEWAY`]).
    pub(crate) fn check_time(&self, now: i64) -> Result<(), AuthError> {
        let leeway = secs(CLOCK_LEEWAY);
        if self.exp.saturating_add(leeway) < now {
            return Err(AuthError::Expired);
        }
        if self.iat.saturating_sub(leeway) > now {
            return Err(AuthError::IssuedInFuture);
        }
        Ok(())
    }
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).expect("the constant durations fit in i64")
}

/// Seconds since the Unix epoch; 0 if the clock reads earlier than the epoch.
pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
