//! gRPC handlers: take the principal the auth layer put in the request, convert the request
//! into domain values, call the app, convert back.

mod convert;
mod decisions;
mod deployments;
mod instances;
mod reads;

pub use deployments::DeploymentsService;
pub use instances::InstancesService;

use cairn_auth::Principal;
use tonic::{Request, Status};

pub(crate) fn who<T>(req: &Request<T>) -> Result<Principal, Status> {
    cairn_auth::principal(req).cloned()
}
