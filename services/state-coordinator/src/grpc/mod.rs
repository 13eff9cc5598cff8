//! gRPC handlers: authenticate (the principal the auth layer put in the request), convert
//! the request into domain values, call the app, convert back.

mod convert;
mod recovery;
mod runs;
mod states;

pub use recovery::RecoveryService;
pub use runs::RunsService;
pub use states::StatesService;

use cairn_auth::Principal;
use tonic::{Request, Status};

pub(crate) fn who<T>(req: &Request<T>) -> Result<Principal, Status> {
    cairn_auth::principal(req).cloned()
}
