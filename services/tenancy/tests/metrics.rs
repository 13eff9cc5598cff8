//! Tenancy's domain metric, scraped from its own `/metrics` listener:
//! `cairn_tenancy_webhook_deliveries_total` counts each settled delivery attempt by result:
//! a 500 (retry), a 400 (failed, not retried) and a 200 (delivered), from two events to one
//! subscription.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "webhooks_support/receiver.rs"]
mod receiver;

use std::net::SocketAddr;
use std::time::Duration;

use cairn_bus::Namespace;
use cairn_proto::events::{DeploymentChange, Event, event::Payload};
use cairn_proto::tenancy as pb;
use cairn_tenancy::WebhookArgs;
use cairn_tenancy::metrics::WEBHOOK_DELIVERIES;
use cairn_testkit::metrics::{sample, scrape, scrape_until};
use common::*;
use receiver::{Receiver, Reply};
use uuid::Uuid;

fn deliveries(text: &str, result: &str) -> f64 {
    sample(text, WEBHOOK_DELIVERIES, &[("result", result)])
}

/// A `deployment.failed` event of `tenant`.
fn failed_deployment(tenant: Uuid, name: &str) -> Event {
    let deployment_id = Uuid::now_v7().to_string();
    Event {
        event_id: Uuid::now_v7().to_string(),
        tenant_id: tenant.to_string(),
        aggregate: "deployment".into(),
        aggregate_id: deployment_id.clone(),
        event_type: "failed".into(),
        actor: "user-1".into(),
        occurred_at: Some(prost_types::Timestamp {
            seconds: 1_800_000_000,
            nanos: 0,
        }),
        payload: Some(Payload::Deployment(DeploymentChange {
            deployment_id,
            instance_name: name.into(),
            kind: "deploy".into(),
            status: "failed".into(),
            ..Default::default()
        })),
    }
}

#[tokio::test]
async fn webhook_deliveries_are_counted_by_result() {
    // Short backoffs and a fast poll; loopback allowed (the receiver is on 127.0.0.1).
    let mut app = spawn_app_with(Options {
        webhooks: WebhookArgs {
            webhook_allow_loopback: true,
            webhook_retry_base: Duration::from_millis(20),
            webhook_retry_max: Duration::from_millis(200),
            webhook_poll_interval: Duration::from_millis(50),
            webhook_timeout: Duration::from_secs(5),
            webhook_lease: Duration::from_secs(6),
            ..WebhookArgs::default()
        },
        ..Options::default()
    })
    .await;
    // Started again serving metrics (CAIRN_METRICS_ADDR).
    app.config.shared.metrics.metrics_addr = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    app.restart().await;
    let metrics = app.server().metrics_addr();
    let metrics = metrics.expect("the restarted service reports its metrics address");
    let rx = Receiver::start().await;
    let created = app
        .webhooks(&app.a.owner_token)
        .create_webhook(pb::CreateWebhookRequest {
            tenant_id: app.a.id.to_string(),
            url: rx.url(),
            event_types: vec!["deployment.failed".into()],
            description: "metrics".into(),
        })
        .await
        .unwrap()
        .into_inner();
    rx.set_secret(&created.secret);
    let before = scrape(metrics).await.unwrap();

    // The first event: a 500 (retried), then a 400 (given up). The second: a 200. One
    // subscription's deliveries go out in order, so the second settles last.
    rx.script([Reply::Status(500), Reply::Status(400)]);
    let ns = Namespace::with_prefix(&app.nats.prefix).unwrap();
    for name in ["one", "two"] {
        cairn_bus::publish_event(&app.nats.jetstream, &ns, &failed_deployment(app.a.id, name))
            .await
            .unwrap();
    }
    let after = scrape_until(metrics, Duration::from_secs(30), |t| {
        deliveries(t, "delivered") > deliveries(&before, "delivered")
    })
    .await
    .unwrap();
    let delta = |result| deliveries(&after, result) - deliveries(&before, result);
    assert_eq!(delta("retry"), 1.0, "{after}");
    assert_eq!(delta("failed"), 1.0, "{after}");
    assert_eq!(delta("delivered"), 1.0, "{after}");
    assert_eq!(delta("released"), 0.0, "{after}");
    let answered: Vec<Option<u16>> = rx.received().iter().map(|r| r.answered).collect();
    assert_eq!(answered, [Some(500), Some(400), Some(200)]);
    assert!(
        after.contains(&format!("# HELP {WEBHOOK_DELIVERIES}")),
        "described"
    );
    app.finish().await;
}
