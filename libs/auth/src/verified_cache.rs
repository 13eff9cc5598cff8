//! A bounded cache of access tokens whose signature and claims were already verified, so a
//! caller that sends the same token on every request pays for the Ed25519 check once.
//!
//! Keys are the SHA-256 of the token's exact bytes: a token that differs in one byte is a
//! different key and goes the cold path. An entry is served only while the time rules of
//! the cold path ([`Claims::check_time`], `exp` plus [`CLOCK_LEEWAY`](crate::CLOCK_LEEWAY))
//! still hold at the moment of the request; the caller also re-checks that the entry's
//! `kid` is in its key set. The cache lives inside one [`KeySet`](crate::KeySet), so a
//! different key set never sees its entries.
//!
//! Bounded: at most `capacity` entries over [`SHARDS`] shards, each a read-write lock
//! around a map and an index by expiry. A hit takes one shard's read lock and touches
//! nothing else; an insert (only after a successful cold verification) first drops the
//! shard's expired entries, then, if the shard is still full, the entries that expire
//! soonest. Every step is O(log n) in the shard's size; nothing scans the cache.

use std::collections::{BTreeSet, HashMap};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use aws_lc_rs::digest::{SHA256, digest};
use uuid::Uuid;

use crate::claims::{CLOCK_LEEWAY, Claims};
use crate::principal::Principal;

/// How many tokens a key set remembers unless told otherwise
/// ([`KeySet::with_token_cache`](crate::KeySet::with_token_cache)).
pub const DEFAULT_TOKEN_CACHE_CAPACITY: usize = 10_000;

/// Locks the cache is split over (fewer when the capacity is smaller).
const SHARDS: usize = 16;

/// The SHA-256 of a token's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct TokenDigest([u8; 32]);

impl TokenDigest {
    pub(crate) fn of(token: &str) -> Self {
        let d = digest(&SHA256, token.as_bytes());
        TokenDigest(d.as_ref().try_into().expect("a SHA-256 digest is 32 bytes"))
    }

    fn shard(&self, shards: usize) -> usize {
        let mut first = [0u8; 8];
        first.copy_from_slice(&self.0[..8]);
        // The digest is uniform, so its first bytes spread tokens evenly over the shards.
        (u64::from_le_bytes(first) % shards as u64) as usize
    }
}

/// What the cold path established about a token: its claims, the tenant they name and the
/// key that signed it.
#[derive(Debug, Clone)]
pub(crate) struct VerifiedToken {
    claims: Claims,
    tenant_id: Option<Uuid>,
    kid: String,
}

impl VerifiedToken {
    pub(crate) fn new(claims: Claims, tenant_id: Option<Uuid>, kid: String) -> Self {
        VerifiedToken {
            claims,
            tenant_id,
            kid,
        }
    }

    pub(crate) fn claims(&self) -> &Claims {
        &self.claims
    }

    #[cfg(test)]
    pub(crate) fn kid(&self) -> &str {
        &self.kid
    }

    pub(crate) fn principal(&self) -> Principal {
        Principal::from_verified(&self.claims, self.tenant_id)
    }

    /// The last second (Unix time) at which the cold path still accepts the token.
    fn last_valid_second(&self) -> i64 {
        let leeway = i64::try_from(CLOCK_LEEWAY.as_secs()).unwrap_or(i64::MAX);
        self.claims.exp.saturating_add(leeway)
    }
}

/// The verified-token cache of one key set. Capacity 0 disables it.
pub(crate) struct VerifiedCache {
    shards: Box<[RwLock<Shard>]>,
    shard_capacity: usize,
}

#[derive(Default)]
struct Shard {
    entries: HashMap<TokenDigest, VerifiedToken>,
    /// (last valid second, key) of every entry: the expired and the soonest-expiring first.
    by_expiry: BTreeSet<(i64, TokenDigest)>,
}

impl VerifiedCache {
    /// A cache of at most `capacity` tokens; 0 caches nothing.
    pub(crate) fn new(capacity: usize) -> Self {
        let shards = SHARDS.min(capacity);
        VerifiedCache {
            shards: (0..shards).map(|_| RwLock::default()).collect(),
            shard_capacity: capacity.checked_div(shards).unwrap_or(0),
        }
    }

    pub(crate) fn is_enabled(&self) -> bool {
        !self.shards.is_empty()
    }

    /// The most entries it holds at once (at most the capacity asked for).
    pub(crate) fn capacity(&self) -> usize {
        self.shard_capacity * self.shards.len()
    }

    /// Entries held now, expired ones not yet dropped included.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| read(s).entries.len()).sum()
    }

    /// Applies `read_entry` to the entry of `key` if there is one, the token's time rules
    /// hold at `now` and `trusts` its signing key. Any other entry of `key` is removed and
    /// reported as a miss, so the caller's cold path gives the answer (and the error).
    pub(crate) fn get<R>(
        &self,
        key: &TokenDigest,
        now: i64,
        trusts: impl Fn(&str) -> bool,
        read_entry: impl FnOnce(&VerifiedToken) -> R,
    ) -> Option<R> {
        let shard = self.shard_of(key)?;
        let usable =
            |entry: &VerifiedToken| entry.claims.check_time(now).is_ok() && trusts(&entry.kid);
        {
            let guard = read(shard);
            let entry = guard.entries.get(key)?;
            if usable(entry) {
                return Some(read_entry(entry));
            }
        }
        let mut guard = write(shard);
        // Looked up again: another request may have replaced it between the two locks.
        if guard.entries.get(key).is_some_and(|entry| !usable(entry)) {
            guard.remove(key);
        }
        None
    }

    /// Remembers a token the cold path accepted at `now`.
    pub(crate) fn insert(&self, key: TokenDigest, token: VerifiedToken, now: i64) {
        let Some(shard) = self.shard_of(&key) else {
            return;
        };
        write(shard).insert(key, token, now, self.shard_capacity);
    }

    fn shard_of(&self, key: &TokenDigest) -> Option<&RwLock<Shard>> {
        if self.shards.is_empty() {
            return None;
        }
        self.shards.get(key.shard(self.shards.len()))
    }
}

impl Shard {
    fn insert(&mut self, key: TokenDigest, token: VerifiedToken, now: i64, capacity: usize) {
        if capacity == 0 || self.entries.contains_key(&key) {
            // Another request verified the same token first; its entry is identical.
            return;
        }
        self.drop_expired(now);
        while self.entries.len() >= capacity {
            let Some((_, soonest)) = self.by_expiry.pop_first() else {
                break;
            };
            self.entries.remove(&soonest);
        }
        self.by_expiry.insert((token.last_valid_second(), key));
        self.entries.insert(key, token);
    }

    fn remove(&mut self, key: &TokenDigest) {
        if let Some(token) = self.entries.remove(key) {
            self.by_expiry.remove(&(token.last_valid_second(), *key));
        }
    }

    fn drop_expired(&mut self, now: i64) {
        while let Some(&(last_valid, key)) = self.by_expiry.first()
            && last_valid < now
        {
            self.by_expiry.pop_first();
            self.entries.remove(&key);
        }
    }
}

// A panic cannot happen while a shard is locked (no code that can panic runs under the
// lock but allocation, which aborts), so a poisoned lock still guards consistent data.
fn read(shard: &RwLock<Shard>) -> RwLockReadGuard<'_, Shard> {
    shard.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(shard: &RwLock<Shard>) -> RwLockWriteGuard<'_, Shard> {
    shard.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::claims::unix_now;
    use crate::error::AuthError;
    use crate::keyset::KeySet;
    use crate::role::Role;
    use crate::signing::SigningKey;

    const LEEWAY: i64 = 30;

    fn key_and_set(capacity: usize) -> (SigningKey, KeySet) {
        let key = SigningKey::generate("k1").unwrap();
        let set = KeySet::from_signing_keys(std::slice::from_ref(&key))
            .unwrap()
            .with_token_cache(capacity);
        (key, set)
    }

    fn user_token(key: &SigningKey) -> (String, Claims) {
        let claims = Claims::new_user(
            "alice",
            Uuid::new_v4(),
            Role::Operator,
            Duration::from_secs(60),
        );
        (key.sign(&claims).unwrap(), claims)
    }

    /// The time of the tests that use [`entry`].
    const NOW: i64 = 1_000_000;

    /// A service token issued a little before [`NOW`], expiring at `exp`.
    fn entry(exp: i64) -> VerifiedToken {
        let mut claims = Claims::new_service("svc", Duration::from_secs(60));
        claims.iat = NOW - 10;
        claims.exp = exp;
        VerifiedToken::new(claims, None, "k1".into())
    }

    fn cached_kid(set: &KeySet, token: &str, now: i64) -> Option<String> {
        set.cache().get(
            &TokenDigest::of(token),
            now,
            |_| true,
            |v| v.kid().to_owned(),
        )
    }

    #[test]
    fn a_verified_token_is_served_from_the_cache_until_its_expiry_plus_leeway() {
        let (key, set) = key_and_set(100);
        let (token, claims) = user_token(&key);
        let now = unix_now();
        let cold = set
            .verify_at(&token, now, VerifiedToken::principal)
            .unwrap();
        assert_eq!(set.cached_tokens(), 1);

        let hit = set.cache().get(
            &TokenDigest::of(&token),
            claims.exp + LEEWAY,
            |_| true,
            VerifiedToken::principal,
        );
        assert_eq!(hit, Some(cold), "served in the last second of the leeway");

        // One second later the entry is dropped and the cold path refuses the token.
        let err = set
            .verify_at(&token, claims.exp + LEEWAY + 1, VerifiedToken::principal)
            .unwrap_err();
        assert!(matches!(err, AuthError::Expired), "{err:?}");
        assert_eq!(set.cached_tokens(), 0);
        assert_eq!(cached_kid(&set, &token, now), None);
    }

    #[test]
    fn a_cached_token_is_not_served_when_the_clock_steps_back_before_its_iat() {
        let (key, set) = key_and_set(100);
        let (token, claims) = user_token(&key);
        set.verify_at(&token, unix_now(), VerifiedToken::principal)
            .unwrap();
        assert_eq!(set.cached_tokens(), 1);
        let err = set
            .verify_at(&token, claims.iat - LEEWAY - 1, VerifiedToken::principal)
            .unwrap_err();
        assert!(matches!(err, AuthError::IssuedInFuture), "{err:?}");
    }

    #[test]
    fn an_entry_whose_key_the_set_does_not_trust_is_dropped_and_verified_again() {
        let (key, set) = key_and_set(100);
        let (token, claims) = user_token(&key);
        let now = unix_now();
        // An entry for this very token as if a key "gone", not in the set, had signed it.
        let tenant = claims.tid.as_deref().map(|t| Uuid::parse_str(t).unwrap());
        set.cache().insert(
            TokenDigest::of(&token),
            VerifiedToken::new(claims.clone(), tenant, "gone".into()),
            now,
        );
        assert_eq!(
            set.cache().get(
                &TokenDigest::of(&token),
                now,
                |kid| set.contains(kid),
                |_| ()
            ),
            None
        );
        assert_eq!(set.cached_tokens(), 0, "the untrusted entry was kept");

        let principal = set
            .verify_at(&token, now, VerifiedToken::principal)
            .unwrap();
        assert_eq!(principal.token_id, claims.jti);
        assert_eq!(cached_kid(&set, &token, now).as_deref(), Some("k1"));
    }

    #[test]
    fn a_refused_token_is_not_cached() {
        let (key, set) = key_and_set(100);
        let mut claims = Claims::new_service("svc", Duration::from_secs(60));
        claims.iat = unix_now() - 600;
        claims.exp = unix_now() - 60;
        let token = key.sign(&claims).unwrap();
        assert!(set.verify(&token).is_err());
        assert_eq!(set.cached_tokens(), 0);
    }

    #[test]
    fn insert_drops_expired_entries_first() {
        let cache = VerifiedCache::new(1); // one shard of one entry
        let now = NOW;
        cache.insert(TokenDigest::of("old"), entry(now + 10), now);
        let later = now + 10 + LEEWAY + 1;
        cache.insert(TokenDigest::of("new"), entry(later + 60), later);
        assert_eq!(cache.len(), 1);
        assert!(
            cache
                .get(&TokenDigest::of("new"), later, |_| true, |_| ())
                .is_some()
        );
        let shard = read(&cache.shards[0]);
        assert!(!shard.entries.contains_key(&TokenDigest::of("old")));
        assert_eq!(shard.by_expiry.len(), 1);
    }

    #[test]
    fn a_full_shard_evicts_the_entry_that_expires_soonest() {
        let cache = VerifiedCache::new(SHARDS * 2);
        assert_eq!(cache.capacity(), SHARDS * 2);
        let now = NOW;
        // Three tokens that land in the same shard (of two entries).
        let shard = TokenDigest::of("t0").shard(SHARDS);
        let names: Vec<String> = (0..)
            .map(|i| format!("t{i}"))
            .filter(|n| TokenDigest::of(n).shard(SHARDS) == shard)
            .take(3)
            .collect();
        cache.insert(TokenDigest::of(&names[0]), entry(now + 300), now);
        cache.insert(TokenDigest::of(&names[1]), entry(now + 100), now);
        cache.insert(TokenDigest::of(&names[2]), entry(now + 200), now);
        assert_eq!(cache.len(), 2);
        let held = |n: &str| {
            cache
                .get(&TokenDigest::of(n), now, |_| true, |_| ())
                .is_some()
        };
        assert!(held(&names[0]));
        assert!(!held(&names[1]), "the soonest to expire was kept");
        assert!(held(&names[2]));
    }

    #[test]
    fn the_bound_holds_for_any_capacity() {
        let now = NOW;
        for capacity in [1, 3, 15, 16, 17, 100] {
            let cache = VerifiedCache::new(capacity);
            assert!(cache.capacity() <= capacity && cache.capacity() > 0);
            for i in 0..capacity * 5 {
                cache.insert(TokenDigest::of(&format!("token {i}")), entry(now + 60), now);
                assert!(cache.len() <= capacity, "{} > {capacity}", cache.len());
            }
            for shard in cache.shards.iter() {
                let shard = read(shard);
                assert_eq!(shard.entries.len(), shard.by_expiry.len());
            }
        }
    }

    #[test]
    fn capacity_zero_caches_nothing() {
        let cache = VerifiedCache::new(0);
        assert!(!cache.is_enabled());
        assert_eq!(cache.capacity(), 0);
        cache.insert(TokenDigest::of("t"), entry(NOW + 60), NOW);
        assert_eq!(cache.len(), 0);
        assert!(
            cache
                .get(&TokenDigest::of("t"), NOW, |_| true, |_| ())
                .is_none()
        );
    }

    #[test]
    fn an_expired_entry_is_removed_on_read_with_its_expiry_index() {
        let cache = VerifiedCache::new(1);
        let now = NOW;
        cache.insert(TokenDigest::of("a"), entry(now + 10), now);
        assert!(
            cache
                .get(
                    &TokenDigest::of("a"),
                    now + 10 + LEEWAY + 1,
                    |_| true,
                    |_| ()
                )
                .is_none()
        );
        let shard = read(&cache.shards[0]);
        assert!(shard.entries.is_empty());
        assert!(shard.by_expiry.is_empty());
    }
}
