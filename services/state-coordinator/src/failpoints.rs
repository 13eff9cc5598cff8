//! Failpoints for crash-window tests. Without the `testing` feature every point is a no-op
//! and nothing here reads the environment: production builds carry none of it.
//!
//! With `testing`, a point can be
//! - armed (`arm`): the request fails there with UNAVAILABLE, as if the coordinator crashed
//!   (nothing after the point runs; the in-process crash-window tests);
//! - paused (`pause`): the request waits there until the test releases it (races);
//! - blocked from the environment, for the real-crash tests that run the binary as a child
//!   process: `CAIRN_TEST_FAILPOINT_BLOCK=<point>` makes the first request that reaches the
//!   point append the point's name and a newline to the file `CAIRN_TEST_FAILPOINT_REACHED`
//!   and then wait forever (until the test SIGKILLs the process).

#[cfg(feature = "testing")]
use crate::error::Error;
use crate::error::Result;

#[cfg(feature = "testing")]
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
};

/// Named points in the write path where a test can make the coordinator stop as if it had
/// crashed: nothing after the point runs.
#[derive(Clone, Default)]
pub struct Failpoints {
    #[cfg(feature = "testing")]
    inner: Arc<Inner>,
}

#[cfg(feature = "testing")]
#[derive(Default)]
struct Inner {
    armed: Mutex<HashSet<String>>,
    paused: Mutex<HashMap<String, Pause>>,
    /// `CAIRN_TEST_FAILPOINT_BLOCK` and `CAIRN_TEST_FAILPOINT_REACHED`.
    block: Option<(String, std::path::PathBuf)>,
}

/// After the pending row is inserted, before the object is put.
pub const AFTER_PENDING: &str = "write.after_pending";
/// After the object is put, before the commit transaction.
pub const AFTER_PUT: &str = "write.after_put";
/// Inside the commit transaction, just before COMMIT (the transaction rolls back).
pub const BEFORE_COMMIT: &str = "write.before_commit";
/// After COMMIT, before the response is sent.
pub const AFTER_COMMIT: &str = "write.after_commit";
/// VerifyAll: every check done, before the pass may end after-restore mode.
pub const VERIFY_BEFORE_END: &str = "verify.before_end";

/// PutPlan: the objects are stored and the attempt was checked, before the plan row.
pub const PLAN_BEFORE_INSERT: &str = "plan.before_insert";
/// TakePlan: the attempt was checked, before the plan is leased to it.
pub const PLAN_BEFORE_LEASE: &str = "plan.before_lease";

/// Every write-path point, in the order a write reaches them.
pub const WRITE_POINTS: [&str; 4] = [AFTER_PENDING, AFTER_PUT, BEFORE_COMMIT, AFTER_COMMIT];

/// The environment variable naming the point a child-process coordinator blocks at.
pub const BLOCK_ENV: &str = "CAIRN_TEST_FAILPOINT_BLOCK";
/// The environment variable naming the file a blocked point is reported in.
pub const REACHED_ENV: &str = "CAIRN_TEST_FAILPOINT_REACHED";

/// A paused point: `reached` resolves once a request waits there, `release` lets it (and
/// every later one) go on.
#[cfg(feature = "testing")]
#[derive(Clone)]
pub struct Pause {
    reached: Arc<tokio::sync::Notify>,
    release: tokio::sync::watch::Sender<bool>,
}

#[cfg(feature = "testing")]
impl Pause {
    /// Waits until a request reached the point.
    pub async fn reached(&self) {
        self.reached.notified().await;
    }

    /// Lets the waiting request(s) continue.
    pub fn release(&self) {
        let _ = self.release.send(true);
    }
}

impl Failpoints {
    /// The failpoints of a coordinator: with `testing`, including the point named by
    /// `CAIRN_TEST_FAILPOINT_BLOCK`; without it, none.
    pub fn from_env() -> Self {
        #[cfg(feature = "testing")]
        {
            let block = std::env::var(BLOCK_ENV)
                .ok()
                .filter(|p| !p.is_empty())
                .zip(std::env::var_os(REACHED_ENV).map(std::path::PathBuf::from));
            if let Some((point, _)) = &block {
                tracing::warn!(failpoint = %point, "test failpoint set to block until killed");
            }
            Self {
                inner: Arc::new(Inner {
                    block,
                    ..Inner::default()
                }),
            }
        }
        #[cfg(not(feature = "testing"))]
        Self::default()
    }

    /// The point `name` is reached: fails when armed, waits when paused or blocked.
    pub async fn hit(&self, name: &'static str) -> Result<()> {
        #[cfg(feature = "testing")]
        {
            if let Some((point, file)) = &self.inner.block
                && point == name
            {
                use std::io::Write;
                let reported = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(file)
                    .and_then(|mut f| writeln!(f, "{name}"));
                if let Err(e) = reported {
                    tracing::error!(error = %e, "could not report the blocked failpoint");
                }
                std::future::pending::<()>().await;
            }
            let pause = self
                .inner
                .paused
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(name)
                .cloned();
            if let Some(pause) = pause {
                let mut released = pause.release.subscribe();
                pause.reached.notify_one();
                let _ = released.wait_for(|r| *r).await;
            }
            let armed = self
                .inner
                .armed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(name);
            if armed {
                return Err(Error::unavailable(format!("failpoint {name} triggered")));
            }
        }
        let _ = name;
        Ok(())
    }

    #[cfg(feature = "testing")]
    pub fn arm(&self, name: &str) {
        self.inner
            .armed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned());
    }

    #[cfg(feature = "testing")]
    pub fn disarm(&self, name: &str) {
        self.inner
            .armed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
    }

    /// Pauses requests at `name` until the returned handle releases them (or `unpause`).
    #[cfg(feature = "testing")]
    pub fn pause(&self, name: &str) -> Pause {
        let (release, _) = tokio::sync::watch::channel(false);
        let pause = Pause {
            reached: Arc::new(tokio::sync::Notify::new()),
            release,
        };
        self.inner
            .paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), pause.clone());
        pause
    }

    /// Stops pausing at `name` (requests already waiting stay until released).
    #[cfg(feature = "testing")]
    pub fn unpause(&self, name: &str) {
        self.inner
            .paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
    }
}
