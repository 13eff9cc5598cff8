//! All SQL of the service, one file per resource. Functions are named resource-first and
//! take `&mut PgConnection` so the app layer composes them in one transaction. Races are
//! settled here by compare-and-set and unique constraints; the store never decides policy.

pub mod deployments;
pub mod events;
pub mod instances;
pub mod logs;
pub mod runs;
pub mod slots;
pub mod steps;
