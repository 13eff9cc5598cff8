//! `cairn.tenancy.v1.Audit`.
use cairn_proto::tenancy as pb;
use tonic::{Request, Response, Status};

use super::convert::{audit_entry, from_ts};
use super::who;
use crate::app::{App, page_size};
use crate::domain::audit::{AuditFilter, TenantScope};
use crate::domain::ids::TenantId;
use crate::error::Error;

pub struct AuditService {
    pub app: App,
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

#[tonic::async_trait]
impl pb::audit_server::Audit for AuditService {
    async fn list_audit_entries(
        &self,
        req: Request<pb::ListAuditEntriesRequest>,
    ) -> Result<Response<pb::ListAuditEntriesResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let scope = if r.tenant_id.is_empty() {
            TenantScope::All
        } else {
            TenantScope::Tenant(
                TenantId::parse("tenant_id", &r.tenant_id)
                    .map_err(Error::from)?
                    .uuid(),
            )
        };
        let before_seq = if r.page_token.is_empty() {
            None
        } else {
            Some(
                r.page_token
                    .parse::<i64>()
                    .map_err(|_| Error::invalid_argument("page_token is not valid".to_owned()))?,
            )
        };
        let limit = page_size(r.page_size);
        let filter = AuditFilter {
            scope,
            actor: non_empty(r.actor),
            object_type: non_empty(r.object_type),
            object_id: non_empty(r.object_id),
            action: non_empty(r.action),
            since: r.since.as_ref().map(|t| from_ts("since", t)).transpose()?,
            until: r.until.as_ref().map(|t| from_ts("until", t)).transpose()?,
            before_seq,
            limit,
        };
        let rows = self.app.list_audit(&who, filter).await?;
        let next_page_token = if i64::try_from(rows.len()).unwrap_or(i64::MAX) >= limit {
            rows.last().map(|r| r.seq.to_string()).unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListAuditEntriesResponse {
            entries: rows.iter().map(audit_entry).collect(),
            next_page_token,
        }))
    }
}
