//! Pure rules of drift: when a resource is due ([`schedule`]) and what a scan's result
//! means for it ([`verdict`]). No SQL, gRPC or NATS here.

pub mod schedule;
pub mod verdict;
