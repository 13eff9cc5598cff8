//! The runs this instance is executing, each with its cancellation token: what the admin
//! `ListRuns` shows, and where `cairn.runctl.<run_id>` and `CancelRun` land.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use cairn_proto::runner as pb;
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
struct Entry {
    attempt: u32,
    target_id: String,
    kind: String,
    started_at: SystemTime,
    cancel: CancellationToken,
}

/// The runs in flight on this instance.
#[derive(Debug, Clone, Default)]
pub struct ActiveRuns {
    inner: Arc<Mutex<HashMap<String, Entry>>>,
}

/// Removes its run from [`ActiveRuns`] when dropped.
#[derive(Debug)]
pub struct ActiveGuard {
    runs: ActiveRuns,
    run_id: String,
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.runs.lock().remove(&self.run_id);
    }
}

impl ActiveRuns {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `run_id` as soon as its request arrives (so a cancel during admission is
    /// not lost); `None` when this instance already runs it (a redelivered request).
    pub fn begin(
        &self,
        run_id: &str,
        target_id: &str,
        cancel: CancellationToken,
    ) -> Option<ActiveGuard> {
        let mut runs = self.lock();
        if runs.contains_key(run_id) {
            return None;
        }
        runs.insert(
            run_id.to_owned(),
            Entry {
                attempt: 0,
                target_id: target_id.to_owned(),
                kind: String::new(),
                started_at: SystemTime::now(),
                cancel,
            },
        );
        Some(ActiveGuard {
            runs: self.clone(),
            run_id: run_id.to_owned(),
        })
    }

    /// Records the admitted attempt and its kind.
    pub fn admitted(&self, run_id: &str, attempt: u32, kind: &str) {
        if let Some(e) = self.lock().get_mut(run_id) {
            e.attempt = attempt;
            kind.clone_into(&mut e.kind);
        }
    }

    /// Cancels `run_id` if this instance runs it; returns whether it did.
    pub fn cancel(&self, run_id: &str) -> bool {
        match self.lock().get(run_id) {
            Some(e) => {
                e.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// How many runs are in flight.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no run is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The runs in flight, oldest first.
    pub fn list(&self) -> Vec<pb::ActiveRun> {
        let mut runs: Vec<pb::ActiveRun> = self
            .lock()
            .iter()
            .map(|(run_id, e)| pb::ActiveRun {
                run_id: run_id.clone(),
                attempt: e.attempt,
                target_id: e.target_id.clone(),
                kind: e.kind.clone(),
                started_at: Some(prost_types::Timestamp::from(e.started_at)),
                cancelling: e.cancel.is_cancelled(),
            })
            .collect();
        runs.sort_by(|a, b| {
            let key = |r: &pb::ActiveRun| r.started_at.map(|t| (t.seconds, t.nanos));
            key(a).cmp(&key(b)).then_with(|| a.run_id.cmp(&b.run_id))
        });
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_listed_cancelled_and_removed_with_its_guard() {
        let runs = ActiveRuns::default();
        let token = CancellationToken::new();
        let guard = runs.begin("r1", "local", token.clone());
        assert!(guard.is_some());
        assert!(
            runs.begin("r1", "local", CancellationToken::new())
                .is_none()
        );
        runs.admitted("r1", 2, "apply");
        let listed = runs.list();
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].attempt, listed[0].kind.as_str()), (2, "apply"));
        assert!(!runs.cancel("other"));
        assert!(runs.cancel("r1"));
        assert!(token.is_cancelled());
        assert!(runs.list()[0].cancelling);
        drop(guard);
        assert!(runs.is_empty());
    }
}
