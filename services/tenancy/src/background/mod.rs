//! Background tasks: the consumer feeding every service's domain events into the audit log,
//! the consumer queueing webhook deliveries, and the webhook sender.

pub mod audit_consumer;
pub mod webhook_consumer;
pub mod webhook_sender;

use std::time::Duration;

/// The most events the event consumers handle in one transaction (and ask for per pull).
pub const EVENT_BATCH: usize = 64;

/// How long an event consumer's batch waits for more events after its first. Events come
/// in bursts (a wave of runs admitted or finished, each with its state's events): a burst
/// is recorded in a few transactions instead of one per event. An audit entry or a webhook
/// delivery is queued that much later.
pub const EVENT_LINGER: Duration = Duration::from_millis(100);
