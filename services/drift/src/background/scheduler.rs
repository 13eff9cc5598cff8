//! The scheduler: a tick every `CAIRN_DRIFT_TICK`, or at once when woken (a scan was
//! triggered or ended). Runs in every replica; the database hands each due resource to
//! one of them.
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::app::App;

pub async fn run(app: App, tick: Duration, cancel: CancellationToken) {
    match app.unpark().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            resources = n,
            "resources tracked while scheduling was off got their slots"
        ),
        Err(err) => tracing::warn!(error = %err, "could not schedule parked resources"),
    }
    loop {
        let woken = app.scheduler_notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        match app.tick().await {
            Ok(t) if t.claimed + t.skipped + t.expired > 0 => {
                tracing::debug!(?t, "drift tick");
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "drift tick failed; trying again"),
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = &mut woken => {}
            () = tokio::time::sleep(tick) => {}
        }
    }
}
