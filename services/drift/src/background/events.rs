//! The durable consumer `drift-events` of `cairn.events.>` (shared by the replicas): each
//! event is applied to the tracking projection in the transaction that records its id, so
//! a redelivered event changes nothing.
use std::time::Duration;

use cairn_bus::{BusError, Consumer, Namespace};

use crate::app::App;

pub const DURABLE: &str = "drift-events";

pub async fn bind(
    js: &async_nats::jetstream::Context,
    ns: &Namespace,
    ack_wait: Duration,
) -> Result<Consumer, BusError> {
    let filter = ns.events_filter(None, None, None)?;
    Consumer::new(js, &ns.events_stream(), DURABLE, &filter, ack_wait).await
}

pub async fn run(consumer: Consumer, app: App, cancel: tokio_util::sync::CancellationToken) {
    let pool = app.pool.clone();
    let schedule = app.settings.schedule;
    let notify = app.events_notify.clone();
    let result = consumer
        .run(
            &pool,
            DURABLE,
            async move |conn, event| {
                let handled = crate::app::tracking::on_event(conn, &event, schedule).await?;
                if handled.wrote_events {
                    // Woken before commit: the relay also polls, so nothing is lost.
                    notify.notify_one();
                }
                Ok::<_, crate::error::Error>(())
            },
            cancel,
        )
        .await;
    if let Err(err) = result {
        tracing::error!(error = %cairn_bus::Chain(&err), "drift event consumer stopped");
    }
}

/// `processed_events` rows are kept well beyond the events stream's 30-day retention.
pub const PROCESSED_RETENTION: Duration = Duration::from_secs(40 * 24 * 3600);

/// Prunes old idempotency keys hourly until `cancel` fires.
pub async fn prune_processed(pool: sqlx::PgPool, cancel: tokio_util::sync::CancellationToken) {
    loop {
        if let Err(err) = cairn_bus::processed_events_prune(&pool, PROCESSED_RETENTION).await {
            tracing::warn!(error = %cairn_bus::Chain(&err), "pruning processed event ids failed");
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(3600)) => {}
        }
    }
}
