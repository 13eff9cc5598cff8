//! Target validation through the run queue: ValidateTarget records a pending validation and
//! queues the request on `cairn.runq.<target id>.validate` through the message outbox (read back here
//! from the stream, `Nats-Msg-Id` = the validation id); the events consumer stores a
//! runner's `target.validated` answer, only the newest request's (an older one's late
//! answer changes nothing); another tenant's target is NOT_FOUND and nothing changes; a
//! viewer or operator is PERMISSION_DENIED; a local target cannot be validated; changing the
//! role forgets the last validation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, pull};
use cairn_auth::Role;
use cairn_proto::events as epb;
use cairn_proto::runner as rpb;
use cairn_proto::tenancy as pb;
use common::*;
use futures::StreamExt;
use prost::Message;

const ROLE: &str = "arn:aws:iam::210987654321:role/cairn-deploy";
const WITHIN: Duration = Duration::from_secs(20);

fn aws_spec(role_arn: &str) -> pb::TargetSpec {
    pb::TargetSpec {
        provider: Some(pb::target_spec::Provider::Aws(pb::AwsProvider {
            region: "eu-west-1".into(),
            role_arn: role_arn.into(),
            external_id: String::new(),
        })),
        credential_ref: "platform-aws".into(),
        max_concurrent_deployments: 1,
        enabled: true,
    }
}

async fn create_aws(app: &TestApp, tenant: &Tenant, name: &str) -> pb::Target {
    app.targets(&tenant.owner_token)
        .create_target(pb::CreateTargetRequest {
            tenant_id: tenant.id.to_string(),
            name: name.into(),
            spec: Some(aws_spec(ROLE)),
        })
        .await
        .unwrap()
        .into_inner()
        .target
        .unwrap()
}

async fn validate(
    app: &TestApp,
    token: &str,
    tenant: uuid::Uuid,
    target_ref: &str,
) -> Result<pb::ValidateTargetResponse, tonic::Status> {
    app.targets(token)
        .validate_target(pb::ValidateTargetRequest {
            tenant_id: tenant.to_string(),
            target_ref: target_ref.into(),
        })
        .await
        .map(tonic::Response::into_inner)
}

async fn get(app: &TestApp, tenant: &Tenant, target_id: &str) -> pb::Target {
    app.targets(&tenant.owner_token)
        .get_target(pb::GetTargetRequest {
            tenant_id: tenant.id.to_string(),
            target_id: target_id.into(),
            name: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .target
        .unwrap()
}

fn ns(app: &TestApp) -> cairn_bus::Namespace {
    cairn_bus::Namespace::with_prefix(&app.nats.prefix).unwrap()
}

/// The requests the relay published on `cairn.runq.<target_id>.validate`: (Nats-Msg-Id,
/// request). Nothing goes to the target's run requests (`cairn.runq.<target_id>`).
async fn queued(
    app: &TestApp,
    target_id: &str,
    want: usize,
) -> Vec<(String, rpb::TargetValidationRequest)> {
    let ns = ns(app);
    let stream = app
        .nats
        .jetstream
        .get_stream(ns.runq_stream())
        .await
        .unwrap();
    let consumer = stream
        .create_consumer(pull::Config {
            durable_name: Some(format!("test-{target_id}")),
            filter_subject: ns.runq_validate(target_id).unwrap(),
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + WITHIN;
    while out.len() < want {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {want} requests queued",
            out.len()
        );
        let mut batch = consumer
            .fetch()
            .max_messages(10)
            .expires(Duration::from_millis(300))
            .messages()
            .await
            .unwrap();
        while let Some(Ok(msg)) = batch.next().await {
            let id = msg
                .headers
                .as_ref()
                .and_then(|h| h.get("Nats-Msg-Id"))
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default();
            out.push((
                id,
                rpb::TargetValidationRequest::decode(msg.payload.clone()).unwrap(),
            ));
        }
    }
    out
}

/// Publishes a runner's answer to `validation_id` (event id = the validation id).
async fn answer(app: &TestApp, tenant: uuid::Uuid, target_id: &str, validation_id: &str, ok: bool) {
    let payload = epb::TargetValidated {
        validation_id: validation_id.into(),
        target_id: target_id.into(),
        ok,
        account_id: if ok {
            "210987654321".into()
        } else {
            String::new()
        },
        arn: if ok {
            "arn:aws:sts::210987654321:assumed-role/cairn-deploy/cairn-validate-x".into()
        } else {
            String::new()
        },
        error: if ok {
            String::new()
        } else {
            "STS refused to let the platform's credentials assume the role (AccessDenied)".into()
        },
        transient: false,
        runner_instance: "runner-1".into(),
    };
    let mut event = cairn_bus::new_event(
        cairn_bus::ServiceRole::Runner,
        tenant,
        cairn_bus::Aggregate::Target,
        target_id,
        "validated",
        "svc:runner",
        epb::event::Payload::TargetValidated(payload),
    )
    .unwrap();
    event.event_id = validation_id.into();
    cairn_bus::publish_event(&app.nats.jetstream, &ns(app), &event)
        .await
        .unwrap();
}

fn status(t: &pb::Target) -> pb::TargetValidationStatus {
    pb::TargetValidationStatus::try_from(t.last_validation.as_ref().unwrap().status).unwrap()
}

#[tokio::test]
async fn a_validation_is_queued_for_the_runner_and_its_answer_is_kept() {
    let app = spawn_app().await;
    let a = app.a.clone();
    let target = create_aws(&app, &a, "aws-prod").await;
    assert!(target.last_validation.is_none());
    let external_id = match target.spec.as_ref().unwrap().provider.as_ref().unwrap() {
        pb::target_spec::Provider::Aws(aws) => aws.external_id.clone(),
        other => panic!("{other:?}"),
    };

    // By name; answered at once, pending.
    let r = validate(&app, &a.owner_token, a.id, "aws-prod")
        .await
        .unwrap();
    assert_eq!(r.target_id, target.target_id);
    let v = r.validation.unwrap();
    assert_eq!(
        pb::TargetValidationStatus::try_from(v.status).unwrap(),
        pb::TargetValidationStatus::Pending
    );
    assert!(v.requested_at.is_some() && v.finished_at.is_none());
    let validation_id = v.validation_id.clone();

    // The pending row and the outbox message, written together.
    let mut conn = app.runtime_conn().await;
    let (status_row, outbox_subject): (String, String) = sqlx::query_as(
        "SELECT v.status, m.subject FROM target_validations v
         JOIN message_outbox m ON m.msg_id = v.validation_id::text
         WHERE v.target_id = $1",
    )
    .bind(target.target_id.parse::<uuid::Uuid>().unwrap())
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(status_row, "pending");
    assert_eq!(
        outbox_subject,
        format!("cairn.runq.{}.validate", target.target_id)
    );

    // On the target's validation subject: a request naming references only; no run request.
    let queued = queued(&app, &target.target_id, 1).await;
    let runq = app
        .nats
        .jetstream
        .get_stream(ns(&app).runq_stream())
        .await
        .unwrap();
    assert!(
        runq.get_last_raw_message_by_subject(&ns(&app).runq(&target.target_id).unwrap())
            .await
            .is_err(),
        "a validation request on the run request subject"
    );
    let (msg_id, req) = &queued[0];
    assert_eq!(msg_id, &validation_id, "Nats-Msg-Id is the validation id");
    assert_eq!(
        *req,
        rpb::TargetValidationRequest {
            validation_id: validation_id.clone(),
            tenant_id: a.id.to_string(),
            target_id: target.target_id.clone(),
            credential_ref: "platform-aws".into(),
            region: "eu-west-1".into(),
            role_arn: ROLE.into(),
            external_id,
        }
    );

    // Pending on read until the runner answers; then the answer.
    assert_eq!(
        status(&get(&app, &a, &target.target_id).await),
        pb::TargetValidationStatus::Pending
    );
    answer(&app, a.id, &target.target_id, &validation_id, true).await;
    let done = eventually(WITHIN, || async {
        let t = get(&app, &a, &target.target_id).await;
        (status(&t) != pb::TargetValidationStatus::Pending).then_some(t)
    })
    .await
    .expect("the answer stored");
    let last = done.last_validation.clone().unwrap();
    assert_eq!(status(&done), pb::TargetValidationStatus::Succeeded);
    assert_eq!(last.validation_id, validation_id);
    assert_eq!(last.account_id, "210987654321");
    assert!(
        last.arn.contains("assumed-role/cairn-deploy"),
        "{}",
        last.arn
    );
    assert!(last.error.is_empty() && !last.transient);
    assert_eq!(last.runner_instance, "runner-1");
    assert!(last.finished_at.is_some());

    // Listed with it too.
    let listed = app
        .targets(&a.owner_token)
        .list_targets(pb::ListTargetsRequest {
            tenant_id: a.id.to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .targets;
    let listed = listed
        .iter()
        .find(|t| t.target_id == target.target_id)
        .unwrap();
    assert_eq!(listed.last_validation, done.last_validation);

    // Audited: the request (by the admin) and the runner's answer.
    let entries = app
        .audit(&a.owner_token)
        .list_audit_entries(pb::ListAuditEntriesRequest {
            tenant_id: a.id.to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .entries;
    let actions: Vec<&str> = entries.iter().map(|e| e.action.as_str()).collect();
    assert!(
        actions.contains(&"target.validation_requested"),
        "{actions:?}"
    );
    assert!(actions.contains(&"target.validated"), "{actions:?}");
    app.finish().await;
}

#[tokio::test]
async fn an_older_requests_late_answer_never_overwrites_the_newest() {
    let app = spawn_app().await;
    let a = app.a.clone();
    let target = create_aws(&app, &a, "aws-stale").await;
    let first = validate(&app, &a.owner_token, a.id, &target.target_id)
        .await
        .unwrap()
        .validation
        .unwrap()
        .validation_id;
    let second = validate(&app, &a.owner_token, a.id, &target.target_id)
        .await
        .unwrap()
        .validation
        .unwrap()
        .validation_id;
    assert_ne!(first, second);
    // Both requests reach the queue; the newest is the target's.
    let queued = queued(&app, &target.target_id, 2).await;
    let ids: Vec<&str> = queued.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, [first.as_str(), second.as_str()]);

    // The first request's answer arrives late: the audit log records it, the target keeps
    // waiting for the second's.
    answer(&app, a.id, &target.target_id, &first, false).await;
    eventually(WITHIN, || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM processed_events WHERE consumer = 'tenancy-audit' \
             AND event_id = $1::uuid",
        )
        .bind(&first)
        .fetch_one(&mut app.runtime_conn().await)
        .await
        .unwrap();
        (n == 1).then_some(())
    })
    .await
    .expect("the late answer consumed");
    let t = get(&app, &a, &target.target_id).await;
    assert_eq!(status(&t), pb::TargetValidationStatus::Pending);
    assert_eq!(t.last_validation.unwrap().validation_id, second);

    // The second's answer is kept; a second copy of it (or the first's again) changes
    // nothing.
    answer(&app, a.id, &target.target_id, &second, true).await;
    let done = eventually(WITHIN, || async {
        let t = get(&app, &a, &target.target_id).await;
        (status(&t) == pb::TargetValidationStatus::Succeeded).then_some(t)
    })
    .await
    .expect("the newest answer stored");
    assert_eq!(done.last_validation.as_ref().unwrap().validation_id, second);
    answer(&app, a.id, &target.target_id, &first, false).await;
    let mut conn = app.runtime_conn().await;
    let (status_row, finished): (String, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("SELECT status, finished_at FROM target_validations WHERE target_id = $1")
            .bind(target.target_id.parse::<uuid::Uuid>().unwrap())
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(status_row, "succeeded");
    let shown = done.last_validation.unwrap().finished_at.unwrap();
    assert_eq!(finished.timestamp(), shown.seconds);

    // A new role: the last validation no longer describes the target.
    let updated = app
        .targets(&a.owner_token)
        .update_target(pb::UpdateTargetRequest {
            tenant_id: a.id.to_string(),
            target_id: target.target_id.clone(),
            spec: Some(aws_spec("arn:aws:iam::210987654321:role/other")),
        })
        .await
        .unwrap()
        .into_inner()
        .target
        .unwrap();
    assert!(updated.last_validation.is_none(), "{updated:?}");
    app.finish().await;
}

#[tokio::test]
async fn only_the_tenants_admins_validate_its_aws_targets() {
    let app = spawn_app().await;
    let (a, b) = (app.a.clone(), app.b.clone());
    let target = create_aws(&app, &a, "aws-iso").await;
    let before = app.snapshot().await;

    // Another tenant's owner, naming A's target by id in either tenant: NOT_FOUND.
    for tenant in [b.id, a.id] {
        let err = validate(&app, &b.owner_token, tenant, &target.target_id)
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::NotFound, "{err:?}");
    }
    // A viewer and an operator of A: PERMISSION_DENIED.
    for (email, role) in [
        ("viewer@example.com", Role::Viewer),
        ("operator@example.com", Role::Operator),
    ] {
        let user = app.add_member(&a, email, role).await;
        let token = app.mint(user, a.id, role);
        let err = validate(&app, &token, a.id, &target.target_id)
            .await
            .unwrap_err();
        assert_eq!(
            err.code(),
            tonic::Code::PermissionDenied,
            "{role:?}: {err:?}"
        );
    }
    // A service may read targets but not validate them.
    let err = validate(
        &app,
        &app.mint_service("deployments"),
        a.id,
        &target.target_id,
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
    // Unknown names and ids: NOT_FOUND.
    for unknown in ["no-such-target", &uuid::Uuid::new_v4().to_string()] {
        let err = validate(&app, &a.owner_token, a.id, unknown)
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::NotFound, "{unknown}: {err:?}");
    }
    // A local directory target has no role to validate.
    app.create_target(&a, "local-one").await;
    let mid = app.snapshot().await;
    let err = validate(&app, &a.owner_token, a.id, "local-one")
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("AWS"), "{}", err.message());
    assert_eq!(
        app.snapshot().await,
        mid,
        "a refused validation changed something"
    );

    // Nothing of the refused calls (but the members added) reached a table.
    let mut conn = app.runtime_conn().await;
    let (validations, messages): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM target_validations), (SELECT count(*) FROM message_outbox)",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!((validations, messages), (0, 0));
    assert_ne!(before, mid, "the members were added");
    app.finish().await;
}
