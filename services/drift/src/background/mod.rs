//! Background tasks: the event consumer (the tracking projection), the run result
//! consumer and the scheduler.

pub mod events;
pub mod results;
pub mod scheduler;
