//! Data keys that were generated for a write and then not used: a POST asks the key manager
//! for its data key while it still checks and hashes the body (so the KMS round trip is off
//! the critical path), and a write refused after that (stale, a conflict, a re-send of a
//! write already committed) leaves its key unused. The key waits here for the same state's
//! next write instead of being thrown away, so there is still one key-manager call per
//! written generation, and a key still seals one generation only: taking it removes it.
//! The encryption context of a key names its tenant and state, so a key is only ever kept
//! for, and taken by, the state it was made for.
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cairn_storage::DataKey;
use uuid::Uuid;

/// At most one spare key per state, at most `capacity` states, each key kept `max_age`.
pub struct SpareKeys {
    capacity: usize,
    max_age: Duration,
    keys: Mutex<HashMap<Uuid, (DataKey, Instant)>>,
}

impl SpareKeys {
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Self {
            capacity,
            max_age,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// The spare key of `state_id`, if one is young enough; it is no longer kept.
    pub fn take(&self, state_id: Uuid) -> Option<DataKey> {
        let (key, at) = self.lock().remove(&state_id)?;
        (at.elapsed() < self.max_age).then_some(key)
    }

    /// Keeps an unused key for `state_id`'s next write. When the state already has one, or
    /// no room is left after dropping the expired ones, the key is dropped (a later write
    /// asks the key manager again).
    pub fn keep(&self, state_id: Uuid, key: DataKey) {
        let mut keys = self.lock();
        if keys.len() >= self.capacity {
            let max_age = self.max_age;
            keys.retain(|_, (_, at)| at.elapsed() < max_age);
        }
        if keys.len() < self.capacity {
            keys.entry(state_id).or_insert((key, Instant::now()));
        }
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, (DataKey, Instant)>> {
        // A panic while holding the lock cannot leave the map inconsistent (each operation
        // is one insert or remove), so a poisoned lock is used as is.
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Default for SpareKeys {
    fn default() -> Self {
        Self::new(4096, Duration::from_secs(300))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use cairn_storage::SecretKey;

    use super::*;

    fn key(n: u8) -> DataKey {
        DataKey {
            key_id: format!("k{n}"),
            plaintext: SecretKey::from_bytes([n; 32]),
            wrapped: vec![n],
        }
    }

    #[test]
    fn a_kept_key_is_taken_once_and_only_by_its_state() {
        let spare = SpareKeys::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        spare.keep(a, key(1));
        assert!(spare.take(b).is_none());
        assert_eq!(spare.take(a).unwrap().key_id, "k1");
        assert!(spare.take(a).is_none(), "a key seals one generation only");
    }

    #[test]
    fn the_first_key_of_a_state_stays_and_the_capacity_holds() {
        let spare = SpareKeys::new(2, Duration::from_secs(60));
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        spare.keep(a, key(1));
        spare.keep(a, key(2));
        spare.keep(b, key(3));
        spare.keep(c, key(4));
        assert_eq!(spare.len(), 2);
        assert_eq!(spare.take(a).unwrap().key_id, "k1");
        assert!(spare.take(c).is_none());
    }

    #[test]
    fn an_old_key_is_never_handed_out() {
        let spare = SpareKeys::new(8, Duration::ZERO);
        let a = Uuid::new_v4();
        spare.keep(a, key(1));
        assert!(spare.take(a).is_none());
    }
}
