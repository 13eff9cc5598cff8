//! Background tasks of the service (timer and notify driven, no inputs).

pub mod job_relay;
