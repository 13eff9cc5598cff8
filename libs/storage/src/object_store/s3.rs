//! The S3 object store: conditional creates (`If-None-Match: *`), reads by version id, and a
//! start-up check that bucket versioning is enabled.

use aws_config::SdkConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::BucketVersioningStatus;
use bytes::Bytes;

use super::{ObjectError, ObjectStore, ObjectVersion, validate_key, validate_new_key};
use crate::BoxFuture;
use crate::aws::{AwsSettings, SdkFailure, s3_client, sdk_config};
use crate::metrics::{S3_REQUEST_DURATION, timed};

/// The most a read reserves up front from the object's announced length (a larger object
/// still reads; its buffer then grows as it arrives).
const MAX_PREALLOCATED_READ: usize = 512 * 1024 * 1024;

/// An [`ObjectStore`] in one S3 bucket under a key prefix. The bucket must have versioning
/// enabled.
#[derive(Clone, Debug)]
pub struct S3ObjectStore {
    client: aws_sdk_s3::Client,
    bucket: String,
    prefix: String,
    /// `MaxKeys` per `ListObjectVersions` page; `None` leaves the service default (1000).
    list_page_size: Option<i32>,
}

impl S3ObjectStore {
    /// A store with credentials and region from the environment; `endpoint` overrides the
    /// S3 endpoint (path-style addressing then).
    pub async fn new(
        bucket: impl Into<String>,
        prefix: impl Into<String>,
        endpoint: Option<String>,
    ) -> Self {
        Self::with_settings(&AwsSettings::from_env(endpoint), bucket, prefix).await
    }

    /// A store for explicit [`AwsSettings`] (e.g. static credentials for an emulator).
    pub async fn with_settings(
        settings: &AwsSettings,
        bucket: impl Into<String>,
        prefix: impl Into<String>,
    ) -> Self {
        Self::with_config(&sdk_config(settings).await, bucket, prefix)
    }

    /// A store for a loaded SDK configuration.
    pub fn with_config(
        config: &SdkConfig,
        bucket: impl Into<String>,
        prefix: impl Into<String>,
    ) -> Self {
        Self::from_client(s3_client(config), bucket, prefix)
    }

    /// A store over an existing client.
    pub fn from_client(
        client: aws_sdk_s3::Client,
        bucket: impl Into<String>,
        prefix: impl Into<String>,
    ) -> Self {
        let prefix = prefix.into();
        let trimmed = prefix.trim_matches('/');
        let prefix = if trimmed.is_empty() {
            String::new()
        } else {
            format!("{trimmed}/")
        };
        Self {
            client,
            bucket: bucket.into(),
            prefix,
            list_page_size: None,
        }
    }

    /// Sets how many versions one listing page asks for (the service default is 1000).
    pub fn with_list_page_size(mut self, page_size: i32) -> Self {
        self.list_page_size = Some(page_size);
        self
    }

    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix, empty or ending with `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn full_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn location(&self, key: &str) -> String {
        format!("s3://{}/{}{key}", self.bucket, self.prefix)
    }

    /// Maps a failure that is not specific to the operation to an unavailable error.
    fn unavailable(&self, failure: &SdkFailure, doing: &str) -> ObjectError {
        let code = failure.code().unwrap_or_default();
        let status = failure.status().unwrap_or_default();
        let cause = if code == "NoSuchBucket" {
            format!("S3 bucket {} does not exist", self.bucket)
        } else if code == "AccessDenied" || status == 403 {
            format!("S3 access denied: {}", failure.describe("S3"))
        } else if code == "SlowDown" || code.contains("Throttl") || status == 429 || status == 503 {
            format!("S3 throttled: {}", failure.describe("S3"))
        } else if status >= 500 {
            format!("S3 server error: {}", failure.describe("S3"))
        } else {
            failure.describe("S3")
        };
        ObjectError::Unavailable(format!("{cause} (while {doing})"))
    }

    /// True for answers that say the object or version does not exist. Only S3's own error
    /// codes count: a bare 404 (a proxy, a wrong endpoint) proves nothing about the data.
    fn is_missing(failure: &SdkFailure) -> bool {
        matches!(failure.code(), Some("NoSuchKey" | "NoSuchVersion"))
    }

    async fn put_new_impl(&self, key: &str, body: Bytes) -> Result<ObjectVersion, ObjectError> {
        // The rules of a new key on every store: a key this store writes is one the file
        // store could write too. Reads and deletes accept any valid key, so objects written
        // under an older key scheme stay reachable.
        validate_new_key(key)?;
        let size = body.len();
        // The body is not hashed for the request's signature (SigV4's payload hash, a
        // SHA-256 pass over the whole object before the first byte is sent): every object
        // Cairn writes is sealed (the coordinator's generations, plans and quarantined
        // states: AES-GCM, its tag checked at every read), and the body still carries the
        // SDK's checksum, which S3 verifies before it stores the object. The headers are
        // signed as before.
        let result = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .if_none_match("*")
            .body(ByteStream::from(body))
            .customize()
            .disable_payload_signing()
            .send()
            .await;
        match result {
            Ok(out) => match out.version_id() {
                Some(version_id) if !version_id.is_empty() && version_id != "null" => {
                    tracing::debug!(key, version_id, size, "stored S3 object");
                    Ok(ObjectVersion {
                        key: key.to_owned(),
                        version_id: version_id.to_owned(),
                    })
                }
                _ => Err(ObjectError::VersioningNotEnabled {
                    bucket: self.bucket.clone(),
                    status: "a write returned no version id".to_owned(),
                }),
            },
            Err(err) => {
                let failure = SdkFailure::from_sdk(&err);
                if failure.status() == Some(412) || failure.code() == Some("PreconditionFailed") {
                    Err(ObjectError::AlreadyExists {
                        key: key.to_owned(),
                    })
                } else if failure.code() == Some("ConditionalRequestConflict") {
                    Err(ObjectError::Unavailable(format!(
                        "S3 reported a concurrent conditional write (while writing {}); retry",
                        self.location(key)
                    )))
                } else {
                    Err(self.unavailable(&failure, &format!("writing {}", self.location(key))))
                }
            }
        }
    }

    async fn get_impl(&self, key: &str, version_id: &str) -> Result<Bytes, ObjectError> {
        validate_key(key)?;
        let doing = || format!("reading {} version {version_id}", self.location(key));
        let result = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .version_id(version_id)
            .send()
            .await;
        match result {
            Ok(mut out) => {
                // One buffer of the object's size, filled chunk by chunk: the object is in
                // memory once (collecting the chunks and then joining them holds it twice).
                let expected = out
                    .content_length()
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(0)
                    .min(MAX_PREALLOCATED_READ);
                let mut buffer = Vec::with_capacity(expected);
                loop {
                    match out.body.try_next().await {
                        Ok(Some(chunk)) => buffer.extend_from_slice(&chunk),
                        Ok(None) => break Ok(Bytes::from(buffer)),
                        Err(err) => {
                            break Err(ObjectError::Unavailable(format!(
                                "S3 read interrupted: {err} (while {})",
                                doing()
                            )));
                        }
                    }
                }
            }
            Err(err) => {
                let failure = SdkFailure::from_sdk(&err);
                if Self::is_missing(&failure) {
                    tracing::warn!(key, version_id, "S3 object version is missing");
                    Err(ObjectError::NotFound {
                        key: key.to_owned(),
                        version_id: version_id.to_owned(),
                    })
                } else {
                    Err(self.unavailable(&failure, &doing()))
                }
            }
        }
    }

    /// The length of one version as a `HEAD` answers it (`None` for another version).
    async fn head_len(&self, key: &str, version_id: &str) -> Result<Option<u64>, SdkFailure> {
        let out = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .version_id(version_id)
            .send()
            .await
            .map_err(|err| SdkFailure::from_sdk(&err))?;
        Ok(if out.version_id() == Some(version_id) {
            out.content_length().and_then(|n| u64::try_from(n).ok())
        } else {
            None
        })
    }

    async fn delete_impl(&self, key: &str, version_id: &str) -> Result<(), ObjectError> {
        validate_key(key)?;
        let result = self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .version_id(version_id)
            .send()
            .await;
        match result {
            Ok(_) => {
                tracing::debug!(key, version_id, "deleted S3 object version");
                Ok(())
            }
            Err(err) => {
                let failure = SdkFailure::from_sdk(&err);
                if Self::is_missing(&failure) {
                    Ok(())
                } else {
                    Err(self.unavailable(
                        &failure,
                        &format!("deleting {} version {version_id}", self.location(key)),
                    ))
                }
            }
        }
    }

    async fn list_impl(&self, prefix: &str) -> Result<Vec<ObjectVersion>, ObjectError> {
        let full_prefix = self.full_key(prefix);
        let mut versions = Vec::new();
        let mut key_marker: Option<String> = None;
        let mut version_marker: Option<String> = None;
        loop {
            let result = self
                .client
                .list_object_versions()
                .bucket(&self.bucket)
                .prefix(&full_prefix)
                .set_max_keys(self.list_page_size)
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take())
                .send()
                .await;
            let page = result.map_err(|err| {
                self.unavailable(
                    &SdkFailure::from_sdk(&err),
                    &format!("listing s3://{}/{full_prefix}", self.bucket),
                )
            })?;
            for version in page.versions() {
                let (Some(key), Some(version_id)) = (version.key(), version.version_id()) else {
                    continue;
                };
                let Some(relative) = key.strip_prefix(&self.prefix) else {
                    continue;
                };
                versions.push(ObjectVersion {
                    key: relative.to_owned(),
                    version_id: version_id.to_owned(),
                });
            }
            if page.is_truncated() != Some(true) {
                return Ok(versions);
            }
            key_marker = page.next_key_marker().map(str::to_owned);
            version_marker = page.next_version_id_marker().map(str::to_owned);
            if key_marker.is_none() && version_marker.is_none() {
                return Err(ObjectError::Unavailable(format!(
                    "S3 returned a truncated version listing without a continuation marker (while listing s3://{}/{full_prefix})",
                    self.bucket
                )));
            }
        }
    }

    async fn self_check_impl(&self) -> Result<(), ObjectError> {
        let result = self
            .client
            .get_bucket_versioning()
            .bucket(&self.bucket)
            .send()
            .await;
        match result {
            Ok(out) => match out.status() {
                Some(BucketVersioningStatus::Enabled) => Ok(()),
                Some(other) => Err(ObjectError::VersioningNotEnabled {
                    bucket: self.bucket.clone(),
                    status: other.as_str().to_owned(),
                }),
                None => Err(ObjectError::VersioningNotEnabled {
                    bucket: self.bucket.clone(),
                    status: "never enabled".to_owned(),
                }),
            },
            Err(err) => Err(self.unavailable(
                &SdkFailure::from_sdk(&err),
                &format!("checking versioning of bucket {}", self.bucket),
            )),
        }
    }
}

impl ObjectStore for S3ObjectStore {
    fn put_new<'a>(
        &'a self,
        key: &'a str,
        body: Bytes,
    ) -> BoxFuture<'a, Result<ObjectVersion, ObjectError>> {
        Box::pin(timed(
            S3_REQUEST_DURATION,
            "put",
            self.put_new_impl(key, body),
        ))
    }

    fn get<'a>(
        &'a self,
        key: &'a str,
        version_id: &'a str,
    ) -> BoxFuture<'a, Result<Bytes, ObjectError>> {
        Box::pin(timed(
            S3_REQUEST_DURATION,
            "get",
            self.get_impl(key, version_id),
        ))
    }

    fn confirm<'a>(&'a self, key: &'a str, version_id: &'a str, len: u64) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            if validate_key(key).is_err() {
                return false;
            }
            match timed(S3_REQUEST_DURATION, "head", self.head_len(key, version_id)).await {
                Ok(found) => found == Some(len),
                Err(failure) => {
                    // Nothing for the caller to handle: it reads the object instead, and
                    // that answer says what is wrong.
                    tracing::debug!(key, version_id, error = %failure.describe("S3"), "S3 HEAD did not confirm the object version");
                    false
                }
            }
        })
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        version_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ObjectError>> {
        Box::pin(timed(
            S3_REQUEST_DURATION,
            "delete",
            self.delete_impl(key, version_id),
        ))
    }

    fn list<'a>(
        &'a self,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ObjectVersion>, ObjectError>> {
        Box::pin(timed(S3_REQUEST_DURATION, "list", self.list_impl(prefix)))
    }

    fn self_check(&self) -> BoxFuture<'_, Result<(), ObjectError>> {
        Box::pin(timed(
            S3_REQUEST_DURATION,
            "self_check",
            self.self_check_impl(),
        ))
    }

    fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }
}
