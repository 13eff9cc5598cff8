//! gRPC handlers: read the principal the auth layer put in the request, convert the request
//! into domain values, call the app, convert back.

mod audit;
mod convert;
mod targets;
mod tenants;
mod tokens;
mod users;
mod webhooks;

pub use audit::AuditService;
pub use targets::TargetsService;
pub use tenants::TenantsService;
pub use tokens::TokensService;
pub use users::UsersService;
pub use webhooks::WebhooksService;

use cairn_auth::Principal;
use tonic::{Request, Status};

pub(crate) fn who<T>(req: &Request<T>) -> Result<Principal, Status> {
    cairn_auth::principal(req).cloned()
}
