//! Background tasks: the consumer feeding every service's domain events into the audit log,
//! the consumer queueing webhook deliveries, and the webhook sender.

pub mod audit_consumer;
pub mod webhook_consumer;
pub mod webhook_sender;

use std::time::Duration;

use async_nats::jetstream;
use cairn_bus::{BusError, Consumer, Namespace};

/// The most events the event consumers handle in one transaction (and ask for per pull).
pub const EVENT_BATCH: usize = 64;

/// How long an event consumer's batch waits for more events after its first. Events come
/// in bursts (a wave of runs admitted or finished, each with its state's events): a burst
/// is recorded in a few transactions instead of one per event. An audit entry or a webhook
/// delivery is queued that much later.
pub const EVENT_LINGER: Duration = Duration::from_millis(100);

/// Creates (or binds to) the durable consumer `name` of every event, taking them in batches
/// of [`EVENT_BATCH`] with [`EVENT_LINGER`].
pub async fn events_consumer(
    js: &jetstream::Context,
    ns: &Namespace,
    name: &str,
    ack_wait: Duration,
) -> Result<Consumer, BusError> {
    let filter = ns.events_filter(None, None, None)?;
    Consumer::with_options(
        js,
        &ns.events_stream(),
        name,
        &filter,
        cairn_bus::ConsumerOptions {
            batch: EVENT_BATCH,
            linger: EVENT_LINGER,
            ..cairn_bus::ConsumerOptions::new(ack_wait)
        },
    )
    .await
}
