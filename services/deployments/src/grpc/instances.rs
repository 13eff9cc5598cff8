//! `cairn.deployments.v1.Instances`.
use cairn_proto::deployments as pb;
use tonic::{Request, Response, Status};

use super::convert::{instance, next_token, page_token, parameters, reference, tenant};
use super::who;
use crate::app::instances::CreateInstance;
use crate::app::{App, page_size};

pub struct InstancesService {
    pub app: App,
}

#[tonic::async_trait]
impl pb::instances_server::Instances for InstancesService {
    async fn create_instance(
        &self,
        req: Request<pb::CreateInstanceRequest>,
    ) -> Result<Response<pb::CreateInstanceResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let request = CreateInstance {
            tenant: tenant(&r.tenant_id)?,
            name: r.name,
            template: reference("template_ref", &r.template_ref)?,
            template_version: r.template_version,
            target: reference("target_ref", &r.target_ref)?,
            environment: r.environment,
            parameters: parameters("parameters_json", &r.parameters_json)?,
        };
        let view = self.app.create_instance(&who, request).await?;
        Ok(Response::new(pb::CreateInstanceResponse {
            instance: Some(instance(&view)),
        }))
    }

    async fn get_instance(
        &self,
        req: Request<pb::GetInstanceRequest>,
    ) -> Result<Response<pb::GetInstanceResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        let view = self
            .app
            .get_instance(
                &who,
                tenant(&r.tenant_id)?,
                &reference("instance_ref", &r.instance_ref)?,
            )
            .await?;
        Ok(Response::new(pb::GetInstanceResponse {
            instance: Some(instance(&view)),
        }))
    }

    async fn list_instances(
        &self,
        req: Request<pb::ListInstancesRequest>,
    ) -> Result<Response<pb::ListInstancesResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        let size = page_size(r.page_size);
        let views = self
            .app
            .list_instances(
                &who,
                tenant(&r.tenant_id)?,
                page_token(&r.page_token)?,
                size,
            )
            .await?;
        Ok(Response::new(pb::ListInstancesResponse {
            next_page_token: next_token(&views, size, |v| v.row.instance_id),
            instances: views.iter().map(instance).collect(),
        }))
    }

    async fn update_instance(
        &self,
        req: Request<pb::UpdateInstanceRequest>,
    ) -> Result<Response<pb::UpdateInstanceResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        let view = self
            .app
            .update_instance(
                &who,
                tenant(&r.tenant_id)?,
                &reference("instance_ref", &r.instance_ref)?,
                r.template_version,
                &parameters("parameters_patch_json", &r.parameters_patch_json)?,
            )
            .await?;
        Ok(Response::new(pb::UpdateInstanceResponse {
            instance: Some(instance(&view)),
        }))
    }

    async fn delete_instance(
        &self,
        req: Request<pb::DeleteInstanceRequest>,
    ) -> Result<Response<pb::DeleteInstanceResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        self.app
            .delete_instance(
                &who,
                tenant(&r.tenant_id)?,
                &reference("instance_ref", &r.instance_ref)?,
            )
            .await?;
        Ok(Response::new(pb::DeleteInstanceResponse {}))
    }
}
