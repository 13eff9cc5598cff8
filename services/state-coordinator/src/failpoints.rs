//! Failpoints for crash-window tests. Without the `testing` feature every check is a no-op.

use crate::error::{Error, Result};

#[cfg(feature = "testing")]
use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
};

/// Named points in the write path where a test can make the coordinator stop as if it had
/// crashed: nothing after the point runs.
#[derive(Clone, Default)]
pub struct Failpoints {
    #[cfg(feature = "testing")]
    armed: Arc<Mutex<HashSet<String>>>,
}

/// After the pending row is inserted, before the object is put.
pub const AFTER_PENDING: &str = "write.after_pending";
/// After the object is put, before the commit transaction.
pub const AFTER_PUT: &str = "write.after_put";
/// Inside the commit transaction, just before COMMIT (the transaction rolls back).
pub const BEFORE_COMMIT: &str = "write.before_commit";
/// After COMMIT, before the response is sent.
pub const AFTER_COMMIT: &str = "write.after_commit";

impl Failpoints {
    pub fn check(&self, name: &'static str) -> Result<()> {
        #[cfg(feature = "testing")]
        {
            let armed = self
                .armed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(name);
            if armed {
                return Err(Error::unavailable(format!("failpoint {name} triggered")));
            }
        }
        let _ = name;
        Ok::<(), Error>(())
    }

    #[cfg(feature = "testing")]
    pub fn arm(&self, name: &str) {
        self.armed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned());
    }

    #[cfg(feature = "testing")]
    pub fn disarm(&self, name: &str) {
        self.armed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
    }
}
