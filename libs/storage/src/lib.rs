//! Infrastructure edges of the state coordinator: object storage, key management, envelope
//! encryption and the digests of request bodies.
//!
//! Every error type here answers one question for the caller through `is_damage()`:
//! does the error *prove* that stored data is broken (the coordinator fences the state), or
//! is it a transient or environmental problem (reported as unavailable, never a fence)?
//! Errors and logs never contain payload bytes or key material. [`metrics`]: the latency of
//! every S3 and KMS call.

pub mod aws;
pub mod digests;
pub mod envelope;
pub mod keys;
pub mod metrics;
pub mod object_store;

use std::future::Future;
use std::pin::Pin;

/// The boxed future returned by the object-safe traits of this crate.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub use digests::md5;
pub use envelope::{
    EnvelopeError, NONCE_BYTES, Sealed, Sha256Stream, aad_for, new_nonce, open, open_in_place,
    seal, seal_in_place, sha256_hex, verify_sha256,
};
pub use keys::{
    DataKey, DataKeyCache, EncryptionContext, KeyError, KeyManager, KmsKeyManager, LocalKeyFile,
    SecretKey, parse_key_manager,
};
pub use object_store::{
    FileObjectStore, ObjectError, ObjectStore, ObjectVersion, S3ObjectStore,
    parse_object_store_url, validate_key, validate_new_key,
};
