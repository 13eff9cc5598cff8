//! `cairn.templates.v1.Templates`.
use cairn_proto::templates as pb;
use tonic::{Request, Response, Status};

use super::convert::{opt_uuid, template, uuid, version};
use super::{page_size, who};
use crate::app::App;

pub struct TemplatesService {
    pub app: App,
}

#[tonic::async_trait]
impl pb::templates_server::Templates for TemplatesService {
    async fn create_template(
        &self,
        req: Request<pb::CreateTemplateRequest>,
    ) -> Result<Response<pb::CreateTemplateResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let (row, created) = self
            .app
            .create_template(
                &who,
                uuid("tenant_id", &r.tenant_id)?,
                &r.name,
                &r.description,
            )
            .await?;
        Ok(Response::new(pb::CreateTemplateResponse {
            template: Some(template(&row)),
            created,
        }))
    }

    async fn get_template(
        &self,
        req: Request<pb::GetTemplateRequest>,
    ) -> Result<Response<pb::GetTemplateResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        // By id, or by tenant and name when no id is given.
        let row = if r.template_id.is_empty() && !r.name.is_empty() {
            let tenant_id = uuid("tenant_id", &r.tenant_id)?;
            self.app
                .get_template_by_name(&who, tenant_id, &r.name)
                .await?
        } else {
            let id = uuid("template_id", &r.template_id)?;
            self.app.get_template(&who, id).await?
        };
        Ok(Response::new(pb::GetTemplateResponse {
            template: Some(template(&row)),
        }))
    }

    async fn list_templates(
        &self,
        req: Request<pb::ListTemplatesRequest>,
    ) -> Result<Response<pb::ListTemplatesResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let size = page_size(r.page_size);
        let rows = self
            .app
            .list_templates(
                &who,
                uuid("tenant_id", &r.tenant_id)?,
                opt_uuid("page_token", &r.page_token)?,
                i64::from(size),
            )
            .await?;
        let next_page_token = match rows.last() {
            Some(last) if rows.len() == size as usize => last.template_id.to_string(),
            _ => String::new(),
        };
        Ok(Response::new(pb::ListTemplatesResponse {
            templates: rows.iter().map(template).collect(),
            next_page_token,
        }))
    }

    async fn publish_version(
        &self,
        req: Request<pb::PublishVersionRequest>,
    ) -> Result<Response<pb::PublishVersionResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let (row, created) = self
            .app
            .publish_version(&who, uuid("template_id", &r.template_id)?, r.document)
            .await?;
        Ok(Response::new(pb::PublishVersionResponse {
            version: Some(version(&row)),
            created,
        }))
    }

    async fn get_version(
        &self,
        req: Request<pb::GetVersionRequest>,
    ) -> Result<Response<pb::GetVersionResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let row = self
            .app
            .get_version(&who, uuid("template_id", &r.template_id)?, &r.version)
            .await?;
        Ok(Response::new(pb::GetVersionResponse {
            version: Some(version(&row)),
        }))
    }

    async fn list_versions(
        &self,
        req: Request<pb::ListVersionsRequest>,
    ) -> Result<Response<pb::ListVersionsResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let size = page_size(r.page_size);
        let after = if r.page_token.is_empty() {
            0
        } else {
            r.page_token
                .parse::<i32>()
                .map_err(|_| Status::invalid_argument("page_token: not a version number"))?
        };
        let rows = self
            .app
            .list_versions(
                &who,
                uuid("template_id", &r.template_id)?,
                after,
                i64::from(size),
            )
            .await?;
        let next_page_token = match rows.last() {
            Some(last) if rows.len() == size as usize => last.number.to_string(),
            _ => String::new(),
        };
        Ok(Response::new(pb::ListVersionsResponse {
            versions: rows.iter().map(version).collect(),
            next_page_token,
        }))
    }
}
