//! Deletes what no commit will ever reference: pending rows past their TTL (and their
//! objects), expired plans, intermediate generations of finished runs past retention, and
//! the partial files a killed coordinator left in the file object store (past the pending
//! TTL too: no write in progress is that old).
//! Rows go first (`DELETE … RETURNING`), objects after; a committed object never has a
//! pending row, so it is never swept.
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::error::Result;
use crate::store::{generations, pending, plans};

#[derive(Debug, Clone)]
pub struct SweepSettings {
    pub interval: Duration,
    pub pending_ttl: Duration,
    pub intermediate_retention: Duration,
    /// How long a pass's database work may take before the pass is given up and tried again
    /// at the next interval (`cairn_db::bounded!`): a connection gone silent would otherwise
    /// stop the sweeper for good.
    pub time_limit: Duration,
}

/// What one pass removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    pub pending: usize,
    pub plans: usize,
    pub intermediate: usize,
    /// Partial files of interrupted writes (file object store).
    pub partial: usize,
}

const BATCH: i64 = 500;

/// One pass. Its database work is given up after `s.time_limit` as PostgreSQL unavailable
/// (the connection closed, `cairn_db::bounded!`); rows whose deletion committed before
/// the answer was lost leave their objects behind, as a coordinator killed at that point
/// would.
pub async fn sweep_once(app: &App, s: &SweepSettings) -> Result<SweepReport> {
    let (keys, expired, pruned) = cairn_db::bounded!(&app.pool, within s.time_limit, |conn| {
        let keys = pending::pending_sweep(conn, s.pending_ttl.as_secs_f64(), BATCH).await?;
        let expired = plans::plan_delete_expired(conn, BATCH).await?;
        let pruned = generations::generation_prune_intermediate(
            conn,
            s.intermediate_retention.as_secs_f64(),
            BATCH,
        )
        .await?;
        Ok::<_, crate::error::Error>((keys, expired, pruned))
    })?;
    for key in &keys {
        // A pending object was put at most once under its unique key; remove every version.
        match app.objects.list(key).await {
            Ok(versions) => {
                let found: Vec<(String, String)> = versions
                    .into_iter()
                    .filter(|v| &v.key == key)
                    .map(|v| (v.key, v.version_id))
                    .collect();
                app.delete_objects(&found).await;
            }
            Err(e) => tracing::warn!(object_key = %key, error = %e, "could not list swept object"),
        }
    }
    app.delete_objects(&expired).await;
    app.delete_objects(&pruned).await;
    let partial = match app.objects.sweep_partial(s.pending_ttl).await {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "could not sweep partial object files");
            0
        }
    };
    Ok(SweepReport {
        pending: keys.len(),
        plans: expired.len(),
        intermediate: pruned.len(),
        partial,
    })
}

pub async fn run(app: App, s: SweepSettings, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(s.interval) => {}
        }
        match sweep_once(&app, &s).await {
            Ok(r) if r != SweepReport::default() => tracing::info!(?r, "sweep removed leftovers"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sweep failed; will retry"),
        }
    }
}
