//! `cairn.tenancy.v1.Webhooks`.
use cairn_proto::tenancy as pb;
use tonic::{Request, Response, Status};

use super::convert::{next_token, page_token, ts};
use super::who;
use crate::app::webhooks::{DeliveryView, NewWebhook};
use crate::app::{App, page_size};
use crate::domain::ids::TenantId;
use crate::domain::webhook::WebhookId;
use crate::error::Error;
use crate::store::webhooks::SubscriptionRow;

pub struct WebhooksService {
    pub app: App,
}

fn ids(tenant: &str, webhook: &str) -> Result<(TenantId, WebhookId), Error> {
    Ok((
        TenantId::parse("tenant_id", tenant)?,
        WebhookId::parse("webhook_id", webhook)?,
    ))
}

fn webhook(r: &SubscriptionRow) -> pb::Webhook {
    pb::Webhook {
        webhook_id: r.subscription_id.to_string(),
        tenant_id: r.tenant_id.to_string(),
        url: r.url.clone(),
        event_types: r.event_types.clone(),
        description: r.description.clone(),
        enabled: r.enabled,
        disabled_reason: r.disabled_reason.clone().unwrap_or_default(),
        consecutive_failures: u32::try_from(r.consecutive_failures).unwrap_or(0),
        created_at: Some(ts(r.created_at)),
        disabled_at: r.disabled_at.map(ts),
    }
}

fn delivery(v: &DeliveryView) -> pb::WebhookDelivery {
    let d = &v.delivery;
    pb::WebhookDelivery {
        delivery_id: d.delivery_id.to_string(),
        webhook_id: d.subscription_id.to_string(),
        sequence: u64::try_from(d.sequence).unwrap_or(0),
        event_id: d.event_id.to_string(),
        event_type: d.event_type.clone(),
        status: d.status.clone(),
        attempts: u32::try_from(d.attempts).unwrap_or(0),
        created_at: Some(ts(d.created_at)),
        next_attempt_at: (d.status == "pending").then(|| ts(d.next_attempt_at)),
        finished_at: d.finished_at.map(ts),
        attempt_log: v
            .attempts
            .iter()
            .map(|a| pb::WebhookAttempt {
                attempt: u32::try_from(a.attempt).unwrap_or(0),
                started_at: Some(ts(a.started_at)),
                latency_ms: a
                    .latency_ms
                    .and_then(|l| u64::try_from(l).ok())
                    .unwrap_or(0),
                response_code: a
                    .response_code
                    .and_then(|c| u32::try_from(c).ok())
                    .unwrap_or(0),
                outcome: a.outcome.clone(),
                error: a.error.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

/// A sequence page token (deliveries come newest first).
fn sequence_token(s: &str) -> Result<Option<i64>, Error> {
    if s.is_empty() {
        return Ok(None);
    }
    s.parse::<i64>()
        .map(Some)
        .map_err(|_| Error::invalid_argument("page_token is not valid".to_owned()))
}

#[tonic::async_trait]
impl pb::webhooks_server::Webhooks for WebhooksService {
    async fn create_webhook(
        &self,
        req: Request<pb::CreateWebhookRequest>,
    ) -> Result<Response<pb::CreateWebhookResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let tenant = TenantId::parse("tenant_id", &r.tenant_id).map_err(Error::from)?;
        let (row, secret) = self
            .app
            .create_webhook(
                &who,
                tenant,
                NewWebhook {
                    url: r.url,
                    event_types: r.event_types,
                    description: r.description,
                },
            )
            .await?;
        Ok(Response::new(pb::CreateWebhookResponse {
            webhook: Some(webhook(&row)),
            secret: secret.expose().to_owned(),
        }))
    }

    async fn list_webhooks(
        &self,
        req: Request<pb::ListWebhooksRequest>,
    ) -> Result<Response<pb::ListWebhooksResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let tenant = TenantId::parse("tenant_id", &r.tenant_id).map_err(Error::from)?;
        let rows = self
            .app
            .list_webhooks(&who, tenant, page_token(&r.page_token)?, r.page_size)
            .await?;
        Ok(Response::new(pb::ListWebhooksResponse {
            next_page_token: next_token(&rows, page_size(r.page_size), |w| {
                w.subscription_id.to_string()
            }),
            webhooks: rows.iter().map(webhook).collect(),
        }))
    }

    async fn delete_webhook(
        &self,
        req: Request<pb::DeleteWebhookRequest>,
    ) -> Result<Response<pb::DeleteWebhookResponse>, Status> {
        let who = who(&req)?;
        let (tenant, id) = ids(&req.get_ref().tenant_id, &req.get_ref().webhook_id)?;
        self.app.delete_webhook(&who, tenant, id).await?;
        Ok(Response::new(pb::DeleteWebhookResponse {}))
    }

    async fn list_webhook_deliveries(
        &self,
        req: Request<pb::ListWebhookDeliveriesRequest>,
    ) -> Result<Response<pb::ListWebhookDeliveriesResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let (tenant, id) = ids(&r.tenant_id, &r.webhook_id)?;
        let views = self
            .app
            .list_webhook_deliveries(
                &who,
                tenant,
                id,
                sequence_token(&r.page_token)?,
                r.page_size,
            )
            .await?;
        Ok(Response::new(pb::ListWebhookDeliveriesResponse {
            next_page_token: next_token(&views, page_size(r.page_size), |v| {
                v.delivery.sequence.to_string()
            }),
            deliveries: views.iter().map(delivery).collect(),
        }))
    }

    async fn test_webhook(
        &self,
        req: Request<pb::TestWebhookRequest>,
    ) -> Result<Response<pb::TestWebhookResponse>, Status> {
        let who = who(&req)?;
        let (tenant, id) = ids(&req.get_ref().tenant_id, &req.get_ref().webhook_id)?;
        let view = self.app.test_webhook(&who, tenant, id).await?;
        Ok(Response::new(pb::TestWebhookResponse {
            delivery: Some(delivery(&view)),
        }))
    }
}
