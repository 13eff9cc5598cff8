//! The sealed object of each state's current generation, as this process last committed or
//! read it, so that the next GET of that generation does not fetch the object again: tofu
//! reads a state right after the write before it (an apply's plan, a verify after an apply,
//! the next run of a deployment). A stored version's bytes never change, so the bytes kept
//! for (key, version) are what a read of that version would return; the object store is
//! still asked, without the body, whether that version exists with that length
//! ([`cairn_storage::ObjectStore::confirm`]) before they are used, so a version deleted
//! outside Cairn is found and fences the state as before. What is kept is ciphertext: it is
//! opened, its GCM tag checked, on every read, and plaintext is never kept.
//!
//! Bounded by bytes (`CAIRN_STATE_CACHE_BYTES`, 0 turns it off); an object larger than an
//! eighth of the budget is not kept; the oldest entries go first. Nothing here decides
//! anything: a miss reads the object store as before.
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use bytes::Bytes;
use uuid::Uuid;

use super::read_ahead::CurrentObject;

/// One state's kept object.
struct Entry {
    object: CurrentObject,
    bytes: Bytes,
    /// Its place in the eviction order.
    stamp: u64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Uuid, Entry>,
    /// Each entry's stamp → its state, oldest first.
    order: BTreeMap<u64, Uuid>,
    bytes: usize,
    next_stamp: u64,
}

/// See the module documentation.
pub struct SealedCache {
    budget: usize,
    inner: Mutex<Inner>,
}

impl SealedCache {
    /// A cache of at most `budget` bytes of objects.
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The largest object kept.
    pub fn max_entry(&self) -> usize {
        self.budget / 8
    }

    /// `bytes` are the sealed object of `state_id`'s generation `object`, just committed or
    /// read and opened. An older generation never replaces a newer one; a newer one always
    /// replaces the state's entry (also when it is too large to be kept itself).
    pub fn keep(&self, state_id: Uuid, object: CurrentObject, bytes: Bytes) {
        let mut inner = lock(&self.inner);
        if let Some(kept) = inner.entries.get(&state_id) {
            if kept.object.generation > object.generation || kept.object == object {
                return;
            }
            inner.remove(state_id);
        }
        if self.budget == 0 || bytes.len() > self.max_entry() {
            return;
        }
        while inner.bytes + bytes.len() > self.budget {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            inner.remove(oldest);
        }
        let stamp = inner.next_stamp;
        inner.next_stamp += 1;
        inner.bytes += bytes.len();
        inner.order.insert(stamp, state_id);
        inner.entries.insert(
            state_id,
            Entry {
                object,
                bytes,
                stamp,
            },
        );
    }

    /// The bytes kept for exactly this generation's object of `state_id`.
    pub fn get(&self, state_id: Uuid, object: &CurrentObject) -> Option<Bytes> {
        let inner = lock(&self.inner);
        inner
            .entries
            .get(&state_id)
            .filter(|e| e.object == *object)
            .map(|e| e.bytes.clone())
    }

    /// Forgets what is kept for `state_id` (its object was found wrong or gone).
    pub fn forget(&self, state_id: Uuid) {
        lock(&self.inner).remove(state_id);
    }

    /// Bytes kept now.
    pub fn bytes(&self) -> usize {
        lock(&self.inner).bytes
    }
}

impl Inner {
    fn remove(&mut self, state_id: Uuid) {
        if let Some(e) = self.entries.remove(&state_id) {
            self.bytes -= e.bytes.len();
            self.order.remove(&e.stamp);
        }
    }
}

impl Default for SealedCache {
    fn default() -> Self {
        Self::new(DEFAULT_BUDGET)
    }
}

/// `CAIRN_STATE_CACHE_BYTES`' default: 64 MiB (objects up to 8 MiB kept).
pub const DEFAULT_BUDGET: usize = 64 * 1024 * 1024;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every change keeps `bytes` equal to the entries' sum before it returns and nothing in
    // between can panic, so a poisoned lock is used as is.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(generation: i64, version: &str) -> CurrentObject {
        CurrentObject {
            generation,
            object_key: format!("states/s/{generation}"),
            object_version: version.to_owned(),
        }
    }

    fn bytes(n: usize) -> Bytes {
        Bytes::from(vec![7_u8; n])
    }

    #[test]
    fn only_the_exact_object_is_served() {
        let cache = SealedCache::new(1024);
        let s = Uuid::new_v4();
        cache.keep(s, object(3, "v3"), bytes(10));
        assert_eq!(cache.get(s, &object(3, "v3")), Some(bytes(10)));
        assert_eq!(cache.get(s, &object(3, "other")), None, "another version");
        assert_eq!(cache.get(s, &object(4, "v3")), None, "another generation");
        assert_eq!(cache.get(Uuid::new_v4(), &object(3, "v3")), None);
    }

    #[test]
    fn an_older_generation_never_replaces_a_newer_one() {
        let cache = SealedCache::new(1024);
        let s = Uuid::new_v4();
        cache.keep(s, object(5, "v5"), bytes(10));
        cache.keep(s, object(4, "v4"), bytes(20));
        assert_eq!(cache.get(s, &object(5, "v5")), Some(bytes(10)));
        assert_eq!(cache.bytes(), 10);
        cache.keep(s, object(6, "v6"), bytes(30));
        assert_eq!(cache.get(s, &object(5, "v5")), None);
        assert_eq!(cache.get(s, &object(6, "v6")), Some(bytes(30)));
        assert_eq!(cache.bytes(), 30);
    }

    #[test]
    fn a_newer_generation_too_large_to_keep_still_drops_the_older_one() {
        let cache = SealedCache::new(800);
        let s = Uuid::new_v4();
        cache.keep(s, object(1, "v1"), bytes(100));
        cache.keep(s, object(2, "v2"), bytes(101));
        assert_eq!(cache.get(s, &object(1, "v1")), None);
        assert_eq!(cache.get(s, &object(2, "v2")), None);
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn it_stays_within_its_budget_dropping_the_oldest_first() {
        let cache = SealedCache::new(800);
        let states: Vec<Uuid> = (0..20).map(|_| Uuid::new_v4()).collect();
        for (i, s) in states.iter().enumerate() {
            cache.keep(*s, object(1, "v"), bytes(100));
            assert!(cache.bytes() <= 800, "after {i}: {}", cache.bytes());
            // Replacing a state's entry again and again leaves no stale weight behind.
            cache.keep(
                states[0],
                object(i64::try_from(i).unwrap() + 2, "v"),
                bytes(50),
            );
        }
        assert!(cache.bytes() <= 800);
        assert!(
            cache.get(states[19], &object(1, "v")).is_some(),
            "the newest is kept"
        );
        assert!(
            cache.get(states[1], &object(1, "v")).is_none(),
            "the oldest went"
        );
        let inner = lock(&cache.inner);
        assert_eq!(
            inner.bytes,
            inner.entries.values().map(|e| e.bytes.len()).sum::<usize>()
        );
    }

    #[test]
    fn a_zero_budget_keeps_nothing() {
        let cache = SealedCache::new(0);
        let s = Uuid::new_v4();
        cache.keep(s, object(1, "v"), bytes(1));
        assert_eq!(cache.get(s, &object(1, "v")), None);
        cache.keep(s, object(2, "v"), Bytes::new());
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn forget_drops_the_entry() {
        let cache = SealedCache::new(1024);
        let s = Uuid::new_v4();
        cache.keep(s, object(1, "v"), bytes(10));
        cache.forget(s);
        assert_eq!(cache.get(s, &object(1, "v")), None);
        assert_eq!(cache.bytes(), 0);
    }
}
