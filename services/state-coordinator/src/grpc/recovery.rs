//! `cairn.state.v1.Recovery`: admin-only inspection and repair of fenced states.
use std::pin::Pin;

use cairn_proto::state as pb;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use cairn_contract::{StateId, TenantId};

use super::convert::{gen_u64, invalid, optional, state, ts};
use super::who;
use crate::app::App;
use crate::error::Error;

pub struct RecoveryService {
    pub app: App,
}

type VerifyStream = Pin<Box<dyn Stream<Item = Result<pb::VerifyReportItem, Status>> + Send>>;

#[tonic::async_trait]
impl pb::recovery_server::Recovery for RecoveryService {
    async fn list_fenced(
        &self,
        req: Request<pb::ListFencedRequest>,
    ) -> Result<Response<pb::ListFencedResponse>, Status> {
        let who = who(&req)?;
        let tenant = optional(&req.get_ref().tenant_id, |s| {
            TenantId::parse("tenant_id", s)
        })?;
        let rows = self.app.list_fenced(&who, tenant).await?;
        Ok(Response::new(pb::ListFencedResponse {
            states: rows.iter().map(state).collect(),
        }))
    }

    async fn inspect_state(
        &self,
        req: Request<pb::InspectStateRequest>,
    ) -> Result<Response<pb::InspectStateResponse>, Status> {
        let who = who(&req)?;
        let id = StateId::parse("state_id", &req.get_ref().state_id).map_err(invalid)?;
        let (row, gens) = self.app.inspect_state(&who, id).await?;
        Ok(Response::new(pb::InspectStateResponse {
            state: Some(state(&row)),
            generations: gens
                .into_iter()
                .map(|g| pb::GenerationInfo {
                    generation: gen_u64(g.row.generation),
                    r#final: g.row.is_final,
                    tofu_serial: g.row.tofu_serial,
                    lineage: g.row.lineage,
                    size: gen_u64(g.row.size),
                    key_id: g.row.key_id,
                    run_id: g.row.run_id.map(|r| r.to_string()).unwrap_or_default(),
                    attempt: g
                        .row
                        .attempt
                        .and_then(|a| u32::try_from(a).ok())
                        .unwrap_or(0),
                    recovered_from: g.row.recovered_from.map(gen_u64).unwrap_or(0),
                    created_at: Some(ts(g.row.created_at)),
                    verified: g.problem.is_none(),
                    verify_error: g.problem.unwrap_or_default(),
                })
                .collect(),
        }))
    }

    #[tracing::instrument(skip_all, fields(state_id = %req.get_ref().state_id))]
    async fn recover(
        &self,
        req: Request<pb::RecoverRequest>,
    ) -> Result<Response<pb::RecoverResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let rollback = i64::try_from(r.rollback_to_generation).map_err(|_| {
            Error::invalid_argument("rollback_to_generation out of range".to_owned())
        })?;
        let done = self
            .app
            .recover(
                &who,
                StateId::parse("state_id", &r.state_id).map_err(invalid)?,
                rollback,
                &r.reason,
            )
            .await?;
        Ok(Response::new(pb::RecoverResponse {
            state: Some(state(&done.state)),
            new_generation: gen_u64(done.new_generation),
            already_recovered: done.already_recovered,
        }))
    }

    type VerifyAllStream = VerifyStream;

    async fn verify_all(
        &self,
        req: Request<pb::VerifyAllRequest>,
    ) -> Result<Response<Self::VerifyAllStream>, Status> {
        let who = who(&req)?;
        crate::app::access::require_platform_admin(&who)?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let app = self.app.clone();
        tokio::spawn(async move {
            let err_tx = tx.clone();
            if let Err(e) = app.verify_all(&who, tx).await {
                let _ = err_tx.send(Err(e)).await;
            }
        });
        let stream = tokio_stream::StreamExt::map(ReceiverStream::new(rx), |item| {
            item.map(|i| pb::VerifyReportItem {
                state_id: i.state_id.map(|s| s.to_string()).unwrap_or_default(),
                tenant_id: i.tenant_id.map(|s| s.to_string()).unwrap_or_default(),
                generation: gen_u64(i.generation),
                ok: i.ok,
                problem: i.problem,
                unknown_object_key: i.unknown_object_key,
            })
            .map_err(Status::from)
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn set_after_restore(
        &self,
        req: Request<pb::SetAfterRestoreRequest>,
    ) -> Result<Response<pb::SetAfterRestoreResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let enabled = self
            .app
            .set_after_restore(&who, r.enabled, &r.reason)
            .await?;
        Ok(Response::new(pb::SetAfterRestoreResponse { enabled }))
    }

    async fn force_unlock(
        &self,
        req: Request<pb::ForceUnlockRequest>,
    ) -> Result<Response<pb::ForceUnlockResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let released = self
            .app
            .force_unlock(
                &who,
                StateId::parse("state_id", &r.state_id).map_err(invalid)?,
                &r.lock_id,
                &r.reason,
            )
            .await?;
        Ok(Response::new(pb::ForceUnlockResponse { released }))
    }
}
