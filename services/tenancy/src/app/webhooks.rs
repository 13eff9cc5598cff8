//! Webhook subscriptions: admins and owners manage them; the secret is generated here and
//! returned once. Another tenant's subscription is NOT_FOUND.
use cairn_auth::{Principal, Role};
use chrono::Utc;
use serde_json::json;
use uuid::Uuid;

use super::access;
use super::changes::{self, Change};
use super::{App, page_size};
use crate::domain::ids::TenantId;
use crate::domain::webhook::event_types::PING;
use crate::domain::webhook::{EventType, WebhookId, WebhookSecret, WebhookUrl};
use crate::error::{Error, Result};
use crate::store::webhook_deliveries::{self as deliveries, AttemptRow, DeliveryRow, NewDelivery};
use crate::store::webhooks::{self as store, NewSubscription, SubscriptionRow};
use crate::webhook_http;

/// Longest description accepted.
const MAX_DESCRIPTION: usize = 500;

/// What Create asks for.
pub struct NewWebhook {
    pub url: String,
    pub event_types: Vec<String>,
    pub description: String,
}

/// A delivery with its attempt log.
pub struct DeliveryView {
    pub delivery: DeliveryRow,
    pub attempts: Vec<AttemptRow>,
}

impl App {
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant))]
    pub async fn create_webhook(
        &self,
        who: &Principal,
        tenant: TenantId,
        new: NewWebhook,
    ) -> Result<(SubscriptionRow, WebhookSecret)> {
        access::member(who, tenant, Role::Admin, "tenant")?;
        let policy = self.webhooks.address_policy();
        let url = WebhookUrl::parse(&new.url, policy)?;
        let types = EventType::parse_list(&new.event_types)?;
        if new.description.len() > MAX_DESCRIPTION {
            return Err(Error::invalid_argument(format!(
                "description is longer than {MAX_DESCRIPTION} bytes"
            )));
        }
        webhook_http::check_url(&url, policy)
            .await
            .map_err(|why| Error::invalid_argument(format!("url: {why}")))?;
        let secret = WebhookSecret::generate()?;
        let row = cairn_db::transaction!(&self.pool, |conn| {
            let row = store::subscription_insert(
                conn,
                &NewSubscription {
                    subscription_id: WebhookId::new().0,
                    tenant_id: tenant.uuid(),
                    url: url.as_str(),
                    event_types: types.iter().map(|t| t.as_str().to_owned()).collect(),
                    secret: secret.expose(),
                    description: &new.description,
                },
            )
            .await?;
            changes::record(
                conn,
                Change {
                    tenant_id: Some(tenant.uuid()),
                    actor: &who.subject,
                    object_type: cairn_bus::Aggregate::Webhook,
                    object_id: row.subscription_id.to_string(),
                    event: "created",
                    // The host only: a URL's path or query may carry the receiver's token.
                    detail: json!({ "host": url.host_str(), "event_types": row.event_types }),
                },
            )
            .await?;
            Ok::<_, Error>(row)
        })?;
        self.committed();
        Ok((row, secret))
    }

    pub async fn list_webhooks(
        &self,
        who: &Principal,
        tenant: TenantId,
        after: Option<Uuid>,
        size: u32,
    ) -> Result<Vec<SubscriptionRow>> {
        access::member(who, tenant, Role::Admin, "tenant")?;
        let mut conn = self.pool.acquire().await?;
        Ok(store::subscription_list(&mut conn, tenant.uuid(), after, page_size(size)).await?)
    }

    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, webhook_id = %id))]
    pub async fn delete_webhook(
        &self,
        who: &Principal,
        tenant: TenantId,
        id: WebhookId,
    ) -> Result<()> {
        access::member(who, tenant, Role::Admin, "webhook")?;
        cairn_db::transaction!(&self.pool, |conn| {
            let row = store::subscription_delete(conn, tenant.uuid(), id.0)
                .await?
                .ok_or_else(|| Error::not_found("webhook".to_owned()))?;
            changes::record(
                conn,
                Change {
                    tenant_id: Some(tenant.uuid()),
                    actor: &who.subject,
                    object_type: cairn_bus::Aggregate::Webhook,
                    object_id: row.subscription_id.to_string(),
                    event: "deleted",
                    detail: json!({}),
                },
            )
            .await?;
            Ok::<_, Error>(())
        })?;
        self.committed();
        Ok(())
    }

    pub async fn list_webhook_deliveries(
        &self,
        who: &Principal,
        tenant: TenantId,
        id: WebhookId,
        before_sequence: Option<i64>,
        size: u32,
    ) -> Result<Vec<DeliveryView>> {
        access::member(who, tenant, Role::Admin, "webhook")?;
        let mut conn = self.pool.acquire().await?;
        store::subscription_get(&mut conn, tenant.uuid(), id.0)
            .await?
            .ok_or_else(|| Error::not_found("webhook".to_owned()))?;
        let rows = deliveries::delivery_list(
            &mut conn,
            tenant.uuid(),
            id.0,
            before_sequence,
            page_size(size),
        )
        .await?;
        let ids: Vec<Uuid> = rows.iter().map(|d| d.delivery_id).collect();
        let mut attempts = deliveries::attempts_of(&mut conn, &ids).await?;
        Ok(rows
            .into_iter()
            .map(|delivery| {
                let (mine, rest): (Vec<_>, Vec<_>) = attempts
                    .drain(..)
                    .partition(|a| a.delivery_id == delivery.delivery_id);
                attempts = rest;
                DeliveryView {
                    delivery,
                    attempts: mine,
                }
            })
            .collect())
    }

    /// Queues a `ping` delivery to the subscription (after its pending ones).
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, webhook_id = %id))]
    pub async fn test_webhook(
        &self,
        who: &Principal,
        tenant: TenantId,
        id: WebhookId,
    ) -> Result<DeliveryView> {
        access::member(who, tenant, Role::Admin, "webhook")?;
        let event_id = Uuid::now_v7();
        let data =
            json!({ "aggregate": "webhook", "aggregate_id": id.to_string(), "actor": who.subject });
        let delivery = cairn_db::transaction!(&self.pool, |conn| {
            let sequence = store::sequence_allocate(conn, tenant.uuid(), id.0)
                .await?
                .ok_or_else(|| Error::not_found("webhook".to_owned()))?;
            let row = deliveries::delivery_insert(
                conn,
                &NewDelivery {
                    subscription_id: id.0,
                    tenant_id: tenant.uuid(),
                    sequence,
                    event_id,
                    event_type: PING,
                    occurred_at: Utc::now(),
                    data: &data,
                },
            )
            .await?;
            Ok::<_, Error>(row)
        })?;
        self.webhook_notify.notify_one();
        Ok(DeliveryView {
            delivery,
            attempts: Vec::new(),
        })
    }
}
