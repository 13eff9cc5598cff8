//! The audit log: written with every change, queried per tenant with filters and pages,
//! append-only for the runtime role (and for everyone, by triggers), and fed once per event
//! by the consumer of `cairn.events.>`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use cairn_bus::Namespace;
use cairn_proto::events::Event;
use cairn_proto::tenancy as pb;
use common::*;
use uuid::Uuid;

async fn entries(app: &TestApp, req: pb::ListAuditEntriesRequest) -> pb::ListAuditEntriesResponse {
    app.audit(&app.a.owner_token)
        .list_audit_entries(req)
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test]
async fn changes_are_audited_and_queryable_per_tenant() {
    let app = spawn_app().await;
    let a = app.a.id.to_string();
    let target = app.create_target(&app.a, "prod").await;
    app.targets(&app.a.owner_token)
        .update_target(pb::UpdateTargetRequest {
            tenant_id: a.clone(),
            target_id: target.to_string(),
            spec: Some(local_spec("/srv/2", 4)),
        })
        .await
        .unwrap();
    app.create_target(&app.b, "other").await;

    let by_object = entries(
        &app,
        pb::ListAuditEntriesRequest {
            tenant_id: a.clone(),
            object_id: target.to_string(),
            ..Default::default()
        },
    )
    .await;
    let actions: Vec<&str> = by_object
        .entries
        .iter()
        .map(|e| e.action.as_str())
        .collect();
    assert_eq!(actions, vec!["target.updated", "target.created"]);
    assert!(
        by_object
            .entries
            .iter()
            .all(|e| e.actor == app.a.owner.to_string() && e.source == "tenancy")
    );
    assert!(by_object.entries[0].detail_json.contains("local-default"));

    let created = entries(
        &app,
        pb::ListAuditEntriesRequest {
            tenant_id: a.clone(),
            action: "target.created".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        created.entries.len(),
        1,
        "tenant B's target.created leaked into A's view"
    );

    // Pages: newest first, no overlap, then exhausted.
    let mut seen = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = entries(
            &app,
            pb::ListAuditEntriesRequest {
                tenant_id: a.clone(),
                page_size: 2,
                page_token: page_token.clone(),
                ..Default::default()
            },
        )
        .await;
        seen.extend(page.entries.iter().map(|e| e.entry_id.clone()));
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    let all = entries(
        &app,
        pb::ListAuditEntriesRequest {
            tenant_id: a.clone(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        seen,
        all.entries
            .iter()
            .map(|e| e.entry_id.clone())
            .collect::<Vec<_>>()
    );
    assert!(all.entries.len() >= 3);

    // Time range: nothing in the future.
    let future = prost_types::Timestamp {
        seconds: chrono::Utc::now().timestamp() + 3600,
        nanos: 0,
    };
    let none = entries(
        &app,
        pb::ListAuditEntriesRequest {
            tenant_id: a.clone(),
            since: Some(future),
            ..Default::default()
        },
    )
    .await;
    assert!(none.entries.is_empty());

    // The platform admin may read across tenants; B's owner may not.
    let everything = entries(&app, pb::ListAuditEntriesRequest::default()).await;
    assert!(
        everything
            .entries
            .iter()
            .any(|e| e.tenant_id == app.b.id.to_string())
    );
    let err = app
        .audit(&app.b.owner_token)
        .list_audit_entries(pb::ListAuditEntriesRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    app.finish().await;
}

#[tokio::test]
async fn the_audit_table_is_append_only() {
    let app = spawn_app().await;
    let mut runtime = app.runtime_conn().await;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log")
        .fetch_one(&mut runtime)
        .await
        .unwrap();
    assert!(n > 0);
    for stmt in [
        "UPDATE audit_log SET actor = 'someone else'",
        "DELETE FROM audit_log",
        "TRUNCATE audit_log",
    ] {
        let err = sqlx::query(sqlx::AssertSqlSafe(stmt))
            .execute(&mut runtime)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("permission denied"),
            "{stmt} as the runtime role: {err}"
        );
    }
    // The runtime role may still append and read.
    sqlx::query(
        "INSERT INTO audit_log (entry_id, actor, action, object_type, object_id, source, occurred_at)
         VALUES ($1, 'test', 'x.y', 'x', '1', 'events', now())",
    )
    .bind(Uuid::now_v7())
    .execute(&mut runtime)
    .await
    .unwrap();
    // Even the owner of the table (and the superuser) is stopped by the triggers.
    let mut admin = app.admin_conn().await;
    for stmt in [
        "UPDATE tenancy.audit_log SET actor = 'someone else'",
        "DELETE FROM tenancy.audit_log",
        "TRUNCATE tenancy.audit_log",
    ] {
        let err = sqlx::query(sqlx::AssertSqlSafe(stmt))
            .execute(&mut admin)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("append-only"),
            "{stmt} as superuser: {err}"
        );
    }
    let after: i64 = sqlx::query_scalar("SELECT count(*) FROM tenancy.audit_log")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(after, n + 1);
    app.finish().await;
}

async fn count_entry(app: &TestApp, id: Uuid) -> i64 {
    let mut conn = app.admin_conn().await;
    sqlx::query_scalar("SELECT count(*) FROM tenancy.audit_log WHERE entry_id = $1")
        .bind(id)
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

async fn processed(app: &TestApp, id: Uuid) -> bool {
    let mut conn = app.admin_conn().await;
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM tenancy.processed_events WHERE consumer = 'tenancy-audit' AND event_id = $1)")
        .bind(id)
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn other_services_events_are_recorded_once_even_when_redelivered() {
    let app = spawn_app().await;
    let ns = Namespace::with_prefix(&app.nats.prefix).unwrap();
    let id = Uuid::now_v7();
    let event = Event {
        event_id: id.to_string(),
        tenant_id: app.a.id.to_string(),
        aggregate: "state".into(),
        aggregate_id: Uuid::new_v4().to_string(),
        event_type: "recovered".into(),
        actor: "someone".into(),
        occurred_at: None,
        payload: Some(cairn_proto::events::event::Payload::Recovered(
            cairn_proto::events::Recovered {
                state_id: "s1".into(),
                new_generation: 3,
                recovered_from: 2,
                reason: "test".into(),
            },
        )),
    };
    let subject = cairn_bus::event_subject(&ns, &event).unwrap();
    // Published twice under different message ids, so JetStream stores (and delivers) both.
    cairn_bus::publish_msg(&app.nats.jetstream, &subject, &format!("{id}-1"), &event)
        .await
        .unwrap();
    cairn_bus::publish_msg(&app.nats.jetstream, &subject, &format!("{id}-2"), &event)
        .await
        .unwrap();
    // A marker published after both: once it is recorded, both copies were handled.
    let marker = Event {
        event_id: Uuid::now_v7().to_string(),
        aggregate_id: "marker".into(),
        payload: None,
        ..event.clone()
    };
    let marker_id = Uuid::parse_str(&marker.event_id).unwrap();
    cairn_bus::publish_event(&app.nats.jetstream, &ns, &marker)
        .await
        .unwrap();
    let recorded = eventually(Duration::from_secs(20), || async {
        (count_entry(&app, marker_id).await == 1).then_some(())
    })
    .await;
    assert!(
        recorded.is_some(),
        "the consumer did not record the marker event"
    );
    assert_eq!(count_entry(&app, id).await, 1);
    let got = entries(
        &app,
        pb::ListAuditEntriesRequest {
            tenant_id: app.a.id.to_string(),
            action: "state.recovered".into(),
            ..Default::default()
        },
    )
    .await;
    let entry = got
        .entries
        .iter()
        .find(|e| e.entry_id == id.to_string())
        .unwrap();
    assert_eq!(
        (entry.source.as_str(), entry.actor.as_str()),
        ("events", "someone")
    );
    assert!(entry.detail_json.contains("\"new_generation\":3"));

    // Tenancy's own events come back through the consumer and are not recorded twice.
    let target = app.create_target(&app.a, "prod").await;
    let own = entries(
        &app,
        pb::ListAuditEntriesRequest {
            tenant_id: app.a.id.to_string(),
            object_id: target.to_string(),
            ..Default::default()
        },
    )
    .await;
    let own_id = Uuid::parse_str(&own.entries[0].entry_id).unwrap();
    let consumed = eventually(Duration::from_secs(20), || async {
        processed(&app, own_id).await.then_some(())
    })
    .await;
    assert!(
        consumed.is_some(),
        "tenancy's own event did not come back through the consumer"
    );
    assert_eq!(count_entry(&app, own_id).await, 1);
    app.nats.delete_streams().await;
    app.finish().await;
}
