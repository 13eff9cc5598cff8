//! All SQL of the coordinator, one file per resource. Functions named resource-first; the
//! `_in_txn`-style ones take `&mut PgConnection` so the app layer can compose them inside
//! `cairn_db::transaction`. The store never decides policy.

pub mod attempts;
pub mod backend;
pub mod flags;
pub mod generations;
pub mod locks;
pub mod masked_plans;
pub mod pending;
pub mod plans;
pub mod quarantine;
pub mod runs;
pub mod states;

pub use sqlx::PgConnection as Conn;
