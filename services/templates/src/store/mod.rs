//! All SQL of the service, one file per resource. Functions are named resource-first and
//! take `&mut PgConnection` so the app layer can compose them in one transaction. The store
//! never decides policy.

pub mod snapshots;
pub mod templates;
pub mod versions;
