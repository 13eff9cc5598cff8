//! The AWS KMS key manager: `GenerateDataKey` (AES_256) and `Decrypt`, both with the
//! encryption context {tenant, state}.

use std::collections::HashMap;

use aws_config::SdkConfig;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;

use super::{DataKey, EncryptionContext, KeyError, KeyManager, SecretKey};
use crate::BoxFuture;
use crate::aws::{AwsSettings, SdkFailure, kms_client, sdk_config};
use crate::metrics::{KMS_REQUEST_DURATION, timed};

/// A [`KeyManager`] backed by one KMS key (id, ARN or alias). Data keys record the key ARN
/// that KMS reports.
#[derive(Clone, Debug)]
pub struct KmsKeyManager {
    client: aws_sdk_kms::Client,
    key_id: String,
}

impl KmsKeyManager {
    /// A manager with credentials and region from the environment; `endpoint` overrides
    /// the KMS endpoint.
    pub async fn new(key_id: impl Into<String>, endpoint: Option<String>) -> Self {
        Self::with_settings(&AwsSettings::from_env(endpoint), key_id).await
    }

    /// A manager for explicit [`AwsSettings`] (e.g. static credentials for an emulator).
    pub async fn with_settings(settings: &AwsSettings, key_id: impl Into<String>) -> Self {
        Self::with_config(&sdk_config(settings).await, key_id)
    }

    /// A manager for a loaded SDK configuration.
    pub fn with_config(config: &SdkConfig, key_id: impl Into<String>) -> Self {
        Self::from_client(kms_client(config), key_id)
    }

    /// A manager over an existing client.
    pub fn from_client(client: aws_sdk_kms::Client, key_id: impl Into<String>) -> Self {
        Self {
            client,
            key_id: key_id.into(),
        }
    }

    /// The configured key id, ARN or alias used for new data keys.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    fn context(ctx: &EncryptionContext) -> HashMap<String, String> {
        ctx.to_map().into_iter().collect()
    }

    /// Maps a KMS failure to a key error; only InvalidCiphertext and IncorrectKey are
    /// damage.
    fn classify(failure: &SdkFailure, key_id: &str, doing: &str) -> KeyError {
        let detail = failure.describe("KMS");
        let code = failure.code().unwrap_or_default();
        let status = failure.status().unwrap_or_default();
        let cause = match code {
            "InvalidCiphertextException" => {
                return KeyError::InvalidCiphertext {
                    key_id: key_id.to_owned(),
                    detail,
                };
            }
            "IncorrectKeyException" => {
                return KeyError::IncorrectKey {
                    key_id: key_id.to_owned(),
                    detail,
                };
            }
            "DisabledException" => format!("KMS key {key_id} is disabled: {detail}"),
            "KeyUnavailableException" => format!("KMS key {key_id} is unavailable: {detail}"),
            "KMSInvalidStateException" => {
                format!("KMS key {key_id} is not in a usable state: {detail}")
            }
            "NotFoundException" => format!("KMS key {key_id} was not found: {detail}"),
            "AccessDeniedException" => format!("KMS access denied: {detail}"),
            "ThrottlingException" | "LimitExceededException" => {
                format!("KMS throttled: {detail}")
            }
            _ if status == 429 => format!("KMS throttled: {detail}"),
            _ if status >= 500 => format!("KMS server error: {detail}"),
            _ => detail,
        };
        KeyError::Unavailable(format!("{cause} (while {doing})"))
    }

    async fn generate_impl(&self, ctx: &EncryptionContext) -> Result<DataKey, KeyError> {
        let result = self
            .client
            .generate_data_key()
            .key_id(&self.key_id)
            .key_spec(DataKeySpec::Aes256)
            .set_encryption_context(Some(Self::context(ctx)))
            .send()
            .await;
        let out = result.map_err(|err| {
            Self::classify(
                &SdkFailure::from_sdk(&err),
                &self.key_id,
                "generating a data key",
            )
        })?;
        let plaintext = out
            .plaintext()
            .and_then(|blob| SecretKey::from_slice(blob.as_ref()))
            .ok_or_else(|| {
                KeyError::Unavailable(format!(
                    "KMS GenerateDataKey with key {} returned no 32-byte plaintext key",
                    self.key_id
                ))
            })?;
        let wrapped = out
            .ciphertext_blob()
            .map(|blob| blob.as_ref().to_vec())
            .filter(|wrapped| !wrapped.is_empty())
            .ok_or_else(|| {
                KeyError::Unavailable(format!(
                    "KMS GenerateDataKey with key {} returned no ciphertext blob",
                    self.key_id
                ))
            })?;
        let key_id = out.key_id().unwrap_or(&self.key_id).to_owned();
        Ok(DataKey {
            key_id,
            plaintext,
            wrapped,
        })
    }

    async fn unwrap_impl(
        &self,
        key_id: &str,
        wrapped: &[u8],
        ctx: &EncryptionContext,
    ) -> Result<SecretKey, KeyError> {
        let result = self
            .client
            .decrypt()
            .key_id(key_id)
            .ciphertext_blob(Blob::new(wrapped))
            .set_encryption_context(Some(Self::context(ctx)))
            .send()
            .await;
        let out = result.map_err(|err| {
            let error =
                Self::classify(&SdkFailure::from_sdk(&err), key_id, "unwrapping a data key");
            if error.is_damage() {
                tracing::warn!(key_id, error = %error, "KMS refused a wrapped data key");
            }
            error
        })?;
        // KMS answers with the ARN of the key that decrypted; when we named an ARN it must
        // be the same key.
        if let Some(used) = out.key_id()
            && key_id.starts_with("arn:")
            && key_id.contains(":key/")
            && used != key_id
        {
            return Err(KeyError::IncorrectKey {
                key_id: key_id.to_owned(),
                detail: format!("KMS decrypted it with key {used}"),
            });
        }
        out.plaintext()
            .and_then(|blob| SecretKey::from_slice(blob.as_ref()))
            .ok_or_else(|| KeyError::InvalidCiphertext {
                key_id: key_id.to_owned(),
                detail: "the decrypted value is not a 32-byte data key".to_owned(),
            })
    }
}

impl KeyManager for KmsKeyManager {
    fn generate_data_key<'a>(
        &'a self,
        ctx: &'a EncryptionContext,
    ) -> BoxFuture<'a, Result<DataKey, KeyError>> {
        Box::pin(timed(
            KMS_REQUEST_DURATION,
            "generate_data_key",
            self.generate_impl(ctx),
        ))
    }

    fn unwrap_data_key<'a>(
        &'a self,
        key_id: &'a str,
        wrapped: &'a [u8],
        ctx: &'a EncryptionContext,
    ) -> BoxFuture<'a, Result<SecretKey, KeyError>> {
        Box::pin(timed(
            KMS_REQUEST_DURATION,
            "decrypt",
            self.unwrap_impl(key_id, wrapped, ctx),
        ))
    }

    fn describe(&self) -> String {
        format!("KMS key {}", self.key_id)
    }
}
