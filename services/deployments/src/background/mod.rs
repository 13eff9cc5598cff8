//! Background tasks of the service: the workflow worker, the consumers of run results, run
//! logs and drift events, and the expiry of approvals.

pub mod drift_events;
pub mod expiry;
pub mod log_consumer;
pub mod results;
pub mod worker;
