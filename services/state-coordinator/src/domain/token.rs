//! Run tokens: opaque random secrets handed to one attempt, stored only as a hash.
use std::fmt;

use aws_lc_rs::digest;
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

const PREFIX: &str = "crt_";

/// A run token in clear: shown once (in `AdmitRun`), never stored or logged.
pub struct RunToken(String);

impl RunToken {
    pub fn generate() -> Result<Self, aws_lc_rs::error::Unspecified> {
        let mut bytes = [0u8; 32];
        SystemRandom::new().fill(&mut bytes)?;
        Ok(Self(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> String {
        hash_token(&self.0)
    }
}

impl fmt::Debug for RunToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RunToken(***)")
    }
}

/// The stored form of a token: hex sha256. Tokens are 256-bit random, so a plain hash is
/// enough (no password stretching needed) and lookups by hash compare in the database.
pub fn hash_token(token: &str) -> String {
    hex::encode(digest::digest(&digest::SHA256, token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashed() {
        let a = RunToken::generate().unwrap();
        let b = RunToken::generate().unwrap();
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.hash(), hash_token(a.expose()));
        assert_eq!(a.hash().len(), 64);
        assert_eq!(format!("{a:?}"), "RunToken(***)");
    }
}
