//! Wakes the waiters of one run when its result is written, rather than every waiter of
//! every run (each woken waiter reads its run's row). A waiter registers before it first
//! reads the row, so a result written after that read wakes it; the poll of `run_wait`
//! covers what this process does not see (a result another replica's consumer wrote).
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use uuid::Uuid;

/// The runs waited for in this process.
#[derive(Debug, Default)]
pub struct RunWakers {
    runs: Mutex<HashMap<Uuid, (Arc<Notify>, usize)>>,
}

/// Interest in one run's result, until dropped.
#[derive(Debug)]
pub struct RunWatch {
    wakers: Arc<RunWakers>,
    run_id: Uuid,
    pub notify: Arc<Notify>,
}

impl RunWakers {
    fn runs(&self) -> MutexGuard<'_, HashMap<Uuid, (Arc<Notify>, usize)>> {
        // One insert or removal at a time: a panic elsewhere leaves the map whole.
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a waiter of `run_id`.
    pub fn watch(self: &Arc<Self>, run_id: Uuid) -> RunWatch {
        let mut runs = self.runs();
        let entry = runs
            .entry(run_id)
            .or_insert_with(|| (Arc::new(Notify::new()), 0));
        entry.1 += 1;
        RunWatch {
            wakers: Arc::clone(self),
            run_id,
            notify: Arc::clone(&entry.0),
        }
    }

    /// Wakes the waiters of `run_id` that are waiting (a waiter enables its wake-up before
    /// it reads the row, so none misses a result written after its read).
    pub fn wake(&self, run_id: Uuid) {
        if let Some((notify, _)) = self.runs().get(&run_id) {
            notify.notify_waiters();
        }
    }

    /// How many runs are waited for (for tests).
    pub fn watched(&self) -> usize {
        self.runs().len()
    }
}

impl Drop for RunWatch {
    fn drop(&mut self) {
        let mut runs = self.wakers.runs();
        if let Some(entry) = runs.get_mut(&self.run_id) {
            entry.1 = entry.1.saturating_sub(1);
            if entry.1 == 0 {
                runs.remove(&self.run_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn woken(n: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>) -> bool {
        futures::FutureExt::now_or_never(n).is_some()
    }

    #[tokio::test]
    async fn a_result_wakes_the_waiters_of_its_run_only() {
        let wakers = Arc::new(RunWakers::default());
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let wa = wakers.watch(a);
        let wa2 = wakers.watch(a);
        let wb = wakers.watch(b);
        {
            let na = wa.notify.notified();
            let na2 = wa2.notify.notified();
            let nb = wb.notify.notified();
            tokio::pin!(na, na2, nb);
            na.as_mut().enable();
            na2.as_mut().enable();
            nb.as_mut().enable();
            wakers.wake(a);
            assert!(woken(na.as_mut()), "the first waiter of a");
            assert!(woken(na2.as_mut()), "the second waiter of a");
            assert!(!woken(nb.as_mut()), "b's waiter slept on");
        }
        // Waiters leave; the last one of a run removes it.
        drop(wa);
        assert_eq!(wakers.watched(), 2);
        drop(wa2);
        assert_eq!(wakers.watched(), 1);
        drop(wb);
        assert_eq!(wakers.watched(), 0);
        // Waking a run nobody waits for does nothing.
        wakers.wake(a);
        assert_eq!(wakers.watched(), 0);
    }
}
