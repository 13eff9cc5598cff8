//! The durable consumer `deployments-drift` of the drift service's events
//! (`cairn.events.*.instance.*`, shared by the replicas): each `instance.drift_detected` /
//! `drift_resolved` sets its resource's drift status (see `app::drift`) in the transaction
//! that records the event id in `processed_events`, so a redelivered event changes nothing.
//! The instance events this service publishes itself pass through and are ignored.
use std::time::Duration;

use cairn_bus::{BusError, Consumer, Namespace};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// The durable consumer's name and the `processed_events` consumer key.
pub const DURABLE: &str = "deployments-drift";

/// `processed_events` rows are kept well beyond the events stream's 30-day retention.
pub const PROCESSED_RETENTION: Duration = Duration::from_secs(40 * 24 * 3600);

pub async fn bind(
    js: &async_nats::jetstream::Context,
    ns: &Namespace,
    ack_wait: Duration,
) -> Result<Consumer, BusError> {
    let filter = ns.events_filter(None, Some("instance"), None)?;
    Consumer::new(js, &ns.events_stream(), DURABLE, &filter, ack_wait).await
}

/// Handles events until `cancel` fires.
pub async fn run(consumer: Consumer, pool: PgPool, cancel: CancellationToken) {
    let result = consumer
        .run(
            &pool,
            DURABLE,
            async move |conn, event| {
                crate::app::drift::on_event(conn, &event).await?;
                Ok::<_, crate::error::Error>(())
            },
            cancel,
        )
        .await;
    if let Err(err) = result {
        tracing::error!(error = %cairn_bus::Chain(&err), "the drift event consumer stopped");
    }
}

/// Prunes old idempotency keys hourly until `cancel` fires.
pub async fn prune_processed(pool: PgPool, cancel: CancellationToken) {
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
