//! Use cases, one file per resource. Authorization lives here; the gRPC handlers
//! authenticate and convert, then call these functions.

pub mod snapshots;
pub mod templates;
pub mod versions;

use std::sync::Arc;

use cairn_templating::{Library, Limits};
use sqlx::PgPool;

/// Everything the use cases need.
#[derive(Clone)]
pub struct App {
    pub pool: PgPool,
    /// The module library, loaded once at start-up.
    pub library: Arc<Library>,
    pub limits: Limits,
}
