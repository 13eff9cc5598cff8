//! Key management: per-generation data keys, generated and wrapped by KMS or by a local key
//! file, and a bounded cache of unwrapped data keys for reads.

mod cache;
mod kms;
mod local_file;
mod secret;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::BoxFuture;
use crate::aws::AwsSettings;

pub use cache::DataKeyCache;
pub use kms::KmsKeyManager;
pub use local_file::LocalKeyFile;
pub use secret::SecretKey;

/// Who a data key belongs to; bound into every wrap (KMS encryption context, local AAD).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EncryptionContext {
    pub tenant_id: String,
    pub state_id: String,
}

impl EncryptionContext {
    pub fn new(tenant_id: impl Into<String>, state_id: impl Into<String>) -> Self {
        Self {
            tenant_id: tenant_id.into(),
            state_id: state_id.into(),
        }
    }

    /// The KMS encryption context: `{"tenant": …, "state": …}`.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("tenant".to_owned(), self.tenant_id.clone()),
            ("state".to_owned(), self.state_id.clone()),
        ])
    }

    /// Unambiguous byte encoding: `b"cairn-ctx-v1\0"`, then for tenant and state the
    /// length as u32 big-endian followed by the bytes.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        const TAG: &[u8] = b"cairn-ctx-v1\0";
        let mut out =
            Vec::with_capacity(TAG.len() + 8 + self.tenant_id.len() + self.state_id.len());
        out.extend_from_slice(TAG);
        for part in [&self.tenant_id, &self.state_id] {
            let len = u32::try_from(part.len()).expect("ids are far shorter than 4 GiB");
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(part.as_bytes());
        }
        out
    }
}

/// A fresh data key: its plaintext (zeroed on drop), the wrapped form to store, and the id
/// of the key that wrapped it (the KMS key ARN, or the local key id).
pub struct DataKey {
    pub key_id: String,
    pub plaintext: SecretKey,
    pub wrapped: Vec<u8>,
}

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataKey")
            .field("key_id", &self.key_id)
            .field("plaintext", &self.plaintext)
            .field("wrapped_len", &self.wrapped.len())
            .finish()
    }
}

/// Errors of a [`KeyManager`].
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The wrapped key does not decrypt under the named key with this encryption context
    /// (KMS InvalidCiphertextException, local AES-GCM tag failure). Proof of damage.
    #[error(
        "wrapped data key does not decrypt under key {key_id} with this encryption context: {detail}"
    )]
    InvalidCiphertext { key_id: String, detail: String },
    /// The wrapped key was encrypted under a different key (KMS IncorrectKeyException).
    /// Proof of damage.
    #[error("wrapped data key was not encrypted under key {key_id}: {detail}")]
    IncorrectKey { key_id: String, detail: String },
    /// The key manager has no key with this id. Proof of damage.
    #[error("key id {key_id} is not known to {manager}")]
    UnknownKeyId { key_id: String, manager: String },
    /// Transient or environmental trouble; the text names the cause
    /// (e.g. `KMS unreachable: connection refused`, `KMS key … is disabled`).
    #[error("{0}")]
    Unavailable(String),
    /// The local key file cannot be used.
    #[error("key file {}: {reason}", path.display())]
    KeyFile { path: PathBuf, reason: String },
    /// The local key file can be read by group or others.
    #[error(
        "key file {} is accessible by group or others (mode {mode:04o}); refusing to use it, restrict it with chmod 600",
        path.display()
    )]
    InsecureKeyFile { path: PathBuf, mode: u32 },
    /// The key manager setting cannot be used.
    #[error("invalid key manager setting: {0}")]
    Config(String),
}

impl KeyError {
    /// True when the error proves that a stored wrapped key (or its metadata) is broken.
    pub fn is_damage(&self) -> bool {
        match self {
            KeyError::InvalidCiphertext { .. }
            | KeyError::IncorrectKey { .. }
            | KeyError::UnknownKeyId { .. } => true,
            KeyError::Unavailable(_)
            | KeyError::KeyFile { .. }
            | KeyError::InsecureKeyFile { .. }
            | KeyError::Config(_) => false,
        }
    }
}

/// Generates and unwraps data keys. Implementations are used as `Arc<dyn KeyManager>`.
pub trait KeyManager: Send + Sync {
    /// A fresh 256-bit data key wrapped under the active master key, bound to `ctx`.
    fn generate_data_key<'a>(
        &'a self,
        ctx: &'a EncryptionContext,
    ) -> BoxFuture<'a, Result<DataKey, KeyError>>;

    /// Unwraps a data key produced by `generate_data_key` under `key_id` for `ctx`.
    fn unwrap_data_key<'a>(
        &'a self,
        key_id: &'a str,
        wrapped: &'a [u8],
        ctx: &'a EncryptionContext,
    ) -> BoxFuture<'a, Result<SecretKey, KeyError>>;

    /// A human description for logs (never key material).
    fn describe(&self) -> String;

    /// Start-up check: generate a data key, unwrap it again, and seal/open a probe with it.
    fn self_check(&self) -> BoxFuture<'_, Result<(), KeyError>> {
        Box::pin(async move {
            let ctx = EncryptionContext::new("cairn-self-check", "cairn-self-check");
            let generated = self.generate_data_key(&ctx).await?;
            let unwrapped = self
                .unwrap_data_key(&generated.key_id, &generated.wrapped, &ctx)
                .await?;
            if unwrapped != generated.plaintext {
                return Err(KeyError::Unavailable(format!(
                    "{} self-check failed: an unwrapped data key differs from the generated one",
                    self.describe()
                )));
            }
            let aad = crate::envelope::aad_for("cairn-self-check", 0);
            let probe = b"cairn self-check";
            let sealed = crate::envelope::seal(generated.plaintext.expose(), &aad, probe).map_err(
                |err| KeyError::Unavailable(format!("self-check encryption failed: {err}")),
            )?;
            let opened =
                crate::envelope::open(unwrapped.expose(), &sealed.nonce, &aad, &sealed.ciphertext)
                    .map_err(|err| {
                        KeyError::Unavailable(format!("self-check decryption failed: {err}"))
                    })?;
            if opened != probe {
                return Err(KeyError::Unavailable(
                    "self-check decryption returned different bytes".to_owned(),
                ));
            }
            Ok(())
        })
    }
}

/// Builds a key manager from a setting: `local:/path/to/keys.json` opens (or creates) a
/// local key file; anything else is a KMS key id, ARN or `alias/…` (credentials and region
/// from the environment, `kms_endpoint` overrides the endpoint).
pub async fn parse_key_manager(
    setting: &str,
    kms_endpoint: Option<String>,
) -> Result<Arc<dyn KeyManager>, KeyError> {
    let setting = setting.trim();
    if let Some(path) = setting.strip_prefix("local:") {
        if path.is_empty() {
            return Err(KeyError::Config(
                "local key file setting names no path (expected local:/path/to/keys.json)"
                    .to_owned(),
            ));
        }
        let path = PathBuf::from(path);
        let file = tokio::task::spawn_blocking(move || LocalKeyFile::open_or_create(path))
            .await
            .map_err(|err| {
                KeyError::Config(format!("opening the local key file failed: {err}"))
            })??;
        Ok(Arc::new(file))
    } else if setting.is_empty() {
        Err(KeyError::Config(
            "no key manager configured (expected local:/path or a KMS key id, ARN or alias)"
                .to_owned(),
        ))
    } else {
        let kms = KmsKeyManager::with_settings(&AwsSettings::from_env(kms_endpoint), setting).await;
        Ok(Arc::new(kms))
    }
}
