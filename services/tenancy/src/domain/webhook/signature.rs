//! The subscription secret (256 random bits, `whsec_<base64url>`, shown once) and the
//! `Cairn-Signature` header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, keyed
//! with the secret string's UTF-8 bytes. A fresh `t` is signed on every attempt so receivers
//! can reject old timestamps.
use std::fmt;

use aws_lc_rs::hmac;
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::domain::api_token::RandomFailed;

/// The header carrying the signature.
pub const HEADER: &str = "Cairn-Signature";

const PREFIX: &str = "whsec_";
const SECRET_BYTES: usize = 32;

/// A subscription's signing secret; never printed by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    /// A new random secret.
    pub fn generate() -> Result<Self, RandomFailed> {
        let mut bytes = [0u8; SECRET_BYTES];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| RandomFailed)?;
        Ok(WebhookSecret(format!(
            "{PREFIX}{}",
            URL_SAFE_NO_PAD.encode(bytes)
        )))
    }

    /// A stored secret.
    pub fn from_stored(s: String) -> Self {
        WebhookSecret(s)
    }

    /// The string to hand to the subscriber once, and to store.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The `Cairn-Signature` value for `body` sent at `unix_seconds`.
    pub fn sign(&self, unix_seconds: i64, body: &[u8]) -> String {
        let key = hmac::Key::new(hmac::HMAC_SHA256, self.0.as_bytes());
        let mut ctx = hmac::Context::with_key(&key);
        ctx.update(unix_seconds.to_string().as_bytes());
        ctx.update(b".");
        ctx.update(body);
        format!("t={unix_seconds},v1={}", hex::encode(ctx.sign().as_ref()))
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_an_independent_hmac() {
        // python3: hmac.new(b'whsec_test', b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
        let s = WebhookSecret::from_stored("whsec_test".into());
        assert_eq!(
            s.sign(1_700_000_000, br#"{"a":1}"#),
            "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"
        );
        let other = WebhookSecret::from_stored("whsec_other".into());
        assert_ne!(
            other.sign(1_700_000_000, br#"{"a":1}"#),
            s.sign(1_700_000_000, br#"{"a":1}"#)
        );
    }

    #[test]
    fn secrets_are_random_and_redacted() {
        let a = WebhookSecret::generate().unwrap();
        let b = WebhookSecret::generate().unwrap();
        assert_ne!(a, b);
        assert!(a.expose().starts_with("whsec_"));
        assert_eq!(a.expose().len(), PREFIX.len() + 43);
        assert!(!format!("{a:?}").contains(a.expose()));
    }
}
