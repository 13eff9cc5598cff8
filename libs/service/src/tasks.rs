//! [`Tasks`]: a cancellation token and the background tasks it stops. A service spawns its
//! servers, relays and sweepers here; cancelling the token stops them all, and
//! [`Tasks::wait`] returns once every one has finished. The runner's two-phase stop uses two
//! of them (stop taking work; then stop everything else).
use std::future::Future;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// A cancellation token and the tasks it stops.
#[derive(Default)]
pub struct Tasks {
    cancel: CancellationToken,
    set: JoinSet<()>,
}

impl Tasks {
    /// No tasks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns a task; it should return when [`Tasks::token`] (or a child) is cancelled.
    pub fn spawn<F>(&mut self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.set.spawn(task);
    }

    /// The token that stops these tasks.
    pub fn token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// A token cancelled with this one (and cancellable on its own).
    pub fn child_token(&self) -> CancellationToken {
        self.cancel.child_token()
    }

    /// How many tasks are still running.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether no task is running.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Cancels the token and waits for every task.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        self.join_all().await;
    }

    /// Waits until the token is cancelled (by a signal or a caller), then for every task.
    pub async fn wait(mut self) {
        self.cancel.cancelled().await;
        self.join_all().await;
    }

    /// Waits for every task without cancelling (tasks that end on their own).
    pub async fn join_all(&mut self) {
        while let Some(joined) = self.set.join_next().await {
            if let Err(e) = joined
                && e.is_panic()
            {
                tracing::error!(error = %e, "a background task panicked");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn shutdown_stops_every_task_and_waits_for_it() {
        let mut tasks = Tasks::new();
        let stopped = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let token = tasks.child_token();
            let stopped = stopped.clone();
            tasks.spawn(async move {
                token.cancelled().await;
                stopped.fetch_add(1, Ordering::SeqCst);
            });
        }
        assert_eq!(tasks.len(), 3);
        tasks.shutdown().await;
        assert_eq!(stopped.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn wait_returns_once_the_token_is_cancelled() {
        let mut tasks = Tasks::new();
        let token = tasks.token();
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        let child = tasks.child_token();
        tasks.spawn(async move {
            child.cancelled().await;
            d.fetch_add(1, Ordering::SeqCst);
        });
        let waiter = tokio::spawn(tasks.wait());
        token.cancel();
        waiter.await.ok();
        assert_eq!(done.load(Ordering::SeqCst), 1);
    }
}
