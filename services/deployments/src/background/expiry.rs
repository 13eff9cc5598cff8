//! Ends deployments whose approval was not given within CAIRN_APPROVAL_TTL (EXPIRED), and
//! on the same tick refreshes the gauges of active deployments and waiting approvals.
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::app::App;

pub async fn run(app: App, cancel: CancellationToken) {
    let tick = (app.flow.approval_ttl / 2)
        .min(Duration::from_secs(10))
        .max(Duration::from_millis(50));
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(tick) => {}
        }
        // Each pass's statements and transactions are bounded (`cairn_db::bounded!`): a
        // PostgreSQL connection gone silent does not hold the loop.
        match app.expire_overdue().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(expired = n, "approvals expired"),
            Err(err) => {
                tracing::warn!(error = %cairn_bus::Chain(&err), "expiring approvals failed")
            }
        }
        if let Err(err) = app.refresh_gauges().await {
            tracing::warn!(error = %cairn_bus::Chain(&err), "refreshing the deployment gauges failed");
        }
    }
}
