//! What the scaffold's tests serve: one of the services' own gRPC services (the runner's
//! admin API; any would do), answering without a backend.
#![allow(dead_code)]

use cairn_proto::runner as pb;

/// Its name, as health and reflection know it.
pub const ADMIN: &str = "cairn.runner.v1.RunnerAdmin";

/// A RunnerAdmin that lists nothing (for a caller the auth layer let in: the principal is in
/// the request) and refuses every cancel with `cancel_code`.
pub struct Admin {
    pub cancel_code: tonic::Code,
}

impl Default for Admin {
    fn default() -> Self {
        Admin {
            cancel_code: tonic::Code::Unimplemented,
        }
    }
}

impl Admin {
    /// The service, ready for `GrpcServer::add_service`.
    pub fn server(self) -> pb::runner_admin_server::RunnerAdminServer<Admin> {
        pb::runner_admin_server::RunnerAdminServer::new(self)
    }
}

#[tonic::async_trait]
impl pb::runner_admin_server::RunnerAdmin for Admin {
    async fn list_runs(
        &self,
        request: tonic::Request<pb::ListRunsRequest>,
    ) -> Result<tonic::Response<pb::ListRunsResponse>, tonic::Status> {
        // The auth layer put the caller's principal into the request.
        cairn_auth::principal(&request)?;
        Ok(tonic::Response::new(pb::ListRunsResponse::default()))
    }

    async fn cancel_run(
        &self,
        _request: tonic::Request<pb::CancelRunRequest>,
    ) -> Result<tonic::Response<pb::CancelRunResponse>, tonic::Status> {
        Err(tonic::Status::new(self.cancel_code, "not in this test"))
    }
}
