//! Proof of damage fences a state (`recovery_required`): a missing object version, a
//! flipped ciphertext byte (hash mismatch, and AES-GCM tag failure when the hash is made to
//! match), a wrong KMS key, an unknown key id. Once fenced, admission, LOCK, POST, GET and
//! outputs stop with the reason, and a `recovery_required` event is published. A reader that
//! raced a commit never fences the newer generation.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::sync::Arc;

use cairn_contract::RefusalReason;
use cairn_proto::events::event::Payload;
use cairn_proto::state as pb;
use cairn_state_coordinator::error::Error;
use common::*;
use uuid::Uuid;

const LINEAGE: &str = "lineage-fence";

/// A state with generation 1 and two apply runs admitted before any damage: `holder` holds
/// the lock, `waiting` has not locked yet.
struct Scene {
    state_id: String,
    doc: Vec<u8>,
    holder: Admitted,
    holder_lock: String,
    waiting: Admitted,
}

async fn scene(app: &TestApp) -> Scene {
    let state_id = app.create_state("fence-db").await;
    let doc = state_doc(1, LINEAGE, "v1");
    app.apply_doc(&state_id, &doc).await;
    let holder = app.start_run(&state_id, pb::RunKind::Apply).await;
    let holder_lock = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&holder, &holder_lock).await.status, 200);
    let waiting = app.start_run(&state_id, pb::RunKind::Apply).await;
    Scene {
        state_id,
        doc,
        holder,
        holder_lock,
        waiting,
    }
}

async fn set_generation_column(app: &TestApp, state_id: &str, column: &str, value: &str) {
    let sql =
        format!("UPDATE generations SET {column} = $3 WHERE state_id = $1 AND generation = $2");
    let done = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(state_id.parse::<Uuid>().unwrap())
        .bind(1_i64)
        .bind(value)
        .execute(&app.admin_pool().await)
        .await
        .unwrap();
    assert_eq!(done.rows_affected(), 1);
}

/// A read-only run reads the damaged state: 422 naming the damage; then everything else is
/// refused with the same reason, and the fence is announced once.
async fn assert_detected_and_fenced(app: &TestApp, s: &Scene, damage: &str) {
    let reader = app.start_run(&s.state_id, pb::RunKind::Plan).await;
    let got = app.get(&reader).await;
    assert_eq!(got.status, 422, "GET of damaged state: {}", got.text());
    assert!(got.text().contains("requires recovery"), "{}", got.text());
    assert!(got.text().contains(damage), "{}", got.text());
    assert!(!got.text().contains("s3cr3t-canary"));

    let info = app.state_info(&s.state_id).await;
    assert_eq!(info.status, pb::StateStatus::RecoveryRequired as i32);
    assert_eq!(info.current_generation, 1);
    assert!(
        info.fence_reason.contains("generation 1"),
        "{}",
        info.fence_reason
    );
    assert!(info.fence_reason.contains(damage), "{}", info.fence_reason);

    // Admission of any new run stops and names recovery.
    for kind in [pb::RunKind::Apply, pb::RunKind::Plan] {
        let run = app.register(&s.state_id, kind, "dev").await;
        let err = app
            .admit(&run)
            .await
            .expect_err("admission of a fenced state");
        assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
        assert!(
            err.message().contains("requires recovery"),
            "{}",
            err.message()
        );
        assert!(
            err.message().contains("Recovery.Recover"),
            "{}",
            err.message()
        );
        assert!(err.message().contains(damage), "{}", err.message());
    }

    // Runs admitted before the fence are refused when they come back.
    let lock = app.lock(&s.waiting, &Uuid::new_v4().to_string()).await;
    assert_eq!(lock.status, 422, "LOCK: {}", lock.text());
    assert!(lock.text().contains(damage), "{}", lock.text());
    let relock = app.lock(&s.holder, &s.holder_lock).await;
    assert_eq!(
        relock.status,
        422,
        "re-LOCK by the holder: {}",
        relock.text()
    );
    let post = app
        .post(&s.holder, &s.holder_lock, &state_doc(2, LINEAGE, "v2"))
        .await;
    assert_eq!(post.status, 422, "POST: {}", post.text());
    assert!(post.text().contains(damage), "{}", post.text());
    let get = app.get(&s.holder).await;
    assert_eq!(get.status, 422, "GET: {}", get.text());
    assert!(get.text().contains(damage), "{}", get.text());

    let outputs = app
        .runs(&app.service_token())
        .get_outputs(pb::GetOutputsRequest {
            state_id: s.state_id.clone(),
        })
        .await
        .expect_err("outputs of a fenced state");
    assert_eq!(outputs.code(), tonic::Code::FailedPrecondition);
    assert!(outputs.message().contains(damage), "{}", outputs.message());

    // The refusal at LOCK is recorded on the attempt for the runner, as a typed reason: a
    // fence is FENCED (final), never a transient refusal.
    let finished = app.finish(&s.waiting, pb::RunOutcome::Failed).await;
    assert_eq!(
        RefusalReason::from_code(&finished.refusal_reason),
        Some(RefusalReason::Fenced),
        "{finished:?}"
    );
    assert!(!RefusalReason::Fenced.is_transient());

    // Nothing moved, nothing was written.
    assert_eq!(app.generation_count(&s.state_id).await, 1);
    assert_eq!(app.state_info(&s.state_id).await.current_generation, 1);

    // One recovery_required event, published by the relay.
    let fenced: Vec<_> = app
        .outbox_events()
        .await
        .into_iter()
        .filter(|e| e.event_type == "recovery_required")
        .collect();
    assert_eq!(fenced.len(), 1, "exactly one fence event: {fenced:?}");
    let event = app
        .wait_for_event("recovery_required", &s.state_id, |_| true)
        .await;
    assert_eq!(event.tenant_id, app.tenant.to_string());
    match event.payload {
        Some(Payload::RecoveryRequired(r)) => {
            assert_eq!(r.state_id, s.state_id);
            assert_eq!(r.generation, 1);
            assert!(r.reason.contains(damage), "{}", r.reason);
        }
        other => panic!("unexpected payload {other:?}"),
    }
}

#[tokio::test]
async fn a_deleted_object_version_fences_the_state() {
    let app = spawn_app().await;
    let s = scene(&app).await;
    let g = app.generation_row(&s.state_id, 1).await;
    assert!(
        app.bucket_get(&g.object_key, &g.object_version)
            .await
            .is_some()
    );
    app.bucket_delete(&g.object_key, &g.object_version).await;
    assert!(
        app.bucket_get(&g.object_key, &g.object_version)
            .await
            .is_none()
    );

    assert_detected_and_fenced(&app, &s, "does not exist").await;
}

#[tokio::test]
async fn a_flipped_ciphertext_byte_fences_on_the_hash() {
    let app = spawn_app().await;
    let s = scene(&app).await;
    let g = app.generation_row(&s.state_id, 1).await;
    let mut bytes = app
        .bucket_get(&g.object_key, &g.object_version)
        .await
        .unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    let flipped = app.bucket_put(&g.object_key, bytes).await;
    // The row points at the flipped version; its recorded ciphertext sha256 stays.
    set_generation_column(&app, &s.state_id, "object_version", &flipped).await;

    assert_detected_and_fenced(&app, &s, "ciphertext sha256 mismatch").await;
}

#[tokio::test]
async fn a_flipped_byte_with_a_matching_hash_fences_on_the_gcm_tag() {
    let app = spawn_app().await;
    let s = scene(&app).await;
    let g = app.generation_row(&s.state_id, 1).await;
    let mut bytes = app
        .bucket_get(&g.object_key, &g.object_version)
        .await
        .unwrap();
    bytes[0] ^= 0x80;
    let sha = cairn_storage::sha256_hex(&bytes);
    let flipped = app.bucket_put(&g.object_key, bytes).await;
    set_generation_column(&app, &s.state_id, "object_version", &flipped).await;
    set_generation_column(&app, &s.state_id, "ciphertext_sha256", &sha).await;
    // The data key is still cached from the write: the tag check alone must catch it.

    assert_detected_and_fenced(&app, &s, "AES-GCM authentication failed").await;
}

async fn key_arn(app: &TestApp, key_id: &str) -> String {
    app.aws
        .kms
        .describe_key()
        .key_id(key_id)
        .send()
        .await
        .unwrap()
        .key_metadata
        .unwrap()
        .arn
        .unwrap()
}

#[tokio::test]
async fn a_wrong_kms_key_fences_the_state() {
    let app = spawn_app().await;
    let s = scene(&app).await;
    let g = app.generation_row(&s.state_id, 1).await;
    assert_eq!(g.key_id, key_arn(&app, &app.aws.kms_key_id).await);
    let other = app.aws.create_key().await;
    let other_arn = key_arn(&app, &other).await;
    set_generation_column(&app, &s.state_id, "key_id", &other_arn).await;

    assert_detected_and_fenced(&app, &s, "was not encrypted under key").await;
}

#[tokio::test]
async fn a_kms_key_arn_that_does_not_exist_fences_the_state() {
    let app = spawn_app().await;
    let s = scene(&app).await;
    // moto ignores the key named in Decrypt and reports the key that did decrypt, so this is
    // caught as "not encrypted under key" (real KMS would answer NotFoundException).
    let missing = format!(
        "arn:aws:kms:{}:123456789012:key/{}",
        app.aws.region,
        Uuid::new_v4()
    );
    set_generation_column(&app, &s.state_id, "key_id", &missing).await;

    assert_detected_and_fenced(&app, &s, "was not encrypted under key").await;
}

#[tokio::test]
async fn a_corrupted_wrapped_data_key_fences_the_state() {
    let app = spawn_app().await;
    let s = scene(&app).await;
    let mut wrapped = app.generation_row(&s.state_id, 1).await.wrapped_key;
    let last = wrapped.len() - 1;
    wrapped[last] ^= 0x01;
    let done = sqlx::query(
        "UPDATE generations SET wrapped_key = $2 WHERE state_id = $1 AND generation = 1",
    )
    .bind(s.state_id.parse::<Uuid>().unwrap())
    .bind(wrapped)
    .execute(&app.admin_pool().await)
    .await
    .unwrap();
    assert_eq!(done.rows_affected(), 1);

    // KMS answers InvalidCiphertextException.
    assert_detected_and_fenced(&app, &s, "wrapped data key does not decrypt").await;
}

#[tokio::test]
async fn an_unknown_local_key_id_fences_the_state() {
    let dir = cairn_testkit::temp_dir();
    let keys = cairn_storage::LocalKeyFile::open_or_create(dir.path().join("keys.json")).unwrap();
    let app = spawn_app_with(Options {
        keys: Some(Arc::new(keys)),
        ..Options::default()
    })
    .await;
    let s = scene(&app).await;
    set_generation_column(&app, &s.state_id, "key_id", "no-such-local-key").await;

    assert_detected_and_fenced(&app, &s, "key id no-such-local-key is not known").await;
}

#[tokio::test]
async fn damage_found_by_outputs_fences_too() {
    let app = spawn_app().await;
    let s = scene(&app).await;
    let g = app.generation_row(&s.state_id, 1).await;
    app.bucket_delete(&g.object_key, &g.object_version).await;
    // A coordinator that did not take the write reads the outputs from the object.
    app.core().outputs_cache.clear();
    let err = app
        .runs(&app.service_token())
        .get_outputs(pb::GetOutputsRequest {
            state_id: s.state_id.clone(),
        })
        .await
        .expect_err("outputs of damaged state");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("does not exist"),
        "{}",
        err.message()
    );
    let info = app.state_info(&s.state_id).await;
    assert_eq!(info.status, pb::StateStatus::RecoveryRequired as i32);
    app.wait_for_event("recovery_required", &s.state_id, |_| true)
        .await;
    // A run admitted before the fence gets the reason, never the old document.
    let got = app.get(&s.holder).await;
    assert_eq!(got.status, 422, "{}", got.text());
    assert_ne!(got.body, s.doc);
}

#[tokio::test]
async fn a_reader_that_raced_a_commit_does_not_fence_the_newer_generation() {
    let app = spawn_app().await;
    let state_id = app.create_state("race-db").await;
    app.apply_doc(&state_id, &state_doc(1, LINEAGE, "v1")).await;
    // What a reader loaded before the next commit.
    let seen_state = app.state_row(&state_id).await;
    let seen_generation = app.generation_row(&state_id, 1).await;
    assert_eq!(seen_state.current_generation, 1);

    let doc2 = state_doc(2, LINEAGE, "v2");
    app.apply_doc(&state_id, &doc2).await;

    // A fence decided from the old view does not apply to generation 2.
    app.core()
        .fence(&seen_state, 1, "damage seen by a stale reader")
        .await
        .unwrap();
    let info = app.state_info(&state_id).await;
    assert_eq!(info.status, pb::StateStatus::Healthy as i32);
    assert_eq!(info.current_generation, 2);
    assert!(info.fence_reason.is_empty());

    // The old generation's object vanishes (e.g. pruned) while the stale reader opens it:
    // the reader fails, but the healthy newer state is not fenced and the reader is not
    // told that it is.
    app.bucket_delete(&seen_generation.object_key, &seen_generation.object_version)
        .await;
    let err = app
        .core()
        .read_generation(&seen_state, &seen_generation)
        .await
        .expect_err("the old object is gone");
    assert!(
        !matches!(err, Error::Fenced { .. }),
        "a raced reader must not report a fence: {err}"
    );
    let info = app.state_info(&state_id).await;
    assert_eq!(info.status, pb::StateStatus::Healthy as i32);
    assert_eq!(info.current_generation, 2);
    assert!(
        app.outbox_events()
            .await
            .iter()
            .all(|e| e.event_type != "recovery_required"),
        "no fence event for a raced reader"
    );

    let reader = app.start_run(&state_id, pb::RunKind::Plan).await;
    let got = app.get(&reader).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, doc2);
}
