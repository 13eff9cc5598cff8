//! A service's NATS credentials (`CAIRN_NATS_CREDS`): the file, its two formats, and new
//! nkey users for `cairn-tenancy nats credentials`.
//!
//! Formats of the file:
//! - an **nkey seed file** (what `cairn-tenancy nats credentials` writes): the user's seed
//!   (`SU…`) on a line of its own; empty lines and `#` comments are ignored;
//! - a **NATS `.creds` file** (decentralised auth: a user JWT and its seed between
//!   `-----BEGIN NATS USER JWT-----` / `-----BEGIN USER NKEY SEED-----` armour), as `nsc`
//!   writes it, for an operator-managed server.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::permissions::ServiceRole;

/// Why the credentials cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("read NATS credentials {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file holds neither a user seed nor a `.creds` JWT.
    #[error("NATS credentials {}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("NATS credentials cannot be used: {0}")]
    Unusable(String),
    #[error("make an nkey user")]
    Generate(#[source] nkeys::error::Error),
}

/// Loaded credentials; the secret never appears in `Debug`.
#[derive(Clone)]
pub enum NatsCredentials {
    /// A user nkey seed (the server knows the user by its public key).
    Seed(String),
    /// A `.creds` file's text (user JWT and seed).
    Jwt(String),
}

impl fmt::Debug for NatsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NatsCredentials::Seed(_) => f.write_str("NatsCredentials::Seed(<redacted>)"),
            NatsCredentials::Jwt(_) => f.write_str("NatsCredentials::Jwt(<redacted>)"),
        }
    }
}

const JWT_ARMOUR: &str = "-----BEGIN NATS USER JWT-----";

impl NatsCredentials {
    /// Reads `path` (either format).
    pub fn load(path: &Path) -> Result<Self, CredentialsError> {
        let text = std::fs::read_to_string(path).map_err(|source| CredentialsError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|reason| CredentialsError::Invalid {
            path: path.to_owned(),
            reason,
        })
    }

    fn parse(text: &str) -> Result<Self, String> {
        if text.contains(JWT_ARMOUR) {
            return Ok(NatsCredentials::Jwt(text.to_owned()));
        }
        let mut lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        let seed = lines
            .next()
            .ok_or("no nkey seed in the file (expected a line starting with SU)")?;
        if lines.next().is_some() {
            return Err("more than one line besides comments".into());
        }
        if !seed.starts_with("SU") {
            return Err("the seed is not a user nkey seed (SU…)".into());
        }
        nkeys::KeyPair::from_seed(seed).map_err(|e| format!("not a valid nkey seed: {e}"))?;
        Ok(NatsCredentials::Seed(seed.to_owned()))
    }

    /// The user's public key, for a seed (`U…`).
    pub fn public_key(&self) -> Option<String> {
        match self {
            NatsCredentials::Seed(seed) => {
                nkeys::KeyPair::from_seed(seed).ok().map(|k| k.public_key())
            }
            NatsCredentials::Jwt(_) => None,
        }
    }

    /// `options` authenticating with these credentials.
    pub(crate) fn apply(
        &self,
        options: async_nats::ConnectOptions,
    ) -> Result<async_nats::ConnectOptions, CredentialsError> {
        match self {
            NatsCredentials::Seed(seed) => Ok(options.nkey(seed.clone())),
            NatsCredentials::Jwt(text) => options
                .credentials(text)
                .map_err(|e| CredentialsError::Unusable(e.to_string())),
        }
    }
}

/// A new nkey user for `role`: its seed file's text and its public key.
pub fn new_user(role: ServiceRole) -> Result<(String, String), CredentialsError> {
    let pair = nkeys::KeyPair::new_user();
    let seed = pair.seed().map_err(CredentialsError::Generate)?;
    Ok((seed_file(role, &seed), pair.public_key()))
}

/// The text of `role`'s seed file.
pub fn seed_file(role: ServiceRole, seed: &str) -> String {
    format!(
        "# The NATS nkey seed of Cairn's {role} user: CAIRN_NATS_CREDS of that service.\n\
         # Secret. The server knows the user by its public key (nats-server.conf).\n{seed}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_users_seed_file_loads_back_with_its_public_key() {
        let (text, public) = new_user(ServiceRole::Runner).expect("a new user");
        let creds = NatsCredentials::parse(&text).expect("parses");
        assert!(matches!(creds, NatsCredentials::Seed(_)));
        assert_eq!(creds.public_key().as_deref(), Some(public.as_str()));
        assert!(public.starts_with('U'));
        assert!(!format!("{creds:?}").contains("SU"));
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        for bad in ["", "# only a comment\n", "SUnotaseed\n", "SAAB\n", "a\nb\n"] {
            assert!(NatsCredentials::parse(bad).is_err(), "{bad:?} accepted");
        }
        let jwt = format!("{JWT_ARMOUR}\neyJ0\n------END NATS USER JWT------\n");
        assert!(matches!(
            NatsCredentials::parse(&jwt),
            Ok(NatsCredentials::Jwt(_))
        ));
    }
}
