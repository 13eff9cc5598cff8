//! Object storage for encrypted state payloads: a versioned, never-overwriting store behind
//! one trait, with an S3 implementation and a local directory implementation.

mod file;
mod key;
mod s3;

use std::sync::Arc;

use bytes::Bytes;

use crate::BoxFuture;
use crate::aws::AwsSettings;

pub use file::FileObjectStore;
pub use key::{validate_key, validate_new_key};
pub use s3::S3ObjectStore;

/// One stored version of one object. `key` is relative to the store's prefix.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectVersion {
    pub key: String,
    pub version_id: String,
}

/// Errors of an [`ObjectStore`].
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// `put_new` found an existing object under the key; nothing was written.
    #[error("object {key} already exists")]
    AlreadyExists { key: String },
    /// The object or the requested version does not exist. Proof of damage.
    #[error("object {key} version {version_id} does not exist")]
    NotFound { key: String, version_id: String },
    /// The key is not acceptable to the store (empty, `..`, leading `/`, a component of 32
    /// hex digits in a new key, …): a bug of the caller's key scheme, never transient.
    #[error("invalid object key {key:?}: {reason}")]
    InvalidKey { key: String, reason: &'static str },
    /// The S3 bucket does not keep versions; the store refuses to work without them.
    #[error(
        "S3 bucket {bucket} does not have versioning enabled (status: {status}); enable bucket versioning"
    )]
    VersioningNotEnabled { bucket: String, status: String },
    /// Transient or environmental trouble; the text names the cause
    /// (e.g. `S3 unreachable: connection refused`, `S3 access denied: …`).
    #[error("{0}")]
    Unavailable(String),
    /// The store's configuration cannot be used (bad URL, …).
    #[error("invalid object store setting: {0}")]
    Config(String),
}

impl ObjectError {
    /// True when the error proves that stored data is broken (missing object or version).
    pub fn is_damage(&self) -> bool {
        match self {
            ObjectError::NotFound { .. } => true,
            ObjectError::AlreadyExists { .. }
            | ObjectError::InvalidKey { .. }
            | ObjectError::VersioningNotEnabled { .. }
            | ObjectError::Unavailable(_)
            | ObjectError::Config(_) => false,
        }
    }
}

/// A versioned object store that never overwrites.
///
/// Keys are `/`-separated relative paths (see [`validate_key`]; a key written anew also
/// obeys [`validate_new_key`] on every store). Implementations are used as
/// `Arc<dyn ObjectStore>`.
pub trait ObjectStore: Send + Sync {
    /// Stores `body` under `key` unless an object already exists there
    /// ([`ObjectError::AlreadyExists`]); returns the new version.
    fn put_new<'a>(
        &'a self,
        key: &'a str,
        body: Bytes,
    ) -> BoxFuture<'a, Result<ObjectVersion, ObjectError>>;

    /// Reads one version; a missing object or version is [`ObjectError::NotFound`].
    fn get<'a>(
        &'a self,
        key: &'a str,
        version_id: &'a str,
    ) -> BoxFuture<'a, Result<Bytes, ObjectError>>;

    /// Whether the store answers, without sending the object, that this version exists
    /// with exactly `len` bytes (S3: a `HEAD` of the version). Only a `true` means
    /// anything: any other answer (missing, another length, an error) is `false`, and the
    /// caller that wanted the bytes reads them with [`ObjectStore::get`], which classifies
    /// what is wrong. A version's bytes never change, so a caller holding the bytes it
    /// wrote or read under that version may use them after a `true`.
    fn confirm<'a>(&'a self, key: &'a str, version_id: &'a str, len: u64) -> BoxFuture<'a, bool>;

    /// Deletes one version permanently; deleting a missing version succeeds.
    fn delete<'a>(
        &'a self,
        key: &'a str,
        version_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ObjectError>>;

    /// Every stored version whose key starts with `prefix` (`""` lists everything).
    fn list<'a>(
        &'a self,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ObjectVersion>, ObjectError>>;

    /// Start-up check: the store exists, keeps versions (S3) and is writable (directory).
    fn self_check(&self) -> BoxFuture<'_, Result<(), ObjectError>>;

    /// Removes what a writer killed mid-write left behind and that is older than
    /// `older_than` (no live writer takes that long); returns how many were removed. Never
    /// touches a stored version. The file store's partial `.tmp-*` files are such
    /// leftovers; an S3 put is atomic, so by default there are none.
    fn sweep_partial(
        &self,
        older_than: std::time::Duration,
    ) -> BoxFuture<'_, Result<usize, ObjectError>> {
        let _ = older_than;
        Box::pin(async { Ok(0) })
    }

    /// A human description for logs, e.g. `s3://bucket/prefix/` or `file:///var/lib/cairn`.
    fn describe(&self) -> String;
}

/// Builds a store from a URL: `s3://bucket[/prefix]` (credentials and region from the
/// environment; `s3_endpoint` overrides the endpoint and switches to path-style) or
/// `file:///absolute/dir`.
pub async fn parse_object_store_url(
    url: &str,
    s3_endpoint: Option<String>,
) -> Result<Arc<dyn ObjectStore>, ObjectError> {
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(ObjectError::Config(format!(
                "object store URL {url:?} names no bucket (expected s3://bucket/prefix)"
            )));
        }
        let store = S3ObjectStore::with_settings(
            &AwsSettings::from_env(s3_endpoint),
            bucket.to_owned(),
            prefix.to_owned(),
        )
        .await;
        Ok(Arc::new(store))
    } else if let Some(path) = url.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(ObjectError::Config(format!(
                "object store URL {url:?} must name an absolute directory (file:///dir)"
            )));
        }
        Ok(Arc::new(FileObjectStore::new(path)))
    } else {
        Err(ObjectError::Config(format!(
            "object store URL {url:?} must start with s3:// or file://"
        )))
    }
}
