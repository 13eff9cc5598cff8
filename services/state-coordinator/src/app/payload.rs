//! Sealing payloads under per-object data keys and reading them back, classifying every
//! failure as proof of damage (fence), transient trouble (UNAVAILABLE) or a bug of ours
//! (INTERNAL: an object key the store does not accept is never worth a retry).
use bytes::Bytes;
use cairn_storage::{EncryptionContext, KeyError, ObjectError, SecretKey, sha256_hex};
use uuid::Uuid;

use super::App;
use crate::error::Error;
use crate::store::generations::GenerationRow;
use crate::store::states::StateRow;

/// A payload sealed under a fresh data key, ready to be put.
pub struct SealedPayload {
    pub key_id: String,
    pub wrapped_key: Vec<u8>,
    pub nonce: Vec<u8>,
    pub ciphertext: Bytes,
    pub ciphertext_sha256: String,
    pub plaintext_sha256: String,
}

/// How much of a sealed payload's record a read checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integrity {
    /// The AES-GCM tag only: it authenticates the ciphertext under the payload's own key,
    /// nonce and associated data, so a payload that opens is the one sealed. The read path
    /// of every tofu GET. On a failed tag the full check runs to say what is damaged.
    Tag,
    /// The tag and both recorded sha256 digests (ciphertext before, plaintext after): the
    /// verification and recovery paths, which report exactly what does not match.
    Full,
}

/// Where a sealed payload lives and how to open it.
pub struct SealedRef<'a> {
    pub object_key: &'a str,
    pub object_version: &'a str,
    pub key_id: &'a str,
    pub wrapped_key: &'a [u8],
    pub nonce: &'a [u8],
    pub ciphertext_sha256: Option<&'a str>,
    pub plaintext_sha256: Option<&'a str>,
}

/// Why a payload could not be read.
#[derive(Debug)]
pub enum ReadFailure {
    /// Proof of damage: the state must be fenced.
    Damage(String),
    /// Transient: report UNAVAILABLE and change nothing.
    Unavailable(String),
    /// A bug (an object key the store refuses): report INTERNAL, never fence or retry.
    Internal(String),
}

/// The one classification of an object store error outside reads: an invalid key or an
/// unusable store setting is a bug (INTERNAL), everything else environmental (UNAVAILABLE).
pub fn object_error(err: ObjectError) -> Error {
    match err {
        ObjectError::InvalidKey { .. } | ObjectError::Config(_) => {
            Error::internal(format!("object storage: {err}"))
        }
        ObjectError::AlreadyExists { .. }
        | ObjectError::NotFound { .. }
        | ObjectError::VersioningNotEnabled { .. }
        | ObjectError::Unavailable(_) => Error::unavailable(format!("object storage: {err}")),
    }
}

impl ReadFailure {
    fn from_object(err: ObjectError) -> Self {
        match err {
            ObjectError::InvalidKey { .. } | ObjectError::Config(_) => {
                Self::Internal(format!("object storage: {err}"))
            }
            err if err.is_damage() => Self::Damage(err.to_string()),
            err => Self::Unavailable(format!("object storage: {err}")),
        }
    }

    /// The error to answer: `damage` words proof of damage for what was read (the caller
    /// decides whether that fences); the other classes map to UNAVAILABLE and INTERNAL.
    pub fn into_error(self, damage: impl FnOnce(String) -> Error) -> Error {
        match self {
            Self::Damage(m) => damage(m),
            Self::Unavailable(m) => Error::unavailable(m),
            Self::Internal(m) => Error::internal(m),
        }
    }

    fn from_key(err: KeyError) -> Self {
        if err.is_damage() {
            Self::Damage(err.to_string())
        } else {
            Self::Unavailable(format!("key management: {err}"))
        }
    }

    /// For paths that must not fence (recovery inspection reports it instead).
    pub fn describe(&self) -> &str {
        match self {
            Self::Damage(m) | Self::Unavailable(m) | Self::Internal(m) => m,
        }
    }
}

pub fn context(tenant_id: Uuid, state_id: Uuid) -> EncryptionContext {
    EncryptionContext::new(tenant_id.to_string(), state_id.to_string())
}

/// Associated data binding a sealed payload to what it is, so a blob moved elsewhere does
/// not open. State generations use `aad_for(state, generation)`.
pub fn aad_generation(state_id: Uuid, generation: u64) -> Vec<u8> {
    cairn_storage::aad_for(&state_id.to_string(), generation)
}

pub fn aad_named(kind: &str, id: Uuid) -> Vec<u8> {
    format!("cairn-{kind}-v1\0{id}").into_bytes()
}

impl App {
    /// Seals `plaintext` under a fresh data key from the key manager (one per object).
    pub async fn seal(
        &self,
        ctx: &EncryptionContext,
        aad: &[u8],
        plaintext: &[u8],
    ) -> Result<SealedPayload, Error> {
        let data_key = self
            .keys
            .generate_data_key(ctx)
            .await
            .map_err(|e| Error::unavailable(format!("key management: {e}")))?;
        self.key_cache.remember(
            &data_key.key_id,
            &data_key.wrapped,
            ctx,
            &data_key.plaintext,
        );
        let sealed = cairn_storage::seal(data_key.plaintext.expose(), aad, plaintext)
            .map_err(|e| Error::internal(format!("seal payload: {e}")))?;
        let ciphertext_sha256 = sha256_hex(&sealed.ciphertext);
        Ok(SealedPayload {
            key_id: data_key.key_id,
            wrapped_key: data_key.wrapped,
            nonce: sealed.nonce.to_vec(),
            ciphertext: Bytes::from(sealed.ciphertext),
            ciphertext_sha256,
            plaintext_sha256: sha256_hex(plaintext),
        })
    }

    async fn data_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        ctx: &EncryptionContext,
    ) -> Result<SecretKey, ReadFailure> {
        self.key_cache
            .get_or_unwrap(self.keys.as_ref(), key_id, wrapped, ctx)
            .await
            .map_err(ReadFailure::from_key)
    }

    /// Fetches, verifies and opens a sealed payload.
    pub async fn open(
        &self,
        ctx: &EncryptionContext,
        aad: &[u8],
        r: &SealedRef<'_>,
        integrity: Integrity,
    ) -> Result<Vec<u8>, ReadFailure> {
        self.open_fetched(ctx, aad, r, integrity, None).await
    }

    /// [`Self::open`] of a payload whose object may have been fetched already (`fetched`,
    /// the bytes of `r`'s object key and version).
    pub async fn open_fetched(
        &self,
        ctx: &EncryptionContext,
        aad: &[u8],
        r: &SealedRef<'_>,
        integrity: Integrity,
        fetched: Option<Bytes>,
    ) -> Result<Vec<u8>, ReadFailure> {
        let ciphertext = match fetched {
            Some(bytes) => bytes,
            None => self
                .objects
                .get(r.object_key, r.object_version)
                .await
                .map_err(ReadFailure::from_object)?,
        };
        let full = integrity == Integrity::Full;
        if full && let Some(expected) = r.ciphertext_sha256 {
            let actual = sha256_hex(&ciphertext);
            if actual != expected {
                return Err(ReadFailure::Damage(format!(
                    "ciphertext sha256 mismatch for {} (expected {expected}, found {actual})",
                    r.object_key
                )));
            }
        }
        let key = self.data_key(r.key_id, r.wrapped_key, ctx).await?;
        // Decrypted in place: the object's buffer becomes the plaintext (no copy).
        let plaintext =
            match cairn_storage::open_in_place(key.expose(), r.nonce, aad, Vec::from(ciphertext)) {
                Ok(plaintext) => plaintext,
                // The tag proves damage; the full check says which part is damaged (the object's
                // bytes, or its key and nonce) by reading the object again.
                Err(e) if e.is_damage() && !full => {
                    return Box::pin(self.open(ctx, aad, r, Integrity::Full)).await;
                }
                Err(e) if e.is_damage() => {
                    return Err(ReadFailure::Damage(format!(
                        "decryption of {} failed: {e}",
                        r.object_key
                    )));
                }
                Err(e) => return Err(ReadFailure::Unavailable(e.to_string())),
            };
        if full && let Some(expected) = r.plaintext_sha256 {
            let actual = sha256_hex(&plaintext);
            if actual != expected {
                return Err(ReadFailure::Damage(format!(
                    "plaintext sha256 mismatch for {} (expected {expected}, found {actual})",
                    r.object_key
                )));
            }
        }
        Ok(plaintext)
    }

    /// Fetches, verifies and opens one generation of a state (no fencing here).
    pub async fn open_generation(
        &self,
        state: &StateRow,
        g: &GenerationRow,
        integrity: Integrity,
    ) -> Result<Vec<u8>, ReadFailure> {
        self.open_generation_fetched(state, g, integrity, None)
            .await
    }

    /// [`Self::open_generation`] with the object's bytes possibly fetched already.
    pub async fn open_generation_fetched(
        &self,
        state: &StateRow,
        g: &GenerationRow,
        integrity: Integrity,
        fetched: Option<Bytes>,
    ) -> Result<Vec<u8>, ReadFailure> {
        let generation = u64::try_from(g.generation).unwrap_or(0);
        self.open_fetched(
            &context(state.tenant_id, state.state_id),
            &aad_generation(state.state_id, generation),
            &SealedRef {
                object_key: &g.object_key,
                object_version: &g.object_version,
                key_id: &g.key_id,
                wrapped_key: &g.wrapped_key,
                nonce: &g.nonce,
                ciphertext_sha256: Some(&g.ciphertext_sha256),
                plaintext_sha256: Some(&g.plaintext_sha256),
            },
            integrity,
            fetched,
        )
        .await
    }

    /// Deletes objects after the rows that referenced them are gone; failures are logged
    /// (an unreferenced object is harmless and VerifyAll reports it).
    pub async fn delete_objects(&self, objects: &[(String, String)]) {
        for (key, version) in objects {
            if let Err(e) = self.objects.delete(key, version).await {
                tracing::warn!(object_key = %key, error = %e, "could not delete object");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use cairn_db::IsRetryable;

    use super::*;

    fn invalid_key() -> ObjectError {
        ObjectError::InvalidKey {
            key: "plans/s/0123456789abcdef0123456789abcdef".to_owned(),
            reason: "has a path component of 32 hex digits",
        }
    }

    #[test]
    fn an_invalid_object_key_is_internal_by_its_type_never_transient() {
        let err = object_error(invalid_key());
        assert!(!err.is_retryable());
        assert_eq!(tonic::Status::from(err).code(), tonic::Code::Internal);
        let read = ReadFailure::from_object(invalid_key());
        assert!(matches!(read, ReadFailure::Internal(_)), "{read:?}");
        let status = tonic::Status::from(read.into_error(Error::failed_precondition));
        assert_eq!(status.code(), tonic::Code::Internal);
        // A message that merely reads like one does not change the class.
        let outage = ObjectError::Unavailable("invalid object key (S3 unreachable)".to_owned());
        assert_eq!(
            tonic::Status::from(object_error(outage)).code(),
            tonic::Code::Unavailable
        );
        let missing = ObjectError::NotFound {
            key: "k".to_owned(),
            version_id: "v".to_owned(),
        };
        assert!(matches!(
            ReadFailure::from_object(missing),
            ReadFailure::Damage(_)
        ));
    }
}
