//! The private signing keys file (`CAIRN_JWT_PRIVATE_KEYS_FILE`) and the signer built from
//! it.
//!
//! Format (JSON, mode 0600):
//! ```json
//! {
//!   "active": "k-2026-11",
//!   "keys": [
//!     { "kid": "k-2026-11", "pkcs8": "<base64 of an Ed25519 PKCS#8 DER document>" },
//!     { "kid": "k-2026-10", "pkcs8": "…" }
//!   ]
//! }
//! ```
//! `active` signs new tokens; every key is published in the JWKS, so tokens signed by a key
//! that is no longer active stay valid until they expire. Rotation: `keys generate` a new
//! key, publish the JWKS (`keys export`) to every service, then `keys activate` it and
//! restart tenancy; remove the old key once the longest token lifetime (15 minutes) passed.
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cairn_auth::{AuthError, Claims, SigningKey, jwks_json};
use serde::{Deserialize, Serialize};

/// A problem with the signing keys file.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{} is readable by group or others (mode {mode:o}); make it 0600",
        path.display()
    )]
    Permissions { path: PathBuf, mode: u32 },
    #[error("invalid signing keys file: {0}")]
    Invalid(String),
    #[error("key {kid:?}")]
    Key {
        kid: String,
        #[source]
        source: AuthError,
    },
}

#[derive(Serialize, Deserialize)]
struct KeyFile {
    active: String,
    keys: Vec<KeyEntry>,
}

#[derive(Serialize, Deserialize)]
struct KeyEntry {
    kid: String,
    pkcs8: String,
}

/// The keys tenancy signs with: the active one and every key still published.
#[derive(Debug, Clone)]
pub struct Signer {
    active: usize,
    keys: Vec<SigningKey>,
}

impl Signer {
    /// Reads the keys file; refuses a file readable by group or others.
    pub fn load(path: &Path) -> Result<Self, KeyFileError> {
        let meta = std::fs::metadata(path).map_err(|source| KeyFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyFileError::Permissions {
                path: path.to_owned(),
                mode,
            });
        }
        let json = std::fs::read_to_string(path).map_err(|source| KeyFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json(&json)
    }

    /// Parses the file's JSON.
    pub fn from_json(json: &str) -> Result<Self, KeyFileError> {
        let file: KeyFile = serde_json::from_str(json)
            .map_err(|e| KeyFileError::Invalid(format!("not a keys document: {e}")))?;
        let mut keys = Vec::with_capacity(file.keys.len());
        for entry in file.keys {
            if keys.iter().any(|k: &SigningKey| k.kid() == entry.kid) {
                return Err(KeyFileError::Invalid(format!(
                    "kid {:?} appears twice",
                    entry.kid
                )));
            }
            let der = STANDARD.decode(entry.pkcs8.trim()).map_err(|_| {
                KeyFileError::Invalid(format!("key {:?}: pkcs8 is not base64", entry.kid))
            })?;
            let key = SigningKey::from_pkcs8(entry.kid.clone(), &der).map_err(|source| {
                KeyFileError::Key {
                    kid: entry.kid.clone(),
                    source,
                }
            })?;
            keys.push(key);
        }
        let active = keys
            .iter()
            .position(|k| k.kid() == file.active)
            .ok_or_else(|| {
                KeyFileError::Invalid(format!("active key {:?} is not in keys", file.active))
            })?;
        Ok(Signer { active, keys })
    }

    /// A signer of the given keys, the first one active (tests, `keys generate`).
    pub fn from_keys(keys: Vec<SigningKey>) -> Result<Self, KeyFileError> {
        if keys.is_empty() {
            return Err(KeyFileError::Invalid("no keys".into()));
        }
        Ok(Signer { active: 0, keys })
    }

    /// The file's JSON (contains private keys).
    pub fn to_json(&self) -> String {
        let file = KeyFile {
            active: self.active_kid().to_owned(),
            keys: self
                .keys
                .iter()
                .map(|k| KeyEntry {
                    kid: k.kid().to_owned(),
                    pkcs8: STANDARD.encode(k.pkcs8_der()),
                })
                .collect(),
        };
        serde_json::to_string_pretty(&file).expect("strings serialize")
    }

    /// Writes the file with mode 0600 (replacing it).
    pub fn save(&self, path: &Path) -> Result<(), KeyFileError> {
        write_private(path, self.to_json().as_bytes()).map_err(|source| KeyFileError::Write {
            path: path.to_owned(),
            source,
        })
    }

    /// Adds a freshly generated key named `kid`; it becomes active when `activate`.
    pub fn add_generated(&mut self, kid: &str, activate: bool) -> Result<(), KeyFileError> {
        if self.keys.iter().any(|k| k.kid() == kid) {
            return Err(KeyFileError::Invalid(format!("kid {kid:?} exists")));
        }
        let key = SigningKey::generate(kid).map_err(|source| KeyFileError::Key {
            kid: kid.to_owned(),
            source,
        })?;
        self.keys.push(key);
        if activate {
            self.active = self.keys.len() - 1;
        }
        Ok(())
    }

    /// Makes `kid` the signing key.
    pub fn activate(&mut self, kid: &str) -> Result<(), KeyFileError> {
        self.active = self
            .keys
            .iter()
            .position(|k| k.kid() == kid)
            .ok_or_else(|| KeyFileError::Invalid(format!("no key {kid:?}")))?;
        Ok(())
    }

    /// Drops `kid` (not the active key).
    pub fn remove(&mut self, kid: &str) -> Result<(), KeyFileError> {
        let at = self
            .keys
            .iter()
            .position(|k| k.kid() == kid)
            .ok_or_else(|| KeyFileError::Invalid(format!("no key {kid:?}")))?;
        if at == self.active {
            return Err(KeyFileError::Invalid(format!(
                "{kid:?} is the active key; activate another first"
            )));
        }
        self.keys.remove(at);
        if at < self.active {
            self.active -= 1;
        }
        Ok(())
    }

    pub fn active_kid(&self) -> &str {
        self.keys[self.active].kid()
    }

    pub fn keys(&self) -> &[SigningKey] {
        &self.keys
    }

    /// Signs `claims` with the active key.
    pub fn sign(&self, claims: &Claims) -> Result<String, AuthError> {
        self.keys[self.active].sign(claims)
    }

    /// The public JWK Set of every key (what services load as CAIRN_JWT_PUBLIC_KEYS_FILE).
    pub fn jwks_json(&self) -> String {
        jwks_json(&self.keys)
    }
}

/// Writes `bytes` to `path` with mode 0600, also when the file already existed.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_rotation_and_refusals() {
        let mut s = Signer::from_keys(vec![SigningKey::generate("a").unwrap()]).unwrap();
        s.add_generated("b", false).unwrap();
        assert_eq!(s.active_kid(), "a");
        s.activate("b").unwrap();
        let back = Signer::from_json(&s.to_json()).unwrap();
        assert_eq!(back.active_kid(), "b");
        assert_eq!(back.keys().len(), 2);
        assert!(back.jwks_json().contains("\"a\""));
        assert!(!back.jwks_json().contains("pkcs8"));
        let mut back = back;
        assert!(back.remove("b").is_err());
        back.remove("a").unwrap();
        assert_eq!(back.active_kid(), "b");
        assert!(Signer::from_json(r#"{"active":"x","keys":[]}"#).is_err());
        assert!(
            Signer::from_json(r#"{"active":"x","keys":[{"kid":"x","pkcs8":"AAAA"}]}"#).is_err()
        );
    }

    #[test]
    fn group_readable_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let s = Signer::from_keys(vec![SigningKey::generate("a").unwrap()]).unwrap();
        s.save(&path).unwrap();
        assert!(Signer::load(&path).is_ok());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(
            Signer::load(&path),
            Err(KeyFileError::Permissions { .. })
        ));
    }
}
