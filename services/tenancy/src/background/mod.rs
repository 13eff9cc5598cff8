//! Background tasks: the consumer feeding every service's domain events into the audit log.

pub mod audit_consumer;
