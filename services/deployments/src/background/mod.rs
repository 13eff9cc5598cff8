//! Background tasks of the service (timer and notify driven, no inputs).

pub mod expiry;
pub mod log_consumer;
pub mod results;
pub mod worker;
