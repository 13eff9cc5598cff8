//! What the coordinator starts or keeps ahead of its reads. What the backend starts before
//! its database read answers (the object a GET fetches ahead, the data key a POST asks for
//! ahead) is only ever a guess: a wrong guess is never served, and a data key asked for a
//! write that is then refused seals the state's next write instead, so there is still one
//! key-manager call per written generation. Outputs kept per generation are never another
//! generation's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn_proto::state as pb;
use cairn_state_coordinator::app::read_ahead::CurrentObject;
use cairn_storage::{
    BoxFuture, DataKey, EncryptionContext, KeyError, KeyManager, LocalKeyFile, SecretKey,
};
use common::{Options, TestApp, spawn_app, spawn_app_with, state_doc};
use tempfile::TempDir;
use uuid::Uuid;

/// Delegates to a local key file and counts the data keys it generates.
struct CountingKeys {
    inner: LocalKeyFile,
    generated: AtomicU64,
}

impl KeyManager for CountingKeys {
    fn generate_data_key<'a>(
        &'a self,
        ctx: &'a EncryptionContext,
    ) -> BoxFuture<'a, Result<DataKey, KeyError>> {
        self.generated.fetch_add(1, Ordering::SeqCst);
        self.inner.generate_data_key(ctx)
    }

    fn unwrap_data_key<'a>(
        &'a self,
        key_id: &'a str,
        wrapped: &'a [u8],
        ctx: &'a EncryptionContext,
    ) -> BoxFuture<'a, Result<SecretKey, KeyError>> {
        self.inner.unwrap_data_key(key_id, wrapped, ctx)
    }

    fn describe(&self) -> String {
        format!("counting {}", self.inner.describe())
    }
}

/// An app whose key manager (a local key file in the returned directory) counts the data
/// keys it generates.
async fn counting_app() -> (TestApp, Arc<CountingKeys>, TempDir) {
    let dir = cairn_testkit::temp_dir();
    let keys = Arc::new(CountingKeys {
        inner: LocalKeyFile::open_or_create(dir.path().join("keys.json")).unwrap(),
        generated: AtomicU64::new(0),
    });
    let app = spawn_app_with(Options {
        keys: Some(keys.clone()),
        ..Options::default()
    })
    .await;
    (app, keys, dir)
}

#[tokio::test]
async fn a_wrong_guess_of_the_current_object_is_never_served() {
    let app = spawn_app().await;
    let state_id = app.create_state("read-ahead-wrong").await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let lock_id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &lock_id).await.status, 200);
    let doc1 = state_doc(1, "lin-ahead", "one");
    assert_eq!(app.post(&a, &lock_id, &doc1).await.status, 200);
    assert_eq!(app.get(&a).await.body, doc1);
    let first = app.generation_row(&state_id, 1).await;

    // The process believes, wrongly, that generation 1's object is a newer generation's:
    // the guess is never replaced by the real generation 2 and is fetched on every GET.
    let sid = Uuid::parse_str(&state_id).unwrap();
    app.core().read_ahead.current_is(
        sid,
        CurrentObject {
            generation: 7,
            object_key: first.object_key.clone(),
            object_version: first.object_version.clone(),
        },
    );
    let doc2 = state_doc(2, "lin-ahead", "two");
    assert_eq!(app.post(&a, &lock_id, &doc2).await.status, 200);
    let got = app.get(&a).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(
        got.body, doc2,
        "the database's current generation is served"
    );

    // A guess naming an object that does not exist changes nothing either.
    app.core().read_ahead.current_is(
        sid,
        CurrentObject {
            generation: 8,
            object_key: format!("{}-missing", first.object_key),
            object_version: first.object_version,
        },
    );
    let got = app.get(&a).await;
    assert_eq!((got.status, got.body), (200, doc2));
    assert_eq!(app.state_info(&state_id).await.current_generation, 2);
}

#[tokio::test]
async fn a_data_key_asked_for_a_refused_write_seals_the_next_one() {
    let (app, keys, _dir) = counting_app().await;
    let state_id = app.create_state("read-ahead-keys").await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let lock_id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &lock_id).await.status, 200);
    // Registering the run sealed its root config under a key of its own.
    let before = keys.generated.load(Ordering::SeqCst);
    assert_eq!(
        app.post(&a, &lock_id, &state_doc(1, "lin-keys", "one"))
            .await
            .status,
        200
    );
    // The same serial with other content: refused after its data key was asked for.
    let conflict = app
        .post(&a, &lock_id, &state_doc(1, "lin-keys", "other"))
        .await;
    assert_eq!(conflict.status, 409, "{}", conflict.text());
    // A write without the lock's ID: refused before anything else, its key kept too.
    let unlocked = app
        .post(&a, "not-the-lock", &state_doc(2, "lin-keys", "two"))
        .await;
    assert_eq!(unlocked.status, 409, "{}", unlocked.text());
    assert_eq!(
        app.post(&a, &lock_id, &state_doc(2, "lin-keys", "two"))
            .await
            .status,
        200
    );
    assert_eq!(app.state_info(&state_id).await.current_generation, 2);
    assert_eq!(
        keys.generated.load(Ordering::SeqCst) - before,
        2,
        "one data key per written generation"
    );
    // Two generations, two different data keys (a key seals one generation only).
    let (g1, g2) = (
        app.generation_row(&state_id, 1).await,
        app.generation_row(&state_id, 2).await,
    );
    assert_ne!(g1.wrapped_key, g2.wrapped_key);
    assert_eq!(app.get(&a).await.body, state_doc(2, "lin-keys", "two"));
}

/// The public outputs a read keeps are those of one generation: the next generation's are
/// read from it, never the kept ones.
#[tokio::test]
async fn outputs_kept_for_a_generation_are_never_served_for_another() {
    let app = spawn_app().await;
    let state_id = app.create_state("kept-outputs").await;
    let name_of = |out: pb::GetOutputsResponse| {
        let value = out
            .outputs
            .iter()
            .find(|o| o.name == "name")
            .map(|o| o.value_json.clone());
        (out.generation, value)
    };
    let outputs = || async {
        app.runs(&app.service_token())
            .get_outputs(pb::GetOutputsRequest {
                state_id: state_id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
    };
    app.apply_doc(&state_id, &state_doc(1, "lin-out", "first"))
        .await;
    assert_eq!(name_of(outputs().await), (1, Some("\"first\"".to_owned())));
    // Read again (served as kept): the same answer.
    assert_eq!(name_of(outputs().await), (1, Some("\"first\"".to_owned())));
    app.apply_doc(&state_id, &state_doc(2, "lin-out", "second"))
        .await;
    assert_eq!(name_of(outputs().await), (2, Some("\"second\"".to_owned())));
}

/// A run's write keeps the public outputs of the body it checked: the first `GetOutputs`
/// after an apply (what the workflow asks right away) is answered without reading the
/// generation's object back, still without its sensitive values. A document over the bound
/// (1 MiB) keeps none: its outputs are read from its object.
#[tokio::test]
async fn a_committed_write_keeps_its_public_outputs_and_a_large_one_does_not() {
    let app = spawn_app().await;
    let outputs = |state_id: String| async {
        app.runs(&app.service_token())
            .get_outputs(pb::GetOutputsRequest { state_id })
            .await
    };
    let state_id = app.create_state("outputs-at-commit").await;
    app.apply_doc(&state_id, &state_doc(1, "lin-commit", "written"))
        .await;
    // Gone from the bucket: only what the write kept can answer.
    let g = app.generation_row(&state_id, 1).await;
    app.bucket_delete(&g.object_key, &g.object_version).await;
    let out = outputs(state_id.clone())
        .await
        .expect("answered from the write")
        .into_inner();
    assert_eq!(out.generation, 1);
    let by_name = |n: &str| out.outputs.iter().find(|o| o.name == n).cloned().unwrap();
    assert_eq!(by_name("name").value_json, "\"written\"");
    let password = by_name("password");
    assert!(password.sensitive);
    assert_eq!(
        password.value_json, "",
        "a sensitive value is never kept or answered"
    );

    // Over the bound: the object is read, and without it there is no answer.
    let large_id = app.create_state("outputs-at-commit-large").await;
    let mut doc: serde_json::Value =
        serde_json::from_slice(&state_doc(1, "lin-large", "large")).unwrap();
    doc["resources"] = serde_json::json!([{
        "mode": "managed", "type": "local_file", "name": "pad", "provider": "provider[\"registry.opentofu.org/hashicorp/local\"]",
        "instances": [{"schema_version": 0, "attributes": {"content": "x".repeat(1024 * 1024 + 1)}}]
    }]);
    let large = serde_json::to_vec(&doc).unwrap();
    app.apply_doc(&large_id, &large).await;
    let g = app.generation_row(&large_id, 1).await;
    app.bucket_delete(&g.object_key, &g.object_version).await;
    assert!(
        outputs(large_id.clone()).await.is_err(),
        "a large document's outputs were kept in memory"
    );
}

/// Root configs are sealed under one data key per state (asked for when the state is
/// created), not one per run: a state's runs share its key, another state never gets it,
/// and every config still opens as its own run's exact bytes.
#[tokio::test]
async fn run_configs_of_a_state_share_its_key_and_only_that_state_has_it() {
    let (app, keys, _dir) = counting_app().await;
    let start = keys.generated.load(Ordering::SeqCst);
    let (a, b) = (
        app.create_state("config-keys-a").await,
        app.create_state("config-keys-b").await,
    );
    let mut registered = Vec::new();
    for (state, n) in [(&a, 3), (&b, 2)] {
        for i in 0..n {
            let config = format!(r#"{{"locals":{{"m":"{state}-{i}"}}}}"#).into_bytes();
            let spec = cairn_state_coordinator::testing::RunSpec {
                root_config: config.clone(),
                ..Default::default()
            };
            let run = app
                .fx
                .register_of(state, pb::RunKind::Plan, "dev", &spec)
                .await;
            registered.push((state.clone(), run, config));
        }
    }
    assert_eq!(
        keys.generated.load(Ordering::SeqCst) - start,
        2,
        "one data key per state for five run configs"
    );

    let pool = app.admin_pool().await;
    let mut wrapped = std::collections::HashMap::<String, Vec<Vec<u8>>>::new();
    for (state, run, config) in &registered {
        let key: Vec<u8> =
            sqlx::query_scalar("SELECT config_wrapped_key FROM runs WHERE run_id = $1::uuid")
                .bind(run)
                .fetch_one(&pool)
                .await
                .unwrap();
        wrapped.entry(state.clone()).or_default().push(key);
        let opened = app
            .runs(&app.service_token())
            .get_registered_run_config(pb::GetRegisteredRunConfigRequest {
                run_id: run.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(&opened.root_config, config, "run {run} opens as its own");
    }
    let (wa, wb) = (&wrapped[&a], &wrapped[&b]);
    assert!(wa.iter().all(|k| k == &wa[0]) && wb.iter().all(|k| k == &wb[0]));
    assert_ne!(wa[0], wb[0], "another state never reuses the key");

    // A config moved to another run's row (same key, same state) does not open there: the
    // run id is bound into each config.
    let (first, second) = (&registered[0].1, &registered[1].1);
    sqlx::query(
        "UPDATE runs SET (config_nonce, config_ciphertext) =
            (SELECT config_nonce, config_ciphertext FROM runs WHERE run_id = $1::uuid)
          WHERE run_id = $2::uuid",
    )
    .bind(first)
    .bind(second)
    .execute(&pool)
    .await
    .unwrap();
    let moved = app
        .runs(&app.service_token())
        .get_registered_run_config(pb::GetRegisteredRunConfigRequest {
            run_id: second.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(moved.code(), tonic::Code::FailedPrecondition, "{moved:?}");
}

/// tofu reads a state before it writes it: a GET by an apply attempt holding the lock asks
/// for the data key of the write that follows, and the write takes that key instead of
/// asking again (one key-manager call per written generation, a key per generation). A GET
/// that no write of the same run follows (a plan holding the lock, an apply without it)
/// asks for nothing.
#[tokio::test]
async fn a_read_before_a_write_asks_for_the_writes_key_and_only_then() {
    let (app, keys, _dir) = counting_app().await;
    let spare = &app.core().spare_keys;

    // Reads no write follows: a plan holding its state's lock, an apply not holding it.
    let planned = app.create_state("ask-ahead-plan").await;
    let plan = app.start_run(&planned, pb::RunKind::Plan).await;
    assert_eq!(
        app.lock(&plan, &Uuid::new_v4().to_string()).await.status,
        200
    );
    let unlocked = app.create_state("ask-ahead-unlocked").await;
    let apply_unlocked = app.start_run(&unlocked, pb::RunKind::Apply).await;
    for run in [&plan, &apply_unlocked] {
        assert_eq!(app.get(run).await.status, 404, "no generation yet");
    }
    for state in [&planned, &unlocked] {
        assert!(
            spare.take(Uuid::parse_str(state).unwrap()).is_none(),
            "a read no write follows asked for a key"
        );
    }

    // An apply holding the lock: each read asks for the next write's key, each write takes it.
    let state_id = app.create_state("ask-ahead-apply").await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let lock_id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &lock_id).await.status, 200);
    let sid = Uuid::parse_str(&state_id).unwrap();
    // Creating the state asked for its root configs' key (app::config_keys).
    let before = keys.generated.load(Ordering::SeqCst);
    let mut wrapped = Vec::new();
    for serial in 1..=3u64 {
        let read = app.get(&a).await;
        assert!(matches!(read.status, 200 | 404), "{}", read.text());
        let doc = state_doc(serial, "lin-ask-ahead", &format!("v{serial}"));
        let written = app.post(&a, &lock_id, &doc).await;
        assert_eq!(written.status, 200, "{}", written.text());
        assert!(
            spare.take(sid).is_none(),
            "the write took the key asked for"
        );
        wrapped.push(
            app.generation_row(&state_id, serial as i64)
                .await
                .wrapped_key,
        );
    }
    assert_eq!(
        keys.generated.load(Ordering::SeqCst) - before,
        3,
        "one data key per written generation, asked for by the read before it"
    );
    wrapped.sort();
    wrapped.dedup();
    assert_eq!(wrapped.len(), 3, "a key seals one generation only");
    assert_eq!(app.get(&a).await.body, state_doc(3, "lin-ask-ahead", "v3"));
}

/// A POST whose token authenticated for the state before asks for its data key while its
/// checks are read; when its body then never arrives (the connection closes mid-body), the
/// key waits for the state's next write, which takes it instead of asking again.
#[tokio::test]
async fn a_write_whose_body_never_arrives_leaves_its_data_key_to_the_next_write() {
    use base64::Engine as _;
    use tokio::io::AsyncWriteExt as _;

    let (app, keys, _dir) = counting_app().await;
    let spare = &app.core().spare_keys;
    let state_id = app.create_state("body-never-arrives").await;
    let sid = Uuid::parse_str(&state_id).unwrap();
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let lock_id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &lock_id).await.status, 200);
    let before = keys.generated.load(Ordering::SeqCst);
    assert!(spare.is_empty(), "no key waits before the first write");

    // Half a body of a declared length, then the connection closes.
    let url = reqwest::Url::parse(&a.address).unwrap();
    let authority = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
    let credentials = base64::engine::general_purpose::STANDARD.encode(format!("run:{}", a.token));
    let doc = state_doc(1, "lin-cut", "one");
    let head = format!(
        "POST {}?ID={lock_id} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Basic {credentials}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        url.path(),
        doc.len()
    );
    let mut stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&doc[..doc.len() / 2]).await.unwrap();
    stream.flush().await.unwrap();
    // The key is asked for once the request's head is in: wait for it to wait.
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while spare.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the write's data key was asked for while its checks were read");
    drop(stream);
    assert_eq!(app.state_info(&state_id).await.current_generation, 0);

    // The next write takes that key: one key-manager call for one written generation.
    assert_eq!(app.post(&a, &lock_id, &doc).await.status, 200);
    assert!(spare.take(sid).is_none(), "the write took the waiting key");
    assert_eq!(
        keys.generated.load(Ordering::SeqCst) - before,
        1,
        "one data key per written generation"
    );
    assert_eq!(app.get(&a).await.body, doc);
}
