//! The claims of an access token as a client reads them: decoded for display and to learn
//! the caller's tenant, never verified here (every service verifies the signature).
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// The claims of a Cairn access token (`sub, tid, role, scopes, exp, iat`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessClaims {
    /// The user or service account.
    pub sub: String,
    /// The tenant of a user; absent for a service principal.
    #[serde(default)]
    pub tid: Option<String>,
    pub role: String,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Expiry, seconds since the Unix epoch.
    pub exp: i64,
    #[serde(default)]
    pub iat: i64,
}

/// The token is not a JWT with Cairn claims.
#[derive(Debug, thiserror::Error)]
#[error("the access token is not a JWT with Cairn claims")]
pub struct NotAccessToken;

impl AccessClaims {
    /// Decodes the payload of `jwt` without checking its signature.
    pub fn decode_unverified(jwt: &str) -> Result<Self, NotAccessToken> {
        let payload = jwt.split('.').nth(1).ok_or(NotAccessToken)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(payload.trim_end_matches('='))
            .map_err(|_| NotAccessToken)?;
        serde_json::from_slice(&bytes).map_err(|_| NotAccessToken)
    }

    /// Holds the `platform:admin` scope.
    pub fn is_platform_admin(&self) -> bool {
        self.scopes.iter().any(|s| s == "platform:admin")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_decoded() {
        let payload = URL_SAFE_NO_PAD.encode(
            r#"{"sub":"u1","tid":"t1","role":"admin","scopes":["platform:admin"],"exp":10,"iat":1,"jti":"j","iss":"cairn-tenancy","aud":"cairn"}"#,
        );
        let c = AccessClaims::decode_unverified(&format!("h.{payload}.s")).unwrap();
        assert_eq!(c.tid.as_deref(), Some("t1"));
        assert!(c.is_platform_admin());
        assert!(AccessClaims::decode_unverified("nope").is_err());
    }
}
