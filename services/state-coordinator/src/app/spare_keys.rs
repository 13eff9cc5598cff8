//! Data keys that wait for a state's next write, so that the key-manager round trip is off
//! a POST's critical path. A key gets here two ways:
//!
//! - **asked for ahead**: a GET by a run that is about to write (an apply or destroy
//!   attempt holding the state's lock, as tofu reads before it writes) asks the key manager
//!   for the key of the write that follows, without waiting for it ([`SpareKeys::promise`]);
//!   the POST takes the promised key, waiting for it if the answer is still on its way.
//!   A POST whose token authenticated for the state before asks the same way while its
//!   checks are read, when no key is waiting; a write refused before it takes the key leaves
//!   it waiting;
//! - **left over**: a write refused after it took its key (stale, a conflict, a re-send of a
//!   write already committed) leaves the key unused ([`SpareKeys::keep`]).
//!
//! A state holds at most one such key (asked for or kept), so there is still one key-manager
//! call per written generation: the one key a write was going to need, asked for earlier.
//! A key seals one generation only: taking it removes it. The encryption context of a key
//! names its tenant and state, so a key is only ever kept for, and taken by, the state it
//! was made for. A key asked for ahead that no write takes (an apply that had nothing to
//! change writes nothing) waits `max_age` for the state's next write, then is dropped.
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cairn_storage::{DataKey, KeyError};
use tokio::sync::oneshot;
use uuid::Uuid;

/// The key manager's answer to a key asked for ahead.
pub type Answer = Result<DataKey, KeyError>;

/// A state's waiting key: here, or asked for and on its way.
pub enum Spare {
    Ready(DataKey),
    Coming(oneshot::Receiver<Answer>),
}

/// What a write got from a waiting key.
pub enum Waited {
    Key(DataKey),
    /// The key manager failed while the write waited for it: the write's own answer (asking
    /// again would only double the time to it).
    Failed(KeyError),
    /// No key: the answer was a failure that came before the write (the write asks again,
    /// the key manager may be back), or no answer will come.
    Nothing,
}

impl Spare {
    pub async fn key(self) -> Waited {
        match self {
            Spare::Ready(key) => Waited::Key(key),
            Spare::Coming(mut answer) => match answer.try_recv() {
                Ok(Ok(key)) => Waited::Key(key),
                Ok(Err(_)) | Err(oneshot::error::TryRecvError::Closed) => Waited::Nothing,
                Err(oneshot::error::TryRecvError::Empty) => match answer.await {
                    Ok(Ok(key)) => Waited::Key(key),
                    Ok(Err(e)) => Waited::Failed(e),
                    Err(_) => Waited::Nothing,
                },
            },
        }
    }
}

/// At most one waiting key per state, at most `capacity` states, each kept `max_age`.
pub struct SpareKeys {
    capacity: usize,
    max_age: Duration,
    keys: Mutex<HashMap<Uuid, (Spare, Instant)>>,
}

impl SpareKeys {
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Self {
            capacity,
            max_age,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// The waiting key of `state_id`, if one is young enough; it is no longer kept.
    pub fn take(&self, state_id: Uuid) -> Option<Spare> {
        let (key, at) = self.lock().remove(&state_id)?;
        (at.elapsed() < self.max_age).then_some(key)
    }

    /// Keeps an unused key for `state_id`'s next write. When the state already has one, or
    /// no room is left after dropping the expired ones, the key is dropped (a later write
    /// asks the key manager again).
    pub fn keep(&self, state_id: Uuid, key: DataKey) {
        self.insert(state_id, || Spare::Ready(key));
    }

    /// Reserves `state_id`'s waiting key for one that is about to be asked for: the sender
    /// delivers it. `None` when the state already has a young key (asked for or kept) or no
    /// room is left: then nothing is to be asked for.
    pub fn promise(&self, state_id: Uuid) -> Option<oneshot::Sender<Answer>> {
        let mut sender = None;
        self.insert(state_id, || {
            let (tx, rx) = oneshot::channel();
            sender = Some(tx);
            Spare::Coming(rx)
        });
        sender
    }

    fn insert(&self, state_id: Uuid, spare: impl FnOnce() -> Spare) {
        let mut keys = self.lock();
        let max_age = self.max_age;
        let young = |at: &Instant| at.elapsed() < max_age;
        if keys.len() >= self.capacity {
            keys.retain(|_, (_, at)| young(at));
        }
        match keys.get(&state_id) {
            Some((_, at)) if young(at) => {}
            Some(_) => {
                keys.insert(state_id, (spare(), Instant::now()));
            }
            None if keys.len() < self.capacity => {
                keys.insert(state_id, (spare(), Instant::now()));
            }
            None => {}
        }
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, (Spare, Instant)>> {
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

    fn ready(spare: Option<Spare>) -> String {
        match spare {
            Some(Spare::Ready(key)) => key.key_id,
            Some(Spare::Coming(_)) => panic!("a promise where a kept key was expected"),
            None => panic!("no key"),
        }
    }

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
        assert_eq!(ready(spare.take(a)), "k1");
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
        assert_eq!(ready(spare.take(a)), "k1");
        assert!(spare.take(c).is_none());
    }

    #[test]
    fn an_old_key_is_never_handed_out() {
        let spare = SpareKeys::new(8, Duration::ZERO);
        let a = Uuid::new_v4();
        spare.keep(a, key(1));
        assert!(spare.take(a).is_none());
    }

    #[tokio::test]
    async fn a_promised_key_is_taken_once_and_blocks_a_second_ask() {
        let spare = SpareKeys::default();
        let a = Uuid::new_v4();
        let sender = spare.promise(a).expect("room for a promise");
        assert!(
            spare.promise(a).is_none(),
            "one key asked for ahead per state"
        );
        spare.keep(a, key(9));
        let taken = spare.take(a).expect("the promise");
        assert!(spare.take(a).is_none());
        assert!(sender.send(Ok(key(2))).is_ok());
        assert_eq!(waited(taken).await, "k2");
    }

    #[tokio::test]
    async fn a_promise_the_key_manager_did_not_keep_yields_no_key() {
        let spare = SpareKeys::default();
        let a = Uuid::new_v4();
        drop(spare.promise(a));
        assert!(matches!(
            spare.take(a).unwrap().key().await,
            Waited::Nothing
        ));
    }

    fn failure() -> KeyError {
        KeyError::Unavailable("cut".to_owned())
    }

    /// A failure the write waited for is its answer; one that came before it is not (the
    /// write asks the key manager again).
    #[tokio::test]
    async fn a_failure_is_the_answer_only_to_a_write_that_waited_for_it() {
        let spare = SpareKeys::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let early = spare.promise(a).unwrap();
        assert!(early.send(Err(failure())).is_ok());
        assert!(matches!(
            spare.take(a).unwrap().key().await,
            Waited::Nothing
        ));

        let late = spare.promise(b).unwrap();
        let waiting = spare.take(b).unwrap().key();
        tokio::pin!(waiting);
        assert!(futures::poll!(&mut waiting).is_pending(), "the write waits");
        assert!(late.send(Err(failure())).is_ok());
        assert!(matches!(waiting.await, Waited::Failed(_)));
    }

    async fn waited(spare: Spare) -> String {
        match spare.key().await {
            Waited::Key(key) => key.key_id,
            Waited::Failed(e) => panic!("failed: {e}"),
            Waited::Nothing => panic!("no key"),
        }
    }

    #[test]
    fn an_expired_promise_makes_room_for_a_new_one() {
        let spare = SpareKeys::new(8, Duration::ZERO);
        let a = Uuid::new_v4();
        assert!(spare.promise(a).is_some());
        assert!(spare.promise(a).is_some());
    }
}
