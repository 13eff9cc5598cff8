//! Background tasks: the pending-object sweeper and generation/plan retention.

pub mod sweeper;
