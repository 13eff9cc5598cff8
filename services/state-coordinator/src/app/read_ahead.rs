//! What a backend request may start before its one database read has answered: the run
//! token's state as this process last authenticated it, and each state's current object as
//! this process last committed or read it. A GET then fetches the object while the database
//! is asked which one it must be, and a POST asks the key manager for its data key while the
//! write is checked. Nothing here decides anything: the database read stays the authority,
//! a fetched object that is not the current generation's is thrown away and the right one
//! fetched, and a data key asked for a write that is refused waits for the state's next
//! write ([`super::spare_keys`]). Only a token that authenticated for the state before (so
//! not a caller without one) starts such work.
use std::collections::HashMap;
use std::sync::Mutex;

use uuid::Uuid;

use crate::store::generations::GenerationRow;

/// A state's current object as last seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentObject {
    pub generation: i64,
    pub object_key: String,
    pub object_version: String,
}

impl CurrentObject {
    pub fn of(g: &GenerationRow) -> Self {
        Self {
            generation: g.generation,
            object_key: g.object_key.clone(),
            object_version: g.object_version.clone(),
        }
    }

    /// Whether `g` is this object.
    pub fn is(&self, g: &GenerationRow) -> bool {
        self.generation == g.generation
            && self.object_key == g.object_key
            && self.object_version == g.object_version
    }
}

/// Bounded maps: when one is full it starts over (both only ever save work).
pub struct ReadAhead {
    capacity: usize,
    /// token hash → (state id, tenant id)
    tokens: Mutex<HashMap<String, (Uuid, Uuid)>>,
    current: Mutex<HashMap<Uuid, CurrentObject>>,
}

impl ReadAhead {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            tokens: Mutex::new(HashMap::new()),
            current: Mutex::new(HashMap::new()),
        }
    }

    /// `token_hash` authenticated for `state_id` (of `tenant_id`).
    pub fn authenticated(&self, token_hash: &str, state_id: Uuid, tenant_id: Uuid) {
        let mut tokens = lock(&self.tokens);
        if tokens.get(token_hash) == Some(&(state_id, tenant_id)) {
            return;
        }
        if tokens.len() >= self.capacity {
            tokens.clear();
        }
        tokens.insert(token_hash.to_owned(), (state_id, tenant_id));
    }

    /// The tenant of `state_id` when `token_hash` authenticated for it before.
    pub fn known(&self, token_hash: &str, state_id: Uuid) -> Option<Uuid> {
        match lock(&self.tokens).get(token_hash) {
            Some((state, tenant)) if *state == state_id => Some(*tenant),
            _ => None,
        }
    }

    /// `object` is `state_id`'s current generation (committed or read just now); an older
    /// generation never replaces a newer one.
    pub fn current_is(&self, state_id: Uuid, object: CurrentObject) {
        let mut current = lock(&self.current);
        if current
            .get(&state_id)
            .is_some_and(|seen| seen.generation > object.generation)
        {
            return;
        }
        if current.len() >= self.capacity && !current.contains_key(&state_id) {
            current.clear();
        }
        current.insert(state_id, object);
    }

    /// The object a GET of `state_id` with `token_hash` may fetch ahead of its read.
    pub fn guess(&self, token_hash: &str, state_id: Uuid) -> Option<CurrentObject> {
        self.known(token_hash, state_id)?;
        lock(&self.current).get(&state_id).cloned()
    }
}

impl Default for ReadAhead {
    fn default() -> Self {
        Self::new(16_384)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each operation is one insert, lookup or clear: a panic elsewhere cannot leave a map
    // half-changed, so a poisoned lock is used as is.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(generation: i64) -> CurrentObject {
        CurrentObject {
            generation,
            object_key: format!("k{generation}"),
            object_version: "v".to_owned(),
        }
    }

    #[test]
    fn only_a_token_seen_for_the_state_gets_a_guess() {
        let ahead = ReadAhead::default();
        let (s, other) = (Uuid::new_v4(), Uuid::new_v4());
        ahead.current_is(s, object(3));
        assert_eq!(ahead.guess("t", s), None, "an unknown token starts nothing");
        ahead.authenticated("t", other, Uuid::nil());
        assert_eq!(
            ahead.guess("t", s),
            None,
            "a token of another state neither"
        );
        ahead.authenticated("t", s, Uuid::nil());
        assert_eq!(ahead.guess("t", s), Some(object(3)));
    }

    #[test]
    fn an_older_generation_never_replaces_a_newer_one() {
        let ahead = ReadAhead::default();
        let s = Uuid::new_v4();
        ahead.authenticated("t", s, Uuid::nil());
        ahead.current_is(s, object(5));
        ahead.current_is(s, object(4));
        assert_eq!(ahead.guess("t", s), Some(object(5)));
        ahead.current_is(s, object(6));
        assert_eq!(ahead.guess("t", s), Some(object(6)));
    }

    #[test]
    fn the_maps_stay_bounded() {
        let ahead = ReadAhead::new(4);
        for _ in 0..10 {
            let s = Uuid::new_v4();
            ahead.authenticated(&s.to_string(), s, Uuid::nil());
            ahead.current_is(s, object(1));
        }
        assert!(lock(&ahead.tokens).len() <= 4);
        assert!(lock(&ahead.current).len() <= 4);
    }
}
