//! The data keys that seal runs' root configs. ARCHITECTURE.md §4 asks for one data key per
//! state *generation*; a run's root config is not a generation, and asking the key manager
//! for a fresh key on every `RegisterRun` put a KMS round trip (~30–45 ms on moto) between
//! every upstream apply and its dependent's run. Instead one config-sealing key per state
//! (its encryption context names the tenant and the state) is reused for a bounded time and a
//! bounded number of configs, then replaced by a fresh one:
//!
//! - a key is only ever handed to the (tenant, state) it was generated for, so a sealed
//!   config still opens only under that state's encryption context;
//! - every sealed config stores the wrapped key next to it, as before, so opening is
//!   unchanged (and does not care whether the key was shared);
//! - each seal draws a fresh random nonce and binds the run id as AAD (`run-config` + run
//!   id), so configs sealed under one key cannot be swapped between runs, and the number of
//!   seals per key ([`DEFAULT_MAX_USES`]) stays many orders of magnitude below AES-GCM's
//!   random-nonce bound;
//! - the plaintext key lives in memory at most [`DEFAULT_MAX_AGE`] (zeroed on drop, as every
//!   [`SecretKey`] is), like the unwrapped keys of [`cairn_storage::DataKeyCache`].
//!
//! A new state's first key is asked for when the state is created ([`ConfigKeys::prefetch`]):
//! its first run is registered right after (the workflow creates a resource's state when it
//! renders the resource's config), and waits only for what is left of that call. Two
//! registrations that find no key share one key manager call.
//!
//! State generations, plans, masked plans and quarantined states still get a fresh key each.
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_storage::{DataKey, SecretKey};
use tokio::sync::OnceCell;
use uuid::Uuid;

/// How long one config-sealing key is used.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(300);
/// How many root configs one key seals at most.
pub const DEFAULT_MAX_USES: u32 = 256;
/// How many states keep a key at once.
pub const DEFAULT_CAPACITY: usize = 4096;

/// A key to seal one root config with: the plaintext (a copy, zeroed on drop) and what is
/// stored next to the ciphertext.
pub struct ConfigKey {
    pub key_id: String,
    pub plaintext: SecretKey,
    pub wrapped: Vec<u8>,
}

impl From<&DataKey> for ConfigKey {
    fn from(k: &DataKey) -> Self {
        Self {
            key_id: k.key_id.clone(),
            plaintext: k.plaintext.clone(),
            wrapped: k.wrapped.clone(),
        }
    }
}

/// A state's key: being generated (the cell empty) or ready.
pub type KeySlot = Arc<OnceCell<DataKey>>;

struct Entry {
    slot: KeySlot,
    made: Instant,
    uses: u32,
}

impl Entry {
    fn usable(&self, max_age: Duration, max_uses: u32) -> bool {
        self.uses < max_uses && self.made.elapsed() < max_age
    }
}

/// One config-sealing key per (tenant, state), each used at most `max_uses` times and for
/// at most `max_age` (counted from when it was asked for); at most `capacity` states at once.
pub struct ConfigKeys {
    max_age: Duration,
    max_uses: u32,
    capacity: usize,
    keys: Mutex<HashMap<(Uuid, Uuid), Entry>>,
}

impl ConfigKeys {
    /// `max_uses <= 1` or `capacity == 0` turns reuse off (every config gets a fresh key).
    pub fn new(max_age: Duration, max_uses: u32, capacity: usize) -> Self {
        Self {
            max_age,
            max_uses,
            capacity,
            keys: Mutex::new(HashMap::new()),
        }
    }

    fn reuse(&self) -> bool {
        self.max_uses > 1 && self.capacity > 0
    }

    /// A key for one more root config of the state: its current key (one more use), else
    /// one `generate` makes (it becomes the current key). A failed `generate` is not kept:
    /// the next call tries again.
    pub async fn key<E, F, Fut>(
        &self,
        tenant_id: Uuid,
        state_id: Uuid,
        generate: F,
    ) -> Result<ConfigKey, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<DataKey, E>>,
    {
        let slot = self.slot(tenant_id, state_id);
        let key = slot.get_or_try_init(generate).await?;
        Ok(ConfigKey::from(key))
    }

    /// A new state's key, to be generated now (by the caller, in the background) when the
    /// state has none: the slot to fill, or `None`.
    pub fn prefetch(&self, tenant_id: Uuid, state_id: Uuid) -> Option<KeySlot> {
        if !self.reuse() {
            return None;
        }
        let mut keys = self.lock();
        if keys
            .get(&(tenant_id, state_id))
            .is_some_and(|e| e.usable(self.max_age, self.max_uses))
        {
            return None;
        }
        self.insert(&mut keys, tenant_id, state_id, 0)
    }

    /// The slot one more config is sealed from: the current one when within bounds, else a
    /// new one (kept, unless reuse is off or there is no room).
    fn slot(&self, tenant_id: Uuid, state_id: Uuid) -> KeySlot {
        if !self.reuse() {
            return KeySlot::default();
        }
        let mut keys = self.lock();
        if let Some(e) = keys.get_mut(&(tenant_id, state_id))
            && e.usable(self.max_age, self.max_uses)
        {
            e.uses += 1;
            return e.slot.clone();
        }
        self.insert(&mut keys, tenant_id, state_id, 1)
            .unwrap_or_default()
    }

    fn insert(
        &self,
        keys: &mut HashMap<(Uuid, Uuid), Entry>,
        tenant_id: Uuid,
        state_id: Uuid,
        uses: u32,
    ) -> Option<KeySlot> {
        let id = (tenant_id, state_id);
        if keys.len() >= self.capacity && !keys.contains_key(&id) {
            let (max_age, max_uses) = (self.max_age, self.max_uses);
            keys.retain(|_, e| e.usable(max_age, max_uses));
        }
        if keys.len() >= self.capacity && !keys.contains_key(&id) {
            return None;
        }
        let slot = KeySlot::default();
        keys.insert(
            id,
            Entry {
                slot: slot.clone(),
                made: Instant::now(),
                uses,
            },
        );
        Some(slot)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Uuid, Uuid), Entry>> {
        // Every operation is one lookup, insert or removal: a panic while holding the lock
        // cannot leave the map inconsistent.
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Default for ConfigKeys {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_AGE, DEFAULT_MAX_USES, DEFAULT_CAPACITY)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicU8, Ordering};

    use super::*;

    /// Generates k1, k2, … and counts them.
    #[derive(Default)]
    struct Maker(AtomicU8);

    impl Maker {
        async fn make(&self) -> Result<DataKey, Infallible> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(DataKey {
                key_id: format!("k{n}"),
                plaintext: SecretKey::from_bytes([n; 32]),
                wrapped: vec![n],
            })
        }

        fn made(&self) -> u8 {
            self.0.load(Ordering::SeqCst)
        }
    }

    async fn key_id(keys: &ConfigKeys, maker: &Maker, t: Uuid, s: Uuid) -> String {
        keys.key(t, s, || maker.make()).await.unwrap().key_id
    }

    #[tokio::test]
    async fn a_key_is_reused_by_its_own_state_only() {
        let (keys, maker) = (ConfigKeys::default(), Maker::default());
        let (t, a, b) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let first = keys.key(t, a, || maker.make()).await.unwrap();
        let again = keys.key(t, a, || maker.make()).await.unwrap();
        assert_eq!(
            (again.key_id.as_str(), &again.wrapped),
            ("k1", &first.wrapped)
        );
        assert_eq!(again.plaintext, first.plaintext);
        assert_eq!(
            key_id(&keys, &maker, t, b).await,
            "k2",
            "another state never gets it"
        );
        assert_eq!(
            key_id(&keys, &maker, Uuid::new_v4(), a).await,
            "k3",
            "nor the same state id under another tenant"
        );
        assert_eq!(maker.made(), 3);
    }

    #[tokio::test]
    async fn a_key_seals_at_most_max_uses_configs() {
        let (keys, maker) = (
            ConfigKeys::new(Duration::from_secs(60), 3, 8),
            Maker::default(),
        );
        let (t, a) = (Uuid::new_v4(), Uuid::new_v4());
        for _ in 0..3 {
            assert_eq!(key_id(&keys, &maker, t, a).await, "k1");
        }
        assert_eq!(
            key_id(&keys, &maker, t, a).await,
            "k2",
            "the fourth needs a new key"
        );
        assert_eq!(maker.made(), 2);
    }

    #[tokio::test]
    async fn an_old_key_is_not_reused() {
        let (keys, maker) = (ConfigKeys::new(Duration::ZERO, 100, 8), Maker::default());
        let (t, a) = (Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(key_id(&keys, &maker, t, a).await, "k1");
        assert_eq!(key_id(&keys, &maker, t, a).await, "k2");
        assert!(
            keys.prefetch(t, a).is_some(),
            "nor counted as a current key"
        );
    }

    #[tokio::test]
    async fn reuse_off_and_a_full_cache_keep_nothing() {
        let (off, maker) = (
            ConfigKeys::new(Duration::from_secs(60), 1, 8),
            Maker::default(),
        );
        let (t, a, b) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(key_id(&off, &maker, t, a).await, "k1");
        assert_eq!(key_id(&off, &maker, t, a).await, "k2");
        assert!(off.prefetch(t, b).is_none());

        let (full, maker) = (
            ConfigKeys::new(Duration::from_secs(60), 10, 1),
            Maker::default(),
        );
        assert_eq!(key_id(&full, &maker, t, a).await, "k1");
        assert_eq!(key_id(&full, &maker, t, b).await, "k2");
        assert_eq!(key_id(&full, &maker, t, b).await, "k3", "no room: not kept");
        assert_eq!(key_id(&full, &maker, t, a).await, "k1");
        assert_eq!(full.len(), 1);
    }

    #[tokio::test]
    async fn a_prefetched_key_is_the_first_use_and_a_failed_one_is_asked_again() {
        let (keys, maker) = (ConfigKeys::default(), Maker::default());
        let (t, a, b) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let slot = keys.prefetch(t, a).unwrap();
        assert!(
            keys.prefetch(t, a).is_none(),
            "one key manager call per state"
        );
        slot.get_or_try_init(|| maker.make()).await.unwrap();
        assert_eq!(key_id(&keys, &maker, t, a).await, "k1");
        assert_eq!(maker.made(), 1);

        let failed = keys.prefetch(t, b).unwrap();
        let err = failed
            .get_or_try_init(|| async { Err::<DataKey, &str>("kms down") })
            .await;
        assert!(err.is_err());
        assert_eq!(key_id(&keys, &maker, t, b).await, "k2");
    }
}
