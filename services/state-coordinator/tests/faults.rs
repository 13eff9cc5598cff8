//! Transient trouble is never damage: with KMS or S3 cut or reset, or KMS answering
//! AccessDenied, disabled key, throttling or a server error, writes and reads of uncached
//! generations answer 503 / UNAVAILABLE naming the cause, the state is not fenced and does
//! not move, and the same operations succeed once the trouble is gone.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::sync::Arc;

use cairn_proto::state as pb;
use cairn_storage::{KeyManager, KmsKeyManager};
use cairn_testkit::{Fault, TestAws};
use common::*;
use uuid::Uuid;

const LINEAGE: &str = "lineage-faults";

/// A state at generation 1 with an apply holding the lock and a plan reader, both admitted
/// and registered while everything worked.
struct Scene {
    state_id: String,
    doc1: Vec<u8>,
    apply: Admitted,
    lock_id: String,
    reader: Admitted,
    /// Registered, not admitted yet.
    later: String,
}

async fn scene(app: &TestApp) -> Scene {
    let state_id = app.create_state("faults-db").await;
    let doc1 = state_doc(1, LINEAGE, "v1");
    app.apply_doc(&state_id, &doc1).await;
    let apply = app.start_run(&state_id, pb::RunKind::Apply).await;
    let lock_id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&apply, &lock_id).await.status, 200);
    let reader = app.start_run(&state_id, pb::RunKind::Plan).await;
    let later = app.register(&state_id, pb::RunKind::Plan, "dev").await;
    // Reads must reach the key manager and the object: forget the data keys and the public
    // outputs remembered at write time (a coordinator that did not take the write).
    app.core().key_cache.clear();
    app.core().outputs_cache.clear();
    Scene {
        state_id,
        doc1,
        apply,
        lock_id,
        reader,
        later,
    }
}

async fn outputs(app: &TestApp, state_id: &str) -> Result<pb::GetOutputsResponse, tonic::Status> {
    app.runs(&app.service_token())
        .get_outputs(pb::GetOutputsRequest {
            state_id: state_id.to_owned(),
        })
        .await
        .map(tonic::Response::into_inner)
}

/// Everything that needs the broken edge answers 503 / UNAVAILABLE naming `cause`; what does
/// not need it still works; nothing is fenced, nothing moves.
async fn assert_unavailable_not_fenced(app: &TestApp, s: &Scene, cause: &str) {
    for who in [&s.reader, &s.apply] {
        let got = app.get(who).await;
        assert_eq!(got.status, 503, "GET: {}", got.text());
        assert!(
            got.text().contains(cause),
            "GET names {cause}: {}",
            got.text()
        );
    }
    let post = app
        .post(&s.apply, &s.lock_id, &state_doc(2, LINEAGE, "v2"))
        .await;
    assert_eq!(post.status, 503, "POST: {}", post.text());
    assert!(
        post.text().contains(cause),
        "POST names {cause}: {}",
        post.text()
    );

    let err = outputs(app, &s.state_id).await.expect_err("outputs");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert!(err.message().contains(cause), "{}", err.message());

    // Admission reads no payload: it is not blocked by the outage, and sees no fence.
    let admitted = app
        .admit(&s.later)
        .await
        .expect("admission during an outage");
    assert_eq!(admitted.base_generation, 1);

    let info = app.state_info(&s.state_id).await;
    assert_eq!(info.status, pb::StateStatus::Healthy as i32, "{info:?}");
    assert!(info.fence_reason.is_empty());
    assert_eq!(info.current_generation, 1);
    assert_eq!(app.generation_count(&s.state_id).await, 1);
    assert!(
        app.outbox_events()
            .await
            .iter()
            .all(|e| e.event_type != "recovery_required"),
        "an outage must never fence"
    );
}

/// After the outage the same operations succeed and the write lands exactly once.
async fn assert_recovers(app: &TestApp, s: &Scene) {
    let got = app.get(&s.reader).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(got.body, s.doc1);
    assert_eq!(app.get(&s.apply).await.status, 200);
    let doc2 = state_doc(2, LINEAGE, "v2");
    let post = app.post(&s.apply, &s.lock_id, &doc2).await;
    assert_eq!(post.status, 200, "{}", post.text());
    let out = outputs(app, &s.state_id).await.unwrap();
    assert_eq!(out.generation, 2);
    let info = app.state_info(&s.state_id).await;
    assert_eq!(info.status, pb::StateStatus::Healthy as i32);
    assert_eq!(info.current_generation, 2);
    assert_eq!(app.generation_count(&s.state_id).await, 2);
}

async fn pending_count(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pending_objects")
        .fetch_one(&app.admin_pool().await)
        .await
        .unwrap()
}

async fn kms_outage(fault: Fault) {
    let app = spawn_app().await;
    let s = scene(&app).await;
    app.kms_proxy.set(fault);

    assert_unavailable_not_fenced(&app, &s, "KMS").await;
    // Sealing failed before anything was recorded.
    assert_eq!(pending_count(&app).await, 0);
    // A state's root configs are sealed under its current config key (app::config_keys):
    // another run of the scene's state needs no KMS call. A new state's first run asks for
    // its key: unavailable, naming KMS.
    app.runs(&app.service_token())
        .register_run(app.registration(&s.state_id, pb::RunKind::Plan, "dev"))
        .await
        .expect("register under the state's current config key");
    let fresh = app.create_state("kms-outage-fresh").await;
    let err = app
        .runs(&app.service_token())
        .register_run(app.registration(&fresh, pb::RunKind::Plan, "dev"))
        .await
        .expect_err("register during a KMS outage");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert!(err.message().contains("KMS"), "{}", err.message());

    app.kms_proxy.heal();
    assert_recovers(&app, &s).await;
}

#[tokio::test]
async fn kms_cut_is_unavailable_and_never_fences() {
    kms_outage(Fault::Cut).await;
}

#[tokio::test]
async fn kms_reset_is_unavailable_and_never_fences() {
    kms_outage(Fault::Reset).await;
}

async fn s3_outage(fault: Fault) {
    let app = spawn_app().await;
    let s = scene(&app).await;
    app.s3_proxy.set(fault);

    assert_unavailable_not_fenced(&app, &s, "S3").await;
    for got in [app.get(&s.reader).await, app.get(&s.apply).await] {
        assert!(got.text().contains("object storage"), "{}", got.text());
    }

    // VerifyAll cannot reach storage either: it reports, it does not fence.
    let mut stream = app
        .recovery(&app.platform_admin_token())
        .verify_all(pb::VerifyAllRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut failed = false;
    loop {
        match stream.message().await {
            Ok(Some(item)) => failed |= !item.ok,
            Ok(None) => break,
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "VerifyAll must not pass while S3 is down");
    let info = app.state_info(&s.state_id).await;
    assert_eq!(info.status, pb::StateStatus::Healthy as i32, "{info:?}");

    app.s3_proxy.heal();
    assert_recovers(&app, &s).await;
}

#[tokio::test]
async fn s3_cut_is_unavailable_and_never_fences() {
    s3_outage(Fault::Cut).await;
}

#[tokio::test]
async fn s3_reset_is_unavailable_and_never_fences() {
    s3_outage(Fault::Reset).await;
}

#[tokio::test]
async fn the_coordinator_refuses_to_start_when_kms_denies_access() {
    let denied = access_denied_kms("arn:aws:kms:us-east-1:123456789012:key/denied").await;
    let refused = try_spawn_app_with(Options {
        keys: Some(denied),
        ..Options::default()
    })
    .await;
    let Err(err) = refused else {
        panic!("the coordinator started although KMS denies every call");
    };
    assert!(
        matches!(err, cairn_state_coordinator::StartError::KeyManager { .. }),
        "{err:?}"
    );
    // The whole chain, as `cairn_service::run` prints it.
    let text = cairn_telemetry::Chain(&err).to_string();
    assert!(text.contains("key manager self-check failed"), "{text}");
    assert!(text.contains("KMS access denied"), "{text}");
}

/// KMS answers that say "not now" or "not you" — never "this data is broken".
#[tokio::test]
async fn kms_refusals_at_runtime_are_unavailable_and_never_fence() {
    let aws = TestAws::create().await;
    let good: Arc<dyn KeyManager> = Arc::new(KmsKeyManager::with_config(
        &aws.sdk_config(),
        aws.kms_key_id.clone(),
    ));
    let switch = SwitchableKeyManager::new(good.clone());
    let app = spawn_app_with(Options {
        keys: Some(switch.clone()),
        ..Options::default()
    })
    .await;
    let state_id = app.create_state("kms-refusals").await;
    let doc1 = state_doc(1, LINEAGE, "v1");
    app.apply_doc(&state_id, &doc1).await;
    let reader = app.start_run(&state_id, pb::RunKind::Plan).await;
    let apply = app.start_run(&state_id, pb::RunKind::Apply).await;
    let lock_id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&apply, &lock_id).await.status, 200);

    let refusals = [
        (400, "AccessDeniedException", "KMS access denied"),
        (400, "DisabledException", "is disabled"),
        (400, "KMSInvalidStateException", "not in a usable state"),
        (400, "ThrottlingException", "KMS throttled"),
        (500, "KMSInternalException", "KMS server error"),
    ];
    for (status, error_type, cause) in refusals {
        app.core().key_cache.clear();
        app.core().outputs_cache.clear();
        switch.swap(canned_kms(status, error_type, &aws.kms_key_id).await);

        let got = app.get(&reader).await;
        assert_eq!(got.status, 503, "{error_type}: GET {}", got.text());
        assert!(got.text().contains(cause), "{error_type}: {}", got.text());
        let post = app
            .post(&apply, &lock_id, &state_doc(2, LINEAGE, "v2"))
            .await;
        assert_eq!(post.status, 503, "{error_type}: POST {}", post.text());
        assert!(post.text().contains(cause), "{error_type}: {}", post.text());
        let err = outputs(&app, &state_id).await.expect_err("outputs");
        assert_eq!(
            err.code(),
            tonic::Code::Unavailable,
            "{error_type}: {err:?}"
        );

        let info = app.state_info(&state_id).await;
        assert_eq!(
            info.status,
            pb::StateStatus::Healthy as i32,
            "{error_type} fenced the state: {info:?}"
        );
        assert_eq!(info.current_generation, 1);
    }
    assert!(
        app.outbox_events()
            .await
            .iter()
            .all(|e| e.event_type != "recovery_required")
    );

    switch.swap(good);
    let got = app.get(&reader).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(got.body, doc1);
    assert_eq!(app.get(&apply).await.status, 200);
    let post = app
        .post(&apply, &lock_id, &state_doc(2, LINEAGE, "v2"))
        .await;
    assert_eq!(post.status, 200, "{}", post.text());
    assert_eq!(app.state_info(&state_id).await.current_generation, 2);
}
