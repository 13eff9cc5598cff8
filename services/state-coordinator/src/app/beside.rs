//! Work that runs beside a write's critical path: a large body's checks (Content-MD5, the
//! parse, its SHA-256) and the hash of its sealed copy. The write's commit waits for them,
//! but its key, seal and put do not, so they are done on threads of the lowest CPU
//! priority: on a busy host, a seal, a put or the key manager's answer takes the core
//! first and this work fills the time in between (README Benchmarks: at concurrency 1 a
//! 1 MB POST's seal waited ~0.7 ms for a core while the body's checks held one).
//!
//! The threads are started on first use, one per core the process may use; jobs queue in
//! arrival order. A job that panics answers its caller with an internal error.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::oneshot;

use crate::error::Error;

/// The nice value of the threads (the lowest priority an unprivileged thread can choose).
#[cfg(target_os = "linux")]
const NICE: i32 = 19;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A pool of low-priority threads (see the module docs).
#[derive(Default)]
pub struct BesideWork {
    queue: OnceLock<Sender<Job>>,
}

impl BesideWork {
    /// Runs `work` on one of the pool's threads and waits for its answer.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Error> {
        let (answer, answered) = oneshot::channel();
        let job: Job = Box::new(move || {
            // The caller may be gone (its request dropped): then nobody wants the answer.
            drop(answer.send(work()));
        });
        self.queue
            .get_or_init(start_threads)
            .send(job)
            .map_err(|_| failed())?;
        // A panicking job drops its answer unsent.
        answered.await.map_err(|_| failed())
    }
}

fn failed() -> Error {
    Error::internal("a low-priority task of the write path failed".to_owned())
}

/// Starts the threads; they end when the queue's sender is dropped.
fn start_threads() -> Sender<Job> {
    let (queue, jobs) = channel::<Job>();
    let jobs = Arc::new(Mutex::new(jobs));
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    for n in 0..threads {
        let jobs = Arc::clone(&jobs);
        let started = std::thread::Builder::new()
            .name(format!("cairn-beside-{n}"))
            .spawn(move || work_through(&jobs));
        if let Err(e) = started {
            // Fewer threads only queue the work longer; with none, `run` answers an error.
            tracing::warn!(error = %e, "could not start a low-priority worker thread");
        }
    }
    queue
}

fn work_through(jobs: &Mutex<Receiver<Job>>) {
    lower_priority();
    loop {
        let next = match jobs.lock() {
            Ok(jobs) => jobs.recv(),
            Err(_) => return,
        };
        let Ok(job) = next else { return };
        // A panic ends the job (its caller is answered by the dropped sender), not the
        // thread.
        drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)));
    }
}

/// Lowers the calling thread's priority (Linux: each thread has its own nice value).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        let me = rustix::thread::gettid();
        if let Err(e) = rustix::process::setpriority_process(Some(me), NICE) {
            tracing::debug!(error = %e, "could not lower a worker thread's priority");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_each_job_with_its_own_result() {
        let pool = BesideWork::default();
        let answers = futures::future::join_all((0..32u64).map(|n| pool.run(move || n * n))).await;
        let answers: Vec<u64> = answers.into_iter().map(|a| a.expect("answered")).collect();
        assert_eq!(answers, (0..32u64).map(|n| n * n).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_panicking_job_is_an_error_and_the_pool_goes_on() {
        let pool = BesideWork::default();
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        // More panics than threads: a panic must not end the thread it ran on.
        for _ in 0..threads + 1 {
            let failed = pool.run(|| -> u8 { panic!("job fails") }).await;
            assert!(failed.is_err());
        }
        assert_eq!(pool.run(|| 7).await.expect("answered"), 7);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn jobs_run_at_the_lowest_priority() {
        let mine = || rustix::process::getpriority_process(Some(rustix::thread::gettid()));
        let before = mine().expect("getpriority");
        let pool = BesideWork::default();
        let nice = pool
            .run(|| rustix::process::getpriority_process(Some(rustix::thread::gettid())))
            .await
            .expect("answered")
            .expect("getpriority");
        assert_eq!(nice, NICE);
        // The caller's own thread is untouched.
        assert_eq!(mine().expect("getpriority"), before);
    }
}
