//! Webhooks end to end against real PostgreSQL and NATS and a loopback receiver that checks
//! signatures: events on `cairn.events.>` become signed deliveries with the documented body;
//! 5xx and 429 are retried, other 4xx are not; order per subscription holds; a sender killed
//! mid-delivery loses nothing and re-sends nothing confirmed; 20 failures in a row disable a
//! subscription; loopback and private URLs are refused; other tenants see NOT_FOUND; Test
//! sends a ping.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "webhooks_support/receiver.rs"]
mod receiver;

use std::sync::Arc;
use std::time::Duration;

use cairn_auth::Role;
use cairn_bus::Namespace;
use cairn_proto::events::{DeploymentChange, Event, event::Payload};
use cairn_proto::tenancy as pb;
use cairn_tenancy::WebhookArgs;
use cairn_tenancy::background::webhook_sender::Sender;
use common::*;
use receiver::{Receiver, Reply, verify};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Short backoffs and a fast poll; loopback allowed (the receiver is on 127.0.0.1).
fn fast() -> WebhookArgs {
    WebhookArgs {
        webhook_allow_loopback: true,
        webhook_retry_base: Duration::from_millis(20),
        webhook_retry_max: Duration::from_millis(200),
        webhook_poll_interval: Duration::from_millis(50),
        webhook_timeout: Duration::from_secs(5),
        webhook_lease: Duration::from_secs(6),
        ..WebhookArgs::default()
    }
}

async fn spawn(webhooks: WebhookArgs) -> TestApp {
    spawn_app_with(Options {
        webhooks,
        ..Options::default()
    })
    .await
}

/// Creates a webhook in tenant A for `types`; returns (id, secret).
async fn create(app: &TestApp, url: &str, types: &[&str]) -> (String, String) {
    let r = app
        .webhooks(&app.a.owner_token)
        .create_webhook(pb::CreateWebhookRequest {
            tenant_id: app.a.id.to_string(),
            url: url.into(),
            event_types: types.iter().map(|t| (*t).to_owned()).collect(),
            description: "test".into(),
        })
        .await
        .expect("create webhook")
        .into_inner();
    (r.webhook.unwrap().webhook_id, r.secret)
}

fn deployment_event(tenant: Uuid, event_type: &str, name: &str) -> Event {
    let deployment_id = Uuid::now_v7().to_string();
    Event {
        event_id: Uuid::now_v7().to_string(),
        tenant_id: tenant.to_string(),
        aggregate: "deployment".into(),
        aggregate_id: deployment_id.clone(),
        event_type: event_type.into(),
        actor: "user-1".into(),
        occurred_at: Some(prost_types::Timestamp {
            seconds: 1_800_000_000,
            nanos: 0,
        }),
        payload: Some(Payload::Deployment(DeploymentChange {
            deployment_id,
            instance_id: "inst-1".into(),
            instance_name: name.into(),
            kind: "deploy".into(),
            status: event_type.into(),
            target_id: "tgt-1".into(),
            environment: "production".into(),
            steps: 3,
            succeeded: 3,
            failed: 0,
            skipped: 0,
            plan_set_hash: "abc".into(),
            summary: "3 to add".into(),
        })),
    }
}

async fn publish(app: &TestApp, event: &Event) {
    let ns = Namespace::with_prefix(&app.nats.prefix).unwrap();
    cairn_bus::publish_event(&app.nats.jetstream, &ns, event)
        .await
        .unwrap();
}

async fn deliveries(app: &TestApp, webhook_id: &str) -> Vec<pb::WebhookDelivery> {
    app.webhooks(&app.a.owner_token)
        .list_webhook_deliveries(pb::ListWebhookDeliveriesRequest {
            tenant_id: app.a.id.to_string(),
            webhook_id: webhook_id.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .deliveries
}

/// Waits until the subscription's deliveries satisfy `check`.
async fn wait_deliveries(
    app: &TestApp,
    webhook_id: &str,
    what: &str,
    check: impl Fn(&[pb::WebhookDelivery]) -> bool,
) -> Vec<pb::WebhookDelivery> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = deliveries(app, webhook_id).await;
        if check(&got) {
            return got;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out waiting for {what}; deliveries: {got:#?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn webhook_row(app: &TestApp, id: &str) -> pb::Webhook {
    app.webhooks(&app.a.owner_token)
        .list_webhooks(pb::ListWebhooksRequest {
            tenant_id: app.a.id.to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .webhooks
        .into_iter()
        .find(|w| w.webhook_id == id)
        .expect("webhook listed")
}

#[tokio::test]
async fn an_event_becomes_one_signed_delivery_with_the_documented_body() {
    let app = spawn(fast()).await;
    let rx = Receiver::start().await;
    let (id, secret) = create(&app, &rx.url(), &["deployment.succeeded"]).await;
    assert!(secret.starts_with("whsec_"));
    rx.set_secret(&secret);

    // A type the subscription does not name, then one it does.
    publish(&app, &deployment_event(app.a.id, "requested", "web")).await;
    let event = deployment_event(app.a.id, "succeeded", "web");
    publish(&app, &event).await;

    let got = rx.wait_for("one delivery", |r| !r.is_empty()).await;
    let d = wait_deliveries(&app, &id, "delivered", |d| {
        d.len() == 1 && d[0].status == "delivered"
    })
    .await;
    assert_eq!(got.len(), 1, "exactly one request: {got:#?}");
    let req = &got[0];
    assert!(
        req.valid,
        "signature must verify under the subscription's secret"
    );
    assert!(
        !verify("whsec_someone-else", &req.signature, &req.raw),
        "a signature must not verify under another secret"
    );
    let b = &req.body;
    assert_eq!(b["event_id"], event.event_id);
    assert_eq!(b["type"], "deployment.succeeded");
    assert_eq!(b["tenant"], app.a.id.to_string());
    assert_eq!(b["occurred_at"], "2027-01-15T08:00:00.000Z");
    assert_eq!(b["sequence"], 1);
    assert_eq!(b["webhook_id"], id);
    assert_eq!(b["data"]["instance_name"], "web");
    assert_eq!(b["data"]["environment"], "production");
    assert_eq!(b["data"]["summary"], "3 to add");
    assert_eq!(b["data"]["aggregate"], "deployment");
    assert!(b["data"].get("plan_set_hash").is_none());
    assert_eq!(d[0].sequence, 1);
    assert_eq!(d[0].event_id, event.event_id);
    assert_eq!(d[0].attempt_log.len(), 1);
    assert_eq!(d[0].attempt_log[0].response_code, 200);

    // The secret is never returned again, and never in the audit log.
    let audit = app
        .audit(&app.a.owner_token)
        .list_audit_entries(pb::ListAuditEntriesRequest {
            tenant_id: app.a.id.to_string(),
            object_type: "webhook".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(audit.entries.iter().any(|e| e.action == "webhook.created"));
    assert!(
        audit
            .entries
            .iter()
            .all(|e| !e.detail_json.contains(&secret))
    );
    app.finish().await;
}

#[tokio::test]
async fn server_errors_are_retried_until_one_succeeds_with_every_attempt_logged() {
    let app = spawn(fast()).await;
    let rx = Receiver::start().await;
    let (id, secret) = create(&app, &rx.url(), &["deployment.failed"]).await;
    rx.set_secret(&secret);
    rx.script([Reply::Status(500), Reply::Status(500), Reply::Status(500)]);
    let event = deployment_event(app.a.id, "failed", "web");
    publish(&app, &event).await;

    let d = wait_deliveries(&app, &id, "delivered after retries", |d| {
        d.len() == 1 && d[0].status == "delivered"
    })
    .await;
    let got = rx.received();
    assert_eq!(got.len(), 4, "three 500s then a 200");
    assert!(
        got.iter()
            .all(|r| r.valid && r.body["event_id"] == event.event_id)
    );
    assert!(
        got.windows(2).all(|w| w[0].raw == w[1].raw),
        "every attempt sends the same body"
    );
    assert_eq!(d[0].attempts, 4);
    let log: Vec<(u32, u32, &str)> = d[0]
        .attempt_log
        .iter()
        .map(|a| (a.attempt, a.response_code, a.outcome.as_str()))
        .collect();
    assert_eq!(
        log,
        [
            (1, 500, "retry"),
            (2, 500, "retry"),
            (3, 500, "retry"),
            (4, 200, "delivered")
        ]
    );
    // A success ends the failure streak.
    assert_eq!(webhook_row(&app, &id).await.consecutive_failures, 0);
    app.finish().await;
}

#[tokio::test]
async fn a_client_error_is_not_retried_and_does_not_block_the_next_delivery() {
    let app = spawn(fast()).await;
    let rx = Receiver::start().await;
    let (id, secret) = create(&app, &rx.url(), &["deployment.failed"]).await;
    rx.set_secret(&secret);
    rx.script([Reply::Status(400)]);
    publish(&app, &deployment_event(app.a.id, "failed", "one")).await;
    publish(&app, &deployment_event(app.a.id, "failed", "two")).await;

    let d = wait_deliveries(&app, &id, "both settled", |d| {
        d.len() == 2 && d.iter().all(|x| x.status != "pending")
    })
    .await;
    // Newest first.
    assert_eq!(d[1].status, "failed");
    assert_eq!(d[1].attempts, 1, "a 400 is not retried");
    assert_eq!(d[1].attempt_log[0].outcome, "failed");
    assert_eq!(d[1].attempt_log[0].response_code, 400);
    assert_eq!(d[0].status, "delivered");
    let got = rx.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].body["data"]["instance_name"], "one");
    assert_eq!(got[1].body["data"]["instance_name"], "two");
    app.finish().await;
}

#[tokio::test]
async fn rate_limited_deliveries_wait_for_retry_after() {
    let app = spawn(fast()).await;
    let rx = Receiver::start().await;
    let (id, secret) = create(&app, &rx.url(), &["deployment.failed"]).await;
    rx.set_secret(&secret);
    rx.script([Reply::RetryAfter(429, 1)]);
    publish(&app, &deployment_event(app.a.id, "failed", "web")).await;
    wait_deliveries(&app, &id, "delivered", |d| {
        d.len() == 1 && d[0].status == "delivered"
    })
    .await;
    let got = rx.received();
    assert_eq!(got.len(), 2);
    // The retry came no earlier than the receiver asked (the backoff alone is ≤ 200ms).
    assert_eq!(got[0].answered, Some(429));
    assert!(got[1].at.duration_since(got[0].at) >= Duration::from_secs(1));
    app.finish().await;
}

#[tokio::test]
async fn deliveries_of_one_subscription_go_out_in_sequence_order() {
    let app = spawn(fast()).await;
    let rx = Receiver::start().await;
    let (id, secret) = create(&app, &rx.url(), &["deployment.succeeded"]).await;
    rx.set_secret(&secret);
    // The first delivery fails twice: the later ones must wait for it.
    rx.script([Reply::Status(503), Reply::Status(502)]);
    for i in 0..6 {
        publish(
            &app,
            &deployment_event(app.a.id, "succeeded", &format!("e{i}")),
        )
        .await;
    }
    wait_deliveries(&app, &id, "all delivered", |d| {
        d.len() == 6 && d.iter().all(|x| x.status == "delivered")
    })
    .await;
    let got = rx.received();
    let seqs: Vec<i64> = got
        .iter()
        .map(|r| r.body["sequence"].as_i64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        [1, 1, 1, 2, 3, 4, 5, 6],
        "in order, each after the previous is confirmed"
    );
    let names: Vec<&str> = got[2..]
        .iter()
        .map(|r| r.body["data"]["instance_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["e0", "e1", "e2", "e3", "e4", "e5"],
        "sequence follows the events' order"
    );
    app.finish().await;
}

#[tokio::test]
async fn a_sender_killed_mid_delivery_loses_nothing_and_resends_nothing_confirmed() {
    // The server's own sender is off; the test runs senders itself so it can kill one.
    let args = WebhookArgs {
        webhook_concurrency: 0,
        webhook_lease: Duration::from_secs(3),
        webhook_timeout: Duration::from_secs(2),
        ..fast()
    };
    let app = spawn(args.clone()).await;
    let rx = Receiver::start().await;
    let (id, secret) = create(&app, &rx.url(), &["deployment.succeeded"]).await;
    rx.set_secret(&secret);
    let pool = app.server().app().pool.clone();
    let sender = || {
        Sender::new(
            pool.clone(),
            &WebhookArgs {
                webhook_concurrency: 4,
                ..args.clone()
            },
            Arc::new(Notify::new()),
            Arc::new(Notify::new()),
        )
        .unwrap()
    };

    let first = sender().spawn(CancellationToken::new());
    let confirmed = deployment_event(app.a.id, "succeeded", "confirmed");
    publish(&app, &confirmed).await;
    wait_deliveries(&app, &id, "first delivered", |d| {
        d.len() == 1 && d[0].status == "delivered"
    })
    .await;

    // The next request hangs at the receiver; the sender dies while it waits.
    rx.script([Reply::Hang]);
    let cut = deployment_event(app.a.id, "succeeded", "cut");
    publish(&app, &cut).await;
    rx.wait_for("the request that hangs", |r| r.len() == 2)
        .await;
    first.abort();
    let _ = first.await;
    rx.release();
    let d = deliveries(&app, &id).await;
    assert_eq!(d[0].status, "pending", "not confirmed: {d:#?}");

    // A new sender takes the delivery over once the dead one's lease has run out.
    let second = CancellationToken::new();
    let second_task = sender().spawn(second.clone());
    let d = wait_deliveries(&app, &id, "the cut delivery re-sent", |d| {
        d.len() == 2 && d.iter().all(|x| x.status == "delivered")
    })
    .await;
    let outcomes: Vec<&str> = d[0]
        .attempt_log
        .iter()
        .map(|a| a.outcome.as_str())
        .collect();
    assert_eq!(outcomes, ["abandoned", "delivered"]);
    let got = rx.received();
    let of = |e: &Event| {
        got.iter()
            .filter(|r| r.body["event_id"] == e.event_id)
            .count()
    };
    assert_eq!(
        of(&confirmed),
        1,
        "a confirmed delivery is never sent again"
    );
    assert_eq!(of(&cut), 2, "the cut delivery is sent again");

    // Stopping a sender gracefully hands in-flight work back at once.
    rx.script([Reply::Hang]);
    let handed = deployment_event(app.a.id, "succeeded", "handed-back");
    publish(&app, &handed).await;
    rx.wait_for("the request that hangs", |r| r.len() == 4)
        .await;
    second.cancel();
    second_task.await.unwrap();
    rx.release();
    let d = deliveries(&app, &id).await;
    assert_eq!(d[0].status, "pending");
    assert_eq!(d[0].attempt_log[0].outcome, "abandoned");
    let third = sender().spawn(CancellationToken::new());
    wait_deliveries(&app, &id, "the handed-back delivery sent", |d| {
        d.len() == 3 && d.iter().all(|x| x.status == "delivered")
    })
    .await;
    third.abort();
    app.finish().await;
}

#[tokio::test]
async fn twenty_failures_in_a_row_disable_the_subscription() {
    let app = spawn(fast()).await;
    let rx = Receiver::start().await;
    let (id, secret) = create(&app, &rx.url(), &["deployment.failed"]).await;
    rx.set_secret(&secret);
    rx.script(std::iter::repeat_n(Reply::Status(410), 20));
    for i in 0..20 {
        publish(
            &app,
            &deployment_event(app.a.id, "failed", &format!("e{i}")),
        )
        .await;
    }
    let disabled = eventually(Duration::from_secs(30), || async {
        let w = webhook_row(&app, &id).await;
        (!w.enabled).then_some(w)
    })
    .await
    .expect("disabled after 20 failures");
    assert_eq!(disabled.consecutive_failures, 20);
    assert!(disabled.disabled_reason.contains("20"));
    assert!(disabled.disabled_at.is_some());
    assert_eq!(rx.received().len(), 20);

    // Recorded (and published as webhook.disabled through the outbox).
    let audit = app
        .audit(&app.a.owner_token)
        .list_audit_entries(pb::ListAuditEntriesRequest {
            tenant_id: app.a.id.to_string(),
            action: "webhook.disabled".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(audit.entries.len(), 1);
    assert_eq!(audit.entries[0].object_id, id);
    let mut conn = app.runtime_conn().await;
    let sent: Option<bool> =
        sqlx::query_scalar("SELECT sent_at IS NOT NULL FROM outbox WHERE event_id = $1::uuid")
            .bind(&audit.entries[0].entry_id)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
    assert!(sent.is_some(), "webhook.disabled is in the outbox");

    // A disabled subscription queues nothing more.
    let marker = deployment_event(app.a.id, "failed", "after");
    publish(&app, &marker).await;
    let (other, _) = create(&app, &rx.url(), &["deployment.failed"]).await;
    publish(&app, &deployment_event(app.a.id, "failed", "marker")).await;
    wait_deliveries(&app, &other, "the marker reaches the other webhook", |d| {
        d.iter().any(|x| x.status == "delivered")
    })
    .await;
    assert_eq!(deliveries(&app, &id).await.len(), 20);
    app.finish().await;
}

#[tokio::test]
async fn loopback_and_private_urls_are_refused() {
    let strict = spawn(WebhookArgs::default()).await;
    for url in [
        "http://127.0.0.1:9/hook",
        "https://127.0.0.1:9/hook",
        "https://localhost/hook",
        "https://[::1]/hook",
        "https://10.1.2.3/hook",
        "https://169.254.169.254/latest",
    ] {
        let err = strict
            .webhooks(&strict.a.owner_token)
            .create_webhook(pb::CreateWebhookRequest {
                tenant_id: strict.a.id.to_string(),
                url: url.into(),
                event_types: vec!["deployment.failed".into()],
                description: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{url}: {err:?}");
    }
    strict.finish().await;

    // With the flag: loopback passes, private ranges still do not; unknown types fail.
    let mut local = spawn(fast()).await;
    let rx = Receiver::start().await;
    let (id, _) = create(&local, &rx.url(), &["deployment.failed"]).await;
    for (url, types) in [
        (
            "https://192.168.0.10/hook",
            vec!["deployment.failed".to_owned()],
        ),
        (rx.url().as_str(), vec!["deployment.exploded".to_owned()]),
        (rx.url().as_str(), vec![]),
    ] {
        let err = local
            .webhooks(&local.a.owner_token)
            .create_webhook(pb::CreateWebhookRequest {
                tenant_id: local.a.id.to_string(),
                url: url.into(),
                event_types: types,
                description: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{url}: {err:?}");
    }

    // The check runs again at delivery: restarted without the flag, the loopback
    // subscription's delivery fails without a request.
    local.webhooks = WebhookArgs {
        webhook_allow_loopback: false,
        ..fast()
    };
    local.restart().await;
    publish(&local, &deployment_event(local.a.id, "failed", "web")).await;
    let d = wait_deliveries(&local, &id, "refused", |d| {
        d.len() == 1 && d[0].status == "failed"
    })
    .await;
    assert!(d[0].attempt_log[0].error.contains("refused"), "{d:#?}");
    assert!(rx.received().is_empty());
    local.finish().await;
}

#[tokio::test]
async fn other_tenants_webhooks_are_not_found_and_managing_needs_admin() {
    let app = spawn(fast()).await;
    let rx = Receiver::start().await;
    let (id, _) = create(&app, &rx.url(), &["deployment.failed"]).await;
    let b = app.webhooks(&app.b.owner_token);
    let a_id = app.a.id.to_string();
    let b_id = app.b.id.to_string();
    for tenant in [&a_id, &b_id] {
        let err = b
            .clone()
            .delete_webhook(pb::DeleteWebhookRequest {
                tenant_id: tenant.clone(),
                webhook_id: id.clone(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::NotFound, "delete via {tenant}");
        let err = b
            .clone()
            .test_webhook(pb::TestWebhookRequest {
                tenant_id: tenant.clone(),
                webhook_id: id.clone(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::NotFound, "test via {tenant}");
        let err = b
            .clone()
            .list_webhook_deliveries(pb::ListWebhookDeliveriesRequest {
                tenant_id: tenant.clone(),
                webhook_id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::NotFound, "deliveries via {tenant}");
    }
    let err = b
        .clone()
        .list_webhooks(pb::ListWebhooksRequest {
            tenant_id: a_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    let own = b
        .clone()
        .list_webhooks(pb::ListWebhooksRequest {
            tenant_id: b_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(own.webhooks.is_empty());

    // Below admin in A: refused.
    let op = app
        .add_member(&app.a, "op@example.com", Role::Operator)
        .await;
    let op_token = app.mint(op, app.a.id, Role::Operator);
    let err = app
        .webhooks(&op_token)
        .list_webhooks(pb::ListWebhooksRequest {
            tenant_id: a_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);

    // The owner deletes it; then it is gone.
    app.webhooks(&app.a.owner_token)
        .delete_webhook(pb::DeleteWebhookRequest {
            tenant_id: a_id.clone(),
            webhook_id: id.clone(),
        })
        .await
        .unwrap();
    assert!(
        app.webhooks(&app.a.owner_token)
            .list_webhooks(pb::ListWebhooksRequest {
                tenant_id: a_id,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .webhooks
            .is_empty()
    );
    app.finish().await;
}

#[tokio::test]
async fn test_sends_a_signed_ping() {
    let app = spawn(fast()).await;
    let rx = Receiver::start().await;
    let (id, secret) = create(&app, &rx.url(), &["deployment.failed"]).await;
    rx.set_secret(&secret);
    let queued = app
        .webhooks(&app.a.owner_token)
        .test_webhook(pb::TestWebhookRequest {
            tenant_id: app.a.id.to_string(),
            webhook_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .delivery
        .unwrap();
    assert_eq!(queued.event_type, "ping");
    assert_eq!(queued.status, "pending");
    let got = rx.wait_for("the ping", |r| !r.is_empty()).await;
    assert!(got[0].valid);
    assert_eq!(got[0].body["type"], "ping");
    assert_eq!(got[0].body["event_id"], queued.event_id);
    assert_eq!(got[0].body["sequence"], 1);
    wait_deliveries(&app, &id, "ping delivered", |d| {
        d.len() == 1 && d[0].status == "delivered"
    })
    .await;
    app.finish().await;
}

#[tokio::test]
async fn two_senders_never_send_one_delivery_twice() {
    let args = WebhookArgs {
        webhook_concurrency: 0,
        ..fast()
    };
    let app = spawn(args.clone()).await;
    let rx = Receiver::start().await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(create(&app, &rx.url(), &["deployment.succeeded"]).await.0);
    }
    let pool = app.server().app().pool.clone();
    let cancel = CancellationToken::new();
    let senders: Vec<_> = (0..2)
        .map(|_| {
            Sender::new(
                pool.clone(),
                &WebhookArgs {
                    webhook_concurrency: 4,
                    ..args.clone()
                },
                Arc::new(Notify::new()),
                Arc::new(Notify::new()),
            )
            .unwrap()
            .spawn(cancel.clone())
        })
        .collect();
    for i in 0..8 {
        publish(
            &app,
            &deployment_event(app.a.id, "succeeded", &format!("e{i}")),
        )
        .await;
    }
    for id in &ids {
        wait_deliveries(&app, id, "all delivered", |d| {
            d.len() == 8 && d.iter().all(|x| x.status == "delivered" && x.attempts == 1)
        })
        .await;
    }
    let got = rx.received();
    assert_eq!(got.len(), 24, "3 subscriptions × 8 events, each sent once");
    for id in &ids {
        let seqs: Vec<i64> = got
            .iter()
            .filter(|r| r.body["webhook_id"] == *id)
            .map(|r| r.body["sequence"].as_i64().unwrap())
            .collect();
        assert_eq!(seqs, (1..=8).collect::<Vec<_>>(), "in order for {id}");
    }
    cancel.cancel();
    for s in senders {
        s.await.unwrap();
    }
    app.finish().await;
}
