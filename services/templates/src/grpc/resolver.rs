//! `cairn.templates.v1.Resolver`.
use std::collections::BTreeMap;

use cairn_proto::templates as pb;
use tonic::{Request, Response, Status};

use super::convert::{opt_uuid, problem, resource_diff, snapshot, uuid};
use super::who;
use crate::app::App;
use crate::app::snapshots::ResolveRequest;

pub struct ResolverService {
    pub app: App,
}

fn parameters(json: &str) -> Result<BTreeMap<String, serde_json::Value>, Status> {
    if json.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    serde_json::from_str(json).map_err(|e| {
        Status::invalid_argument(format!("parameters_json: expected a JSON object: {e}"))
    })
}

#[tonic::async_trait]
impl pb::resolver_server::Resolver for ResolverService {
    async fn resolve(
        &self,
        req: Request<pb::ResolveRequest>,
    ) -> Result<Response<pb::ResolveResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let request = ResolveRequest {
            template_id: uuid("template_id", &r.template_id)?,
            version: r.version,
            instance_id: uuid("instance_id", &r.instance_id)?,
            instance_name: r.instance_name,
            environment: r.environment,
            parameters: parameters(&r.parameters_json)?,
            target_settings: r.target_settings.into_iter().collect(),
        };
        let (row, s, created) = self.app.resolve(&who, request).await?;
        Ok(Response::new(pb::ResolveResponse {
            snapshot: Some(snapshot(&row, &s)),
            created,
        }))
    }

    async fn diff(
        &self,
        req: Request<pb::DiffRequest>,
    ) -> Result<Response<pb::DiffResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let diffs = self
            .app
            .diff(
                &who,
                opt_uuid("previous_snapshot_id", &r.previous_snapshot_id)?,
                uuid("snapshot_id", &r.snapshot_id)?,
            )
            .await?;
        Ok(Response::new(pb::DiffResponse {
            resources: diffs.iter().map(resource_diff).collect(),
        }))
    }

    async fn get_snapshot(
        &self,
        req: Request<pb::GetSnapshotRequest>,
    ) -> Result<Response<pb::GetSnapshotResponse>, Status> {
        let who = who(&req)?;
        let id = uuid("snapshot_id", &req.get_ref().snapshot_id)?;
        let (row, s) = self.app.get_snapshot(&who, id).await?;
        Ok(Response::new(pb::GetSnapshotResponse {
            snapshot: Some(snapshot(&row, &s)),
        }))
    }

    async fn validate(
        &self,
        req: Request<pb::ValidateRequest>,
    ) -> Result<Response<pb::ValidateResponse>, Status> {
        let who = who(&req)?;
        let (problems, content_hash) = self
            .app
            .validate_document(&who, req.into_inner().document)
            .await?;
        Ok(Response::new(pb::ValidateResponse {
            valid: problems.is_empty(),
            problems: problems.iter().map(problem).collect(),
            content_hash,
        }))
    }
}
