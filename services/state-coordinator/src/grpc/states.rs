//! `cairn.state.v1.States`.
use cairn_proto::state as pb;
use tonic::{Request, Response, Status};

use cairn_contract::{InstanceId, StateId, TenantId};

use super::convert::{invalid, optional, state};
use super::who;
use crate::app::App;

pub struct StatesService {
    pub app: App,
}

const MAX_PAGE: u32 = 500;

#[tonic::async_trait]
impl pb::states_server::States for StatesService {
    #[tracing::instrument(skip_all)]
    async fn create_state(
        &self,
        req: Request<pb::CreateStateRequest>,
    ) -> Result<Response<pb::CreateStateResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let (row, created) = self
            .app
            .create_state(
                &who,
                TenantId::parse("tenant_id", &r.tenant_id).map_err(invalid)?,
                InstanceId::parse("instance_id", &r.instance_id).map_err(invalid)?,
                &r.physical_name,
            )
            .await?;
        Ok(Response::new(pb::CreateStateResponse {
            state: Some(state(&row)),
            created,
        }))
    }

    async fn get_state(
        &self,
        req: Request<pb::GetStateRequest>,
    ) -> Result<Response<pb::GetStateResponse>, Status> {
        let who = who(&req)?;
        let id = StateId::parse("state_id", &req.get_ref().state_id).map_err(invalid)?;
        let row = self.app.get_state(&who, id).await?;
        Ok(Response::new(pb::GetStateResponse {
            state: Some(state(&row)),
        }))
    }

    async fn list_states(
        &self,
        req: Request<pb::ListStatesRequest>,
    ) -> Result<Response<pb::ListStatesResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let size = if r.page_size == 0 {
            100
        } else {
            r.page_size.min(MAX_PAGE)
        };
        let rows = self
            .app
            .list_states(
                &who,
                TenantId::parse("tenant_id", &r.tenant_id).map_err(invalid)?,
                optional(&r.instance_id, |s| InstanceId::parse("instance_id", s))?,
                optional(&r.page_token, |s| StateId::parse("page_token", s))?,
                i64::from(size),
            )
            .await?;
        let next = if rows.len() == size as usize {
            rows.last()
                .map(|s| s.state_id.to_string())
                .unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListStatesResponse {
            states: rows.iter().map(state).collect(),
            next_page_token: next,
        }))
    }
}
