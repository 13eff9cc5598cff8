//! Passwords: the policy for new ones, argon2id hashing and verification. Hashing is
//! CPU-bound: callers run it on a blocking thread.
use std::fmt;

use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::{Algorithm, Argon2, Params, Version};

use super::Invalid;

/// Shortest accepted new password, in characters.
pub const MIN_LEN: usize = 12;
/// Longest accepted password, in bytes (bounds the hashing work a caller can ask for).
pub const MAX_BYTES: usize = 1024;

/// A password from a request; never printed by `Debug`.
#[derive(Clone)]
pub struct Password(String);

impl Password {
    /// Wraps a password presented at login (only its size is checked).
    pub fn presented(s: String) -> Result<Self, Invalid> {
        if s.len() > MAX_BYTES {
            return Err(Invalid::new("password is too long"));
        }
        Ok(Password(s))
    }

    /// Checks a new password against the policy.
    pub fn new_password(s: String) -> Result<Self, Invalid> {
        if s.chars().count() < MIN_LEN {
            return Err(Invalid(format!(
                "password must have at least {MIN_LEN} characters"
            )));
        }
        Self::presented(s)
    }

    fn bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password([redacted])")
    }
}

/// argon2id cost parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashCost {
    pub memory_kib: u32,
    pub iterations: u32,
    pub parallelism: u32,
}

impl Default for HashCost {
    /// OWASP's argon2id recommendation: 19 MiB, 2 iterations, 1 lane.
    fn default() -> Self {
        HashCost {
            memory_kib: 19 * 1024,
            iterations: 2,
            parallelism: 1,
        }
    }
}

/// Hashing failed: bad parameters or no randomness for the salt.
#[derive(Debug, Clone, thiserror::Error)]
#[error("password hashing: {0}")]
pub struct HashError(pub String);

/// Hashes and verifies passwords with argon2id.
#[derive(Debug, Clone)]
pub struct PasswordHashing {
    params: Params,
    /// A hash of a random password, verified against when a login names no usable user, so
    /// that such a login costs the same time as a wrong password.
    dummy_hash: String,
}

impl PasswordHashing {
    pub fn new(cost: HashCost) -> Result<Self, HashError> {
        let params = Params::new(cost.memory_kib, cost.iterations, cost.parallelism, None)
            .map_err(|e| HashError(e.to_string()))?;
        let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
        let dummy = uuid::Uuid::new_v4().to_string();
        let dummy_hash = argon
            .hash_password(dummy.as_bytes())
            .map_err(|e| HashError(e.to_string()))?
            .to_string();
        Ok(PasswordHashing { params, dummy_hash })
    }

    fn argon(&self) -> Argon2<'static> {
        Argon2::new(Algorithm::Argon2id, Version::V0x13, self.params.clone())
    }

    /// The PHC string (`$argon2id$v=19$…`) of `password` with a fresh salt.
    pub fn hash(&self, password: &Password) -> Result<String, HashError> {
        self.argon()
            .hash_password(password.bytes())
            .map(|h| h.to_string())
            .map_err(|e| HashError(e.to_string()))
    }

    /// Whether `password` matches `phc` (with the parameters stored in `phc`). With `None`
    /// the work of a verification is still done and the answer is `false`.
    pub fn verify(&self, password: &Password, phc: Option<&str>) -> bool {
        match phc {
            Some(phc) => self.argon().verify_password(password.bytes(), phc).is_ok(),
            None => {
                let _ = self
                    .argon()
                    .verify_password(password.bytes(), self.dummy_hash.as_str());
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cheap() -> PasswordHashing {
        PasswordHashing::new(HashCost {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        })
        .unwrap()
    }

    #[test]
    fn hash_then_verify() {
        let h = cheap();
        let pw = Password::new_password("correct horse battery".into()).unwrap();
        let phc = h.hash(&pw).unwrap();
        assert!(phc.starts_with("$argon2id$v=19$"));
        assert!(h.verify(&pw, Some(&phc)));
        let wrong = Password::presented("correct horse battery!".into()).unwrap();
        assert!(!h.verify(&wrong, Some(&phc)));
        assert!(!h.verify(&pw, None));
        assert!(!h.verify(&pw, Some("not a phc string")));
    }

    #[test]
    fn policy_and_redaction() {
        assert!(Password::new_password("short".into()).is_err());
        assert!(Password::presented("x".repeat(MAX_BYTES + 1)).is_err());
        let pw = Password::new_password("s3cret-s3cret-s3cret".into()).unwrap();
        assert!(!format!("{pw:?}").contains("s3cret"));
    }
}
