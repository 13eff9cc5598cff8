//! A bounded, aged cache of unwrapped data keys, so repeated reads of a generation do not
//! call KMS each time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{EncryptionContext, KeyError, KeyManager, SecretKey};
use crate::envelope::sha256;

struct CacheEntry {
    key: SecretKey,
    inserted: Instant,
}

/// Unwrapped data keys, keyed by the sha256 of (key id, wrapped key, encryption context),
/// each kept at most `max_age`, at most `max_entries` of them (the oldest leaves first).
/// Errors are never cached.
pub struct DataKeyCache {
    max_entries: usize,
    max_age: Duration,
    entries: Mutex<HashMap<[u8; 32], CacheEntry>>,
    unwrap_calls: AtomicU64,
    hits: AtomicU64,
}

impl std::fmt::Debug for DataKeyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataKeyCache")
            .field("max_entries", &self.max_entries)
            .field("max_age", &self.max_age)
            .field("len", &self.len())
            .finish()
    }
}

/// Length-prefixed, so no two different inputs share an encoding.
fn cache_key(key_id: &str, wrapped: &[u8], ctx: &EncryptionContext) -> [u8; 32] {
    let ctx = ctx.canonical_bytes();
    let mut input = Vec::with_capacity(16 + key_id.len() + wrapped.len() + ctx.len());
    for part in [key_id.as_bytes(), wrapped] {
        input.extend_from_slice(&(part.len() as u64).to_be_bytes());
        input.extend_from_slice(part);
    }
    input.extend_from_slice(&ctx);
    sha256(&input)
}

impl DataKeyCache {
    /// A cache of at most `max_entries` keys, each kept at most `max_age`.
    /// `max_entries == 0` disables caching.
    pub fn new(max_entries: usize, max_age: Duration) -> Self {
        Self {
            max_entries,
            max_age,
            entries: Mutex::new(HashMap::new()),
            unwrap_calls: AtomicU64::new(0),
            hits: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], CacheEntry>> {
        // The map is only touched by whole-entry inserts and removals, so a panic elsewhere
        // cannot leave it inconsistent.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cached key, or the key manager's answer (cached on success).
    pub async fn get_or_unwrap(
        &self,
        manager: &dyn KeyManager,
        key_id: &str,
        wrapped: &[u8],
        ctx: &EncryptionContext,
    ) -> Result<SecretKey, KeyError> {
        let id = cache_key(key_id, wrapped, ctx);
        {
            let mut entries = self.lock();
            match entries.get(&id) {
                Some(entry) if entry.inserted.elapsed() < self.max_age => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(entry.key.clone());
                }
                Some(_) => {
                    entries.remove(&id);
                }
                None => {}
            }
        }
        self.unwrap_calls.fetch_add(1, Ordering::Relaxed);
        let key = manager.unwrap_data_key(key_id, wrapped, ctx).await?;
        self.insert(id, key.clone());
        Ok(key)
    }

    fn insert(&self, id: [u8; 32], key: SecretKey) {
        if self.max_entries == 0 {
            return;
        }
        let mut entries = self.lock();
        let max_age = self.max_age;
        entries.retain(|_, entry| entry.inserted.elapsed() < max_age);
        while entries.len() >= self.max_entries && !entries.contains_key(&id) {
            let oldest = entries
                .iter()
                .min_by_key(|(_, entry)| entry.inserted)
                .map(|(oldest, _)| *oldest);
            match oldest {
                Some(oldest) => entries.remove(&oldest),
                None => break,
            };
        }
        entries.insert(
            id,
            CacheEntry {
                key,
                inserted: Instant::now(),
            },
        );
    }

    /// Remembers a data key the caller just generated (it already holds the plaintext), so
    /// the first read of what it sealed needs no key-manager call.
    pub fn remember(&self, key_id: &str, wrapped: &[u8], ctx: &EncryptionContext, key: &SecretKey) {
        self.insert(cache_key(key_id, wrapped, ctx), key.clone());
    }

    /// How many times the cache asked the key manager to unwrap (cache misses).
    pub fn unwrap_calls(&self) -> u64 {
        self.unwrap_calls.load(Ordering::Relaxed)
    }

    /// How many lookups were answered from the cache.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Entries currently held (expired ones included until they are next touched).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every cached key.
    pub fn clear(&self) {
        self.lock().clear();
    }
}
