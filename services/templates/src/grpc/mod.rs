//! gRPC handlers: take the principal the auth layer put in the request, convert the request
//! into domain values, call the app, convert back.

mod convert;
mod resolver;
mod templates;

pub use resolver::ResolverService;
pub use templates::TemplatesService;

use cairn_auth::Principal;
use tonic::{Request, Status};

pub(crate) fn who<T>(req: &Request<T>) -> Result<Principal, Status> {
    cairn_auth::principal(req).cloned()
}

/// Largest page a list returns.
pub(crate) const MAX_PAGE: u32 = 500;

pub(crate) fn page_size(requested: u32) -> u32 {
    if requested == 0 {
        100
    } else {
        requested.min(MAX_PAGE)
    }
}
