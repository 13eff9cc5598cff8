//! Real OpenTofu state files (../shared/tofu-fixtures/state-files) and native-encryption
//! envelopes through the HTTP backend: written by one run, read back byte-exactly by a later
//! one; documents the coordinator refuses are refused with 400 and leave nothing behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cairn_auth::Role;
use cairn_proto::state as pb;
use common::*;
use uuid::Uuid;

fn fixtures() -> PathBuf {
    cairn_testkit::tofu_fixtures()
}

/// `(file name, bytes)` of every `*.tfstate` in `state-files/<folder>`, sorted by name.
fn state_files(folder: &str) -> Vec<(String, Vec<u8>)> {
    let dir = fixtures().join("state-files").join(folder);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tfstate"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

async fn post_with_lock(app: &TestApp, a: &Admitted, id: &str, body: &[u8]) -> Resp {
    app.post(a, id, body).await
}

/// One apply run writes `doc` as the first generation (lock, GET 404, POST, unlock,
/// finish) and returns the POST's response.
async fn first_write(app: &TestApp, state_id: &str, doc: &[u8]) -> Resp {
    let a = app.start_run(state_id, pb::RunKind::Apply).await;
    let id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &id).await.status, 200);
    assert_eq!(app.get(&a).await.status, 404);
    let r = post_with_lock(app, &a, &id, doc).await;
    assert_eq!(app.unlock(&a, &id).await.status, 200);
    let outcome = if r.status == 200 {
        pb::RunOutcome::Succeeded
    } else {
        pb::RunOutcome::Failed
    };
    app.finish(&a, outcome).await;
    r
}

async fn generations(app: &TestApp, state_id: &str) -> Vec<pb::GenerationInfo> {
    app.recovery(&app.user_token(Role::Admin))
        .inspect_state(pb::InspectStateRequest {
            state_id: state_id.to_owned(),
        })
        .await
        .expect("inspect state")
        .into_inner()
        .generations
}

#[tokio::test]
async fn roundtrip_state_files_come_back_byte_exact_through_a_later_run() {
    let app = spawn_app().await;
    let files = state_files("roundtrip");
    assert!(
        files.len() >= 11,
        "expected the 11 roundtrip fixtures, found {}",
        files.len()
    );
    for (name, bytes) in &files {
        let header: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        let state_id = app.create_state(&format!("fx-{}", Uuid::new_v4())).await;
        let r = first_write(&app, &state_id, bytes).await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());

        let reader = app.start_run(&state_id, pb::RunKind::Plan).await;
        assert_eq!(reader.base_generation, 1, "{name}");
        let got = app.get(&reader).await;
        assert_eq!(got.status, 200, "{name}");
        assert!(got.body == *bytes, "{name}: not returned byte-exactly");

        let gens = generations(&app, &state_id).await;
        assert_eq!(gens.len(), 1, "{name}");
        assert_eq!(
            gens[0].lineage,
            header["lineage"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(
            gens[0].tofu_serial,
            header["serial"].as_i64().unwrap(),
            "{name}"
        );
        assert!(gens[0].size > 0, "{name}");
        assert!(gens[0].r#final && gens[0].verified, "{name}: {:?}", gens[0]);

        // The outputs of a real file can be read (sensitive ones withheld).
        let outputs = app
            .runs(&app.service_token())
            .get_outputs(pb::GetOutputsRequest {
                state_id: state_id.clone(),
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: GetOutputs: {e}"))
            .into_inner();
        assert_eq!(outputs.generation, 1, "{name}");
        let expected = header["outputs"].as_object().map_or(0, |o| o.len());
        assert_eq!(outputs.outputs.len(), expected, "{name}");
    }
}

#[tokio::test]
async fn builtin_provider_files_with_an_empty_lineage_are_refused_with_400() {
    // These fixtures carry `"lineage": ""` and serial 0. OpenTofu never persists a remote
    // state without a lineage, so the coordinator refuses them as malformed (400, which
    // tofu does not retry) instead of storing a state that no later write could match.
    let app = spawn_app().await;
    let files = state_files("builtin-terraform-provider");
    assert!(
        files.len() >= 5,
        "expected 5 fixtures, found {}",
        files.len()
    );
    for (name, bytes) in &files {
        let header: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        assert_eq!(header["lineage"], "", "{name}: fixture changed");
        assert_eq!(header["serial"], 0, "{name}: fixture changed");

        let state_id = app.create_state(&format!("fx-{}", Uuid::new_v4())).await;
        let r = first_write(&app, &state_id, bytes).await;
        assert_eq!(r.status, 400, "{name}: {}", r.text());
        assert!(r.text().contains("lineage"), "{name}: {}", r.text());

        assert_eq!(
            app.state_info(&state_id).await.current_generation,
            0,
            "{name}"
        );
        assert!(generations(&app, &state_id).await.is_empty(), "{name}");
        let reader = app.start_run(&state_id, pb::RunKind::Plan).await;
        assert_eq!(app.get(&reader).await.status, 404, "{name}");
    }
}

/// An envelope as OpenTofu writes it with native state encryption.
fn envelope(serial: u64, lineage: &str, payload: &[u8]) -> Vec<u8> {
    let meta = STANDARD.encode(
        br#"{"salt":"c2FsdHNhbHQ=","iterations":600000,"hash_function":"sha512","key_length":32}"#,
    );
    let mut doc = serde_json::to_vec(&serde_json::json!({
        "serial": serial,
        "lineage": lineage,
        "meta": {"key_provider.pbkdf2.main": meta},
        "encrypted_data": STANDARD.encode(payload),
        "encryption_version": "v0",
    }))
    .unwrap();
    doc.push(b'\n');
    doc
}

#[tokio::test]
async fn native_encryption_envelopes_are_stored_opaquely_and_returned_byte_exact() {
    let app = spawn_app().await;
    let state_id = app.create_state("encrypted").await;
    let lineage = Uuid::new_v4().to_string();
    let one = envelope(1, &lineage, b"\x00\x01nonce-ciphertext-tag\xff");
    let r = first_write(&app, &state_id, &one).await;
    assert_eq!(r.status, 200, "{}", r.text());

    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let got = app.get(&a).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, one);

    // The usual rules apply to envelopes through their plaintext serial and lineage.
    let id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &id).await.status, 200);
    let other_lineage = envelope(2, "someone-else", b"x");
    assert_eq!(app.post(&a, &id, &other_lineage).await.status, 409);
    let same_serial = envelope(1, &lineage, b"different ciphertext");
    assert_eq!(app.post(&a, &id, &same_serial).await.status, 409);
    let two = envelope(2, &lineage, b"second ciphertext");
    let r = app.post(&a, &id, &two).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(app.post(&a, &id, &two).await.status, 200, "re-sent");
    assert_eq!(app.unlock(&a, &id).await.status, 200);
    app.finish(&a, pb::RunOutcome::Succeeded).await;

    let reader = app.start_run(&state_id, pb::RunKind::Preview).await;
    let got = app.get(&reader).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, two);

    let gens = generations(&app, &state_id).await;
    let summary: Vec<(u64, i64, &str, bool)> = gens
        .iter()
        .map(|g| (g.generation, g.tofu_serial, g.lineage.as_str(), g.r#final))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, 1, lineage.as_str(), true),
            (2, 2, lineage.as_str(), true)
        ]
    );
    assert!(gens.iter().all(|g| g.verified));

    // The coordinator cannot see inside: no outputs, but no error either.
    let outputs = app
        .runs(&app.service_token())
        .get_outputs(pb::GetOutputsRequest {
            state_id: state_id.clone(),
        })
        .await
        .expect("GetOutputs of an encrypted state")
        .into_inner();
    assert_eq!(outputs.generation, 2);
    assert!(outputs.outputs.is_empty(), "{:?}", outputs.outputs);
}

#[tokio::test]
async fn an_envelope_without_serial_and_lineage_is_refused_with_400() {
    // The hand-made fixture predates OpenTofu copying serial and lineage next to the
    // ciphertext; without them no write rule can be checked.
    let app = spawn_app().await;
    let path = fixtures().join("encryption/init-encryption-with-state/terraform.tfstate");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let state_id = app.create_state("encrypted-old").await;
    let r = first_write(&app, &state_id, &bytes).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("serial"), "{}", r.text());
    assert_eq!(app.state_info(&state_id).await.current_generation, 0);
}
