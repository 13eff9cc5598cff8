//! Webhook subscriptions (tenancy, admins): create one (its signing secret shown once),
//! list, delete, test with a `ping`, and each delivery's attempts.
use cairn_proto::tenancy as pb;

use crate::app::{App, all_pages};
use crate::cli::{OutputFormat, WebhooksCmd};
use crate::error::{CliError, Result};
use crate::output;
use crate::views::{CreatedWebhookView, DeliveryAttemptRow, DeliveryView, WebhookView};

pub async fn webhooks(app: &App, cmd: &WebhooksCmd) -> Result {
    let tenant_id = app.tenant_id().await?;
    let hooks = app.cairn.webhooks();
    match cmd {
        WebhooksCmd::Create {
            url,
            events,
            description,
        } => {
            let event_types: Vec<String> = events
                .iter()
                .map(|e| e.trim().to_owned())
                .filter(|e| !e.is_empty())
                .collect();
            if event_types.is_empty() {
                return Err(CliError::Usage(
                    "--events needs at least one event type".into(),
                ));
            }
            let r = hooks
                .create_webhook(pb::CreateWebhookRequest {
                    tenant_id,
                    url: url.clone(),
                    event_types,
                    description: description.clone(),
                })
                .await?;
            let view = CreatedWebhookView {
                webhook: WebhookView::from(r.webhook.unwrap_or_default()),
                secret: r.secret,
            };
            if app.output == OutputFormat::Table {
                eprintln!(
                    "the signing secret is shown once; store it now (deliveries carry \
                     Cairn-Signature: t=…,v1=HMAC-SHA256 of \"t.body\" with it)"
                );
            }
            output::one(app.output, &view)
        }
        WebhooksCmd::List => {
            let list = all_pages(|page_token| {
                let hooks = hooks.clone();
                let tenant_id = tenant_id.clone();
                async move {
                    let r = hooks
                        .list_webhooks(pb::ListWebhooksRequest {
                            tenant_id,
                            page_size: 100,
                            page_token,
                        })
                        .await?;
                    Ok((r.webhooks, r.next_page_token))
                }
            })
            .await?;
            let views: Vec<WebhookView> = list.into_iter().map(WebhookView::from).collect();
            output::list(app.output, &views)
        }
        WebhooksCmd::Deliveries { webhook_id } => {
            let list = all_pages(|page_token| {
                let hooks = hooks.clone();
                let tenant_id = tenant_id.clone();
                let webhook_id = webhook_id.clone();
                async move {
                    let r = hooks
                        .list_webhook_deliveries(pb::ListWebhookDeliveriesRequest {
                            tenant_id,
                            webhook_id,
                            page_size: 100,
                            page_token,
                        })
                        .await?;
                    Ok((r.deliveries, r.next_page_token))
                }
            })
            .await?;
            let views: Vec<DeliveryView> = list.into_iter().map(DeliveryView::from).collect();
            match app.output {
                OutputFormat::Json => output::json(&views),
                OutputFormat::Table => {
                    let rows: Vec<DeliveryAttemptRow> =
                        views.iter().flat_map(DeliveryAttemptRow::rows).collect();
                    output::list(app.output, &rows)
                }
            }
        }
        WebhooksCmd::Test { webhook_id } => {
            let r = hooks
                .test_webhook(pb::TestWebhookRequest {
                    tenant_id,
                    webhook_id: webhook_id.clone(),
                })
                .await?;
            let view = DeliveryView::from(r.delivery.unwrap_or_default());
            if app.output == OutputFormat::Table {
                eprintln!("ping queued; follow it with: cairn webhooks deliveries {webhook_id}");
            }
            output::one(app.output, &view)
        }
        WebhooksCmd::Delete { webhook_id } => {
            hooks
                .delete_webhook(pb::DeleteWebhookRequest {
                    tenant_id,
                    webhook_id: webhook_id.clone(),
                })
                .await?;
            match app.output {
                OutputFormat::Json => output::json(&serde_json::json!({
                    "webhook_id": webhook_id, "deleted": true
                })),
                OutputFormat::Table => {
                    println!("deleted webhook {webhook_id}");
                    Ok(())
                }
            }
        }
    }
}
