//! A GET of a state larger than one chunk of the chunked envelope streams it: the document
//! comes back byte for byte with its length announced; damage in its first chunk is answered
//! 422 as by a whole read; damage in a later chunk breaks the answer short of its announced
//! length (never a shorter document) and fences the state; a generation sealed whole (before
//! the chunked envelope) still reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use cairn_proto::state as pb;
use cairn_storage::chunked::{CHUNK_SEALED_BYTES, CHUNKED_NONCE_TAG};
use common::*;
use uuid::Uuid;

const LINEAGE: &str = "lineage-streamed";

/// A state of about 300 KB (five chunks).
fn large_doc(serial: u64) -> Vec<u8> {
    state_doc(serial, LINEAGE, &"x".repeat(300_000))
}

/// A GET by a fresh read-only run: status, announced length, and the body or the error
/// that ended it.
async fn get_raw(app: &TestApp, state_id: &str) -> (u16, Option<u64>, Result<Vec<u8>, String>) {
    let reader = app.start_run(state_id, pb::RunKind::Plan).await;
    let resp = app
        .http
        .get(&reader.address)
        .basic_auth("run", Some(&reader.token))
        .send()
        .await
        .expect("GET answered");
    let status = resp.status().as_u16();
    let announced = resp.content_length();
    let body = resp
        .bytes()
        .await
        .map(|b| b.to_vec())
        .map_err(|e| format!("{e:?}"));
    (status, announced, body)
}

async fn update_generation(app: &TestApp, state_id: &str, version: &str, sha: &str) {
    let done = sqlx::query(
        "UPDATE generations SET object_version = $3, ciphertext_sha256 = $4
         WHERE state_id = $1 AND generation = $2",
    )
    .bind(state_id.parse::<Uuid>().unwrap())
    .bind(1_i64)
    .bind(version)
    .bind(sha)
    .execute(&app.admin_pool().await)
    .await
    .unwrap();
    assert_eq!(done.rows_affected(), 1);
}

/// Replaces generation 1's object with `bytes` (its recorded hash made to match, so only
/// the tags can tell).
async fn replace_object(app: &TestApp, state_id: &str, bytes: Vec<u8>) {
    let g = app.generation_row(state_id, 1).await;
    let sha = cairn_storage::sha256_hex(&bytes);
    let version = app.bucket_put(&g.object_key, bytes).await;
    update_generation(app, state_id, &version, &sha).await;
}

async fn large_state(app: &TestApp) -> (String, Vec<u8>) {
    let state_id = app.create_state("streamed").await;
    let doc = large_doc(1);
    app.apply_doc(&state_id, &doc).await;
    (state_id, doc)
}

#[tokio::test]
async fn a_large_state_streams_back_byte_for_byte_on_both_stores() {
    for store in [Store::S3, Store::File] {
        let app = spawn_app_with(on(store)).await;
        let (state_id, doc) = large_state(&app).await;
        let g = app.generation_row(&state_id, 1).await;
        assert_eq!(
            g.nonce.len(),
            13,
            "{store:?}: a chunked envelope's stored nonce"
        );
        assert_eq!(g.nonce[0], CHUNKED_NONCE_TAG);
        let (status, announced, body) = get_raw(&app, &state_id).await;
        assert_eq!(status, 200, "{store:?}");
        assert_eq!(announced, Some(doc.len() as u64), "{store:?}");
        assert_eq!(body.expect("whole body"), doc, "{store:?}");
        // The writer's own read (the read-ahead path) and a small state too.
        let writer = app.start_run(&state_id, pb::RunKind::Apply).await;
        let lock = Uuid::new_v4().to_string();
        assert_eq!(app.lock(&writer, &lock).await.status, 200);
        assert_eq!(app.get(&writer).await.body, doc, "{store:?}");
        assert_eq!(
            app.get(&writer).await.body,
            doc,
            "{store:?}: read again ahead"
        );
        let small = state_doc(2, LINEAGE, "small");
        assert_eq!(app.post(&writer, &lock, &small).await.status, 200);
        assert_eq!(app.get(&writer).await.body, small, "{store:?}");
    }
}

#[tokio::test]
async fn damage_in_the_first_chunk_of_a_large_state_is_answered_422_and_fences() {
    let app = spawn_app().await;
    let (state_id, _) = large_state(&app).await;
    let g = app.generation_row(&state_id, 1).await;
    let mut bytes = app
        .bucket_get(&g.object_key, &g.object_version)
        .await
        .unwrap();
    bytes[100] ^= 0x01;
    replace_object(&app, &state_id, bytes).await;

    let (status, _, body) = get_raw(&app, &state_id).await;
    let text = String::from_utf8(body.expect("an error body")).unwrap();
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("AES-GCM authentication failed"), "{text}");
    let info = app.state_info(&state_id).await;
    assert_eq!(info.status, pb::StateStatus::RecoveryRequired as i32);
}

#[tokio::test]
async fn damage_in_a_later_chunk_breaks_the_answer_short_and_fences() {
    let app = spawn_app().await;
    let (state_id, doc) = large_state(&app).await;
    let later = app.start_run(&state_id, pb::RunKind::Plan).await;
    let g = app.generation_row(&state_id, 1).await;
    let mut bytes = app
        .bucket_get(&g.object_key, &g.object_version)
        .await
        .unwrap();
    bytes[3 * CHUNK_SEALED_BYTES + 10] ^= 0x01; // the fourth chunk
    replace_object(&app, &state_id, bytes).await;

    let (status, announced, body) = get_raw(&app, &state_id).await;
    assert_eq!(status, 200, "the first chunks were good and went out");
    assert_eq!(announced, Some(doc.len() as u64));
    assert!(
        body.is_err(),
        "the answer must break before its announced length, not end as a document"
    );
    // The whole read behind the broken answer fenced the state.
    let info = app.state_info(&state_id).await;
    assert_eq!(info.status, pb::StateStatus::RecoveryRequired as i32);
    assert!(
        info.fence_reason.contains("AES-GCM authentication failed"),
        "{}",
        info.fence_reason
    );
    // A run admitted before the fence now reads 422 naming the damage.
    let got = app.get(&later).await;
    assert_eq!(got.status, 422, "{}", got.text());
    assert!(
        got.text().contains("AES-GCM authentication failed"),
        "{}",
        got.text()
    );
}

#[tokio::test]
async fn a_generation_sealed_whole_before_the_chunked_envelope_still_reads() {
    let app = spawn_app().await;
    let (state_id, doc) = large_state(&app).await;
    let g = app.generation_row(&state_id, 1).await;
    // Re-seal generation 1 in the single-seal envelope under its own data key, as a
    // coordinator before the chunked envelope wrote it.
    let state_uuid: Uuid = state_id.parse().unwrap();
    let state = app.state_row(&state_id).await;
    let ctx =
        cairn_storage::EncryptionContext::new(state.tenant_id.to_string(), state_uuid.to_string());
    let key = app
        .core()
        .keys
        .unwrap_data_key(&g.key_id, &g.wrapped_key, &ctx)
        .await
        .unwrap();
    let aad = cairn_storage::aad_for(&state_uuid.to_string(), 1);
    let sealed = cairn_storage::seal(key.expose(), &aad, &doc).unwrap();
    let sha = cairn_storage::sha256_hex(&sealed.ciphertext);
    let version = app.bucket_put(&g.object_key, sealed.ciphertext).await;
    let done = sqlx::query(
        "UPDATE generations SET object_version = $2, ciphertext_sha256 = $3, nonce = $4
         WHERE state_id = $1 AND generation = 1",
    )
    .bind(state_uuid)
    .bind(&version)
    .bind(&sha)
    .bind(sealed.nonce.to_vec())
    .execute(&app.admin_pool().await)
    .await
    .unwrap();
    assert_eq!(done.rows_affected(), 1);

    let (status, _, body) = get_raw(&app, &state_id).await;
    assert_eq!(status, 200);
    assert_eq!(body.expect("whole body"), doc);
    let info = app.state_info(&state_id).await;
    assert_ne!(info.status, pb::StateStatus::RecoveryRequired as i32);
}
