//! `cairn.runner.v1.RunnerAdmin`: the runs in flight on this instance, and cancelling one.
//! Platform admins only.

use cairn_proto::runner as pb;
use tonic::{Request, Response, Status};

use super::active::ActiveRuns;

/// The admin service of one runner instance.
#[derive(Debug, Clone)]
pub struct AdminService {
    /// The runs in flight.
    pub active: ActiveRuns,
    /// This instance's id.
    pub instance: String,
    /// The targets it serves.
    pub targets: Vec<String>,
}

fn require_platform_admin<T>(req: &Request<T>) -> Result<(), Status> {
    let principal = cairn_auth::principal(req)?;
    if principal.is_platform_admin() {
        Ok(())
    } else {
        Err(Status::permission_denied(format!(
            "needs an admin with scope {}",
            cairn_auth::PLATFORM_ADMIN_SCOPE
        )))
    }
}

#[tonic::async_trait]
impl pb::runner_admin_server::RunnerAdmin for AdminService {
    async fn list_runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<pb::ListRunsResponse>, Status> {
        require_platform_admin(&request)?;
        Ok(Response::new(pb::ListRunsResponse {
            runner_instance: self.instance.clone(),
            targets: self.targets.clone(),
            runs: self.active.list(),
        }))
    }

    async fn cancel_run(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Result<Response<pb::CancelRunResponse>, Status> {
        require_platform_admin(&request)?;
        let req = request.get_ref();
        if cairn_contract::RunId::parse("run_id", &req.run_id).is_err() {
            return Err(Status::invalid_argument("run_id is not a UUID"));
        }
        let cancelled = self.active.cancel(&req.run_id);
        if cancelled {
            tracing::warn!(
                run_id = req.run_id,
                reason = req.reason,
                "run cancelled by an admin"
            );
        }
        Ok(Response::new(pb::CancelRunResponse { cancelled }))
    }
}
