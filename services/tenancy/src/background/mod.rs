//! Background tasks: the consumer feeding every service's domain events into the audit log,
//! the consumer queueing webhook deliveries, and the webhook sender.

pub mod audit_consumer;
pub mod webhook_consumer;
pub mod webhook_sender;
