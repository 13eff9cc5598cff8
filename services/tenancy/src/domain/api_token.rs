//! The API token format: `cairn_<token id, 32 hex>_<secret, 43 base64url>`. The secret is
//! 256 random bits, shown once; only its SHA-256 is stored and compared in constant time.
use std::fmt;

use aws_lc_rs::digest;
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use uuid::Uuid;

use super::Invalid;
use super::ids::TokenId;

const PREFIX: &str = "cairn_";
const SECRET_BYTES: usize = 32;

/// A freshly minted token: its id, the full secret string (show once) and its digest.
pub struct NewApiToken {
    pub token_id: TokenId,
    pub secret: ApiTokenSecret,
    pub digest: [u8; 32],
}

/// The full token string; never printed by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiTokenSecret(String);

impl ApiTokenSecret {
    /// The string to hand to the user, once.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiTokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiTokenSecret([redacted])")
    }
}

/// Generation failed (the system random source is unavailable).
#[derive(Debug, Clone, thiserror::Error)]
#[error("the system random source failed")]
pub struct RandomFailed;

/// Mints a new token.
pub fn generate() -> Result<NewApiToken, RandomFailed> {
    let mut secret = [0u8; SECRET_BYTES];
    SystemRandom::new()
        .fill(&mut secret)
        .map_err(|_| RandomFailed)?;
    let token_id = TokenId(Uuid::new_v4());
    let encoded = URL_SAFE_NO_PAD.encode(secret);
    let digest = secret_digest(&encoded);
    Ok(NewApiToken {
        token_id,
        secret: ApiTokenSecret(format!("{PREFIX}{}_{encoded}", token_id.0.simple())),
        digest,
    })
}

/// A token presented by a caller, split into its id and secret part.
pub struct PresentedToken {
    pub token_id: TokenId,
    secret: String,
}

impl fmt::Debug for PresentedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PresentedToken")
            .field("token_id", &self.token_id)
            .finish_non_exhaustive()
    }
}

impl PresentedToken {
    /// Parses the token string; the error says nothing about the token's content.
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let malformed = || Invalid::new("api_token is not a Cairn API token");
        let rest = s.trim().strip_prefix(PREFIX).ok_or_else(malformed)?;
        let (id, secret) = rest.split_once('_').ok_or_else(malformed)?;
        if id.len() != 32 || secret.len() != 43 {
            return Err(malformed());
        }
        let token_id = Uuid::try_parse(id).map_err(|_| malformed())?;
        Ok(PresentedToken {
            token_id: TokenId(token_id),
            secret: secret.to_owned(),
        })
    }

    /// Whether this token's secret matches the stored digest (constant-time comparison).
    pub fn matches(&self, stored_digest: &[u8]) -> bool {
        let digest = secret_digest(&self.secret);
        aws_lc_rs::constant_time::verify_slices_are_equal(&digest, stored_digest).is_ok()
    }
}

fn secret_digest(secret: &str) -> [u8; 32] {
    let d = digest::digest(&digest::SHA256, secret.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_parse_and_match_only_their_digest() {
        let t = generate().unwrap();
        let s = t.secret.expose();
        assert!(s.starts_with("cairn_"));
        let p = PresentedToken::parse(s).unwrap();
        assert_eq!(p.token_id, t.token_id);
        assert!(p.matches(&t.digest));
        let other = generate().unwrap();
        assert!(!p.matches(&other.digest));
        assert!(!format!("{:?}{:?}", t.secret, p).contains(&s[40..]));
    }

    #[test]
    fn tampered_tokens_do_not_match() {
        let t = generate().unwrap();
        let mut s = t.secret.expose().to_owned();
        let last = s.pop().unwrap();
        s.push(if last == 'A' { 'B' } else { 'A' });
        let p = PresentedToken::parse(&s).unwrap();
        assert!(!p.matches(&t.digest));
        for bad in ["", "cairn_", "cairn_x_y", "Bearer abc", &s[1..]] {
            assert!(PresentedToken::parse(bad).is_err(), "{bad}");
        }
    }
}
