//! The OpenTofu HTTP backend protocol as tofu's client speaks it (CLIENT.md): the request
//! sequences of `plan` and `apply`, locking, the write rules of POST and GET, and the
//! staleness check at LOCK.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use cairn_auth::Role;
use cairn_contract::RefusalReason;
use cairn_proto::state as pb;
use common::*;
use uuid::Uuid;

/// A request exactly as tofu's http backend sends it: basic auth `run:<token>`, and for a
/// body `Content-Type: application/json` plus `Content-MD5`.
async fn tofu(app: &TestApp, method: &str, url: &str, token: &str, body: Option<&[u8]>) -> Resp {
    let mut req = app
        .http
        .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url)
        .basic_auth("run", Some(token));
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .header("content-md5", md5_b64(b))
            .body(b.to_vec());
    }
    app.raw(req).await
}

async fn tofu_lock(app: &TestApp, a: &Admitted, id: &str, op: &str) -> Resp {
    let info = lock_info(id, op);
    tofu(
        app,
        "LOCK",
        &a.lock_address,
        &a.token,
        Some(info.as_bytes()),
    )
    .await
}

async fn tofu_unlock(app: &TestApp, a: &Admitted, id: &str, op: &str) -> Resp {
    let info = lock_info(id, op);
    tofu(
        app,
        "UNLOCK",
        &a.lock_address,
        &a.token,
        Some(info.as_bytes()),
    )
    .await
}

async fn tofu_post(app: &TestApp, a: &Admitted, id: &str, body: &[u8]) -> Resp {
    let url = format!("{}?ID={id}", a.address);
    tofu(app, "POST", &url, &a.token, Some(body)).await
}

async fn inspect(app: &TestApp, state_id: &str) -> pb::InspectStateResponse {
    app.recovery(&app.user_token(Role::Admin))
        .inspect_state(pb::InspectStateRequest {
            state_id: state_id.to_owned(),
        })
        .await
        .expect("inspect state")
        .into_inner()
}

/// How many object versions the test bucket holds.
async fn object_versions(app: &TestApp) -> usize {
    let mut count = 0;
    let mut key_marker: Option<String> = None;
    let mut version_marker: Option<String> = None;
    loop {
        let page = app
            .aws
            .s3
            .list_object_versions()
            .bucket(&app.aws.bucket)
            .set_key_marker(key_marker.clone())
            .set_version_id_marker(version_marker.clone())
            .send()
            .await
            .expect("list object versions");
        count += page.versions().len();
        if page.is_truncated() != Some(true) {
            return count;
        }
        key_marker = page.next_key_marker().map(str::to_owned);
        version_marker = page.next_version_id_marker().map(str::to_owned);
    }
}

/// Everything a refused request must leave untouched.
#[derive(Debug, PartialEq)]
struct Snapshot {
    current_generation: u64,
    generations: Vec<(u64, bool, i64, String)>,
    content: Vec<u8>,
    objects: usize,
    pending: i64,
}

async fn snapshot(app: &TestApp, reader: &Admitted) -> Snapshot {
    let state = app.state_info(&reader.state_id).await;
    let generations = inspect(app, &reader.state_id)
        .await
        .generations
        .into_iter()
        .map(|g| (g.generation, g.r#final, g.tofu_serial, g.lineage))
        .collect();
    let got = app.get(reader).await;
    assert_eq!(got.status, 200, "GET: {}", got.text());
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM pending_objects")
        .fetch_one(&app.admin_pool().await)
        .await
        .unwrap();
    Snapshot {
        current_generation: state.current_generation,
        generations,
        content: got.body,
        objects: object_versions(app).await,
        pending,
    }
}

/// A state at generation 1 (serial 1, lineage `lin`) and an apply attempt that holds the
/// lock and has read it.
async fn locked_writer(app: &TestApp, lin: &str) -> (Admitted, String, Vec<u8>) {
    let state_id = app.create_state(&format!("w-{}", Uuid::new_v4())).await;
    let first = state_doc(1, lin, "one");
    app.apply_doc(&state_id, &first).await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let id = Uuid::new_v4().to_string();
    assert_eq!(
        tofu_lock(app, &a, &id, "OperationTypeApply").await.status,
        200
    );
    let got = app.get(&a).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, first);
    (a, id, first)
}

#[tokio::test]
async fn plan_sequence_locks_reads_and_unlocks_without_writing() {
    let app = spawn_app().await;
    let state_id = app.create_state("plan-seq").await;
    let doc = state_doc(1, "lin-plan", "v");
    app.apply_doc(&state_id, &doc).await;

    let plan = app.start_run(&state_id, pb::RunKind::Plan).await;
    assert!(!plan.read_only);
    let id = Uuid::new_v4().to_string();
    let r = tofu_lock(&app, &plan, &id, "OperationTypePlan").await;
    assert_eq!(r.status, 200, "LOCK: {}", r.text());
    let got = tofu(&app, "GET", &plan.address, &plan.token, None).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, doc);
    let r = tofu_unlock(&app, &plan, &id, "OperationTypePlan").await;
    assert_eq!(r.status, 200, "UNLOCK: {}", r.text());
    let fin = app.finish(&plan, pb::RunOutcome::Succeeded).await;
    assert_eq!(fin.final_generation, 1);
    assert!(fin.refusal_reason.is_empty());

    let gens = inspect(&app, &state_id).await.generations;
    assert_eq!(gens.len(), 1, "a plan never writes: {gens:?}");
    // The lock is free again: another run can take it.
    let next = app.start_run(&state_id, pb::RunKind::Apply).await;
    assert_eq!(app.lock(&next, "after-plan").await.status, 200);
}

// Generations on both object stores (the file store is the embedded default).
#[tokio::test]
async fn apply_sequence_writes_gapless_generations_and_only_the_last_is_final_on_s3() {
    apply_sequence(Store::S3).await;
}

#[tokio::test]
async fn apply_sequence_writes_gapless_generations_and_only_the_last_is_final_on_the_file_store() {
    apply_sequence(Store::File).await;
}

async fn apply_sequence(store: Store) {
    let app = spawn_app_with(on(store)).await;
    let state_id = app.create_state("apply-seq").await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    assert_eq!(a.base_generation, 0);
    assert_eq!(a.lock_address, format!("{}/lock", a.address));
    let id = Uuid::new_v4().to_string();
    let lineage = Uuid::new_v4().to_string();

    let r = tofu_lock(&app, &a, &id, "OperationTypeApply").await;
    assert_eq!(r.status, 200, "LOCK: {}", r.text());
    let got = tofu(&app, "GET", &a.address, &a.token, None).await;
    assert_eq!(got.status, 404, "a new state has no generation");

    // Intermediate snapshots (serial + 1 each), then the final write.
    let docs: Vec<Vec<u8>> = (1..=4)
        .map(|serial| state_doc(serial, &lineage, &format!("step-{serial}")))
        .collect();
    for doc in &docs {
        assert_eq!(doc.last(), Some(&b'\n'));
        assert!(!doc[..doc.len() - 1].contains(&b'\n'), "compact JSON");
        let r = tofu_post(&app, &a, &id, doc).await;
        assert_eq!(r.status, 200, "POST: {}", r.text());
    }
    let r = tofu_unlock(&app, &a, &id, "OperationTypeApply").await;
    assert_eq!(r.status, 200, "UNLOCK: {}", r.text());
    let fin = app.finish(&a, pb::RunOutcome::Succeeded).await;
    assert_eq!(fin.final_generation, 4);

    let inspected = inspect(&app, &state_id).await;
    assert_eq!(inspected.state.unwrap().current_generation, 4);
    let gens = inspected.generations;
    let numbers: Vec<u64> = gens.iter().map(|g| g.generation).collect();
    assert_eq!(numbers, vec![1, 2, 3, 4], "gapless");
    for g in &gens {
        assert_eq!(g.r#final, g.generation == 4, "generation {}", g.generation);
        assert_eq!(g.tofu_serial, i64::try_from(g.generation).unwrap());
        assert_eq!(g.lineage, lineage);
        assert_eq!(g.run_id, a.run_id);
        assert_eq!(g.attempt, 1);
        assert!(
            g.verified,
            "generation {}: {}",
            g.generation, g.verify_error
        );
        assert!(g.size > 0);
    }

    // One object version per generation, under the state's key.
    let objects = app.object_versions().await;
    assert_eq!(objects.len(), 4, "{objects:?}");
    assert!(
        objects
            .iter()
            .all(|o| o.key.starts_with("cairn/apply-seq.tfstate/g")),
        "{objects:?}"
    );

    // A later run reads exactly the last document.
    let reader = app.start_run(&state_id, pb::RunKind::Plan).await;
    assert_eq!(reader.base_generation, 4);
    let got = app.get(&reader).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, docs[3]);
}

#[tokio::test]
async fn lock_is_idempotent_and_a_conflict_names_the_holder() {
    let app = spawn_app().await;
    let state_id = app.create_state("locks").await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let holder = Uuid::new_v4().to_string();
    assert_eq!(
        tofu_lock(&app, &a, &holder, "OperationTypeApply")
            .await
            .status,
        200
    );
    assert_eq!(
        tofu_lock(&app, &a, &holder, "OperationTypeApply")
            .await
            .status,
        200,
        "LOCK with the same id again (a retry) succeeds"
    );

    // Another run, and the same attempt with another id: 423 with the holder's LockInfo.
    let b = app.start_run(&state_id, pb::RunKind::Apply).await;
    for (who, attempt) in [("another run", &b), ("the same attempt", &a)] {
        let other = Uuid::new_v4().to_string();
        let r = tofu_lock(&app, attempt, &other, "OperationTypeApply").await;
        assert_eq!(r.status, 423, "{who}: {}", r.text());
        let info: serde_json::Value = serde_json::from_slice(&r.body).expect("LockInfo JSON");
        assert_eq!(info["ID"], holder.as_str(), "{who}");
        assert_eq!(info["Operation"], "OperationTypeApply");
        assert_eq!(info["Who"], "test@host");
    }

    // UNLOCK with another id while A holds it: refused, still held.
    let r = tofu_unlock(&app, &b, &Uuid::new_v4().to_string(), "OperationTypeApply").await;
    assert_ne!(r.status, 200, "{}", r.text());
    let r = tofu_unlock(&app, &a, &Uuid::new_v4().to_string(), "OperationTypeApply").await;
    assert_ne!(r.status, 200, "{}", r.text());
    assert_eq!(app.lock(&b, "probe").await.status, 423, "still held by A");

    // `tofu force-unlock -force <A's id>` from B: never over HTTP.
    let force = serde_json::json!({
        "ID": holder, "Operation": "", "Info": "", "Who": "", "Version": "",
        "Created": "0001-01-01T00:00:00Z", "Path": ""
    })
    .to_string();
    let r = tofu(
        &app,
        "UNLOCK",
        &b.lock_address,
        &b.token,
        Some(force.as_bytes()),
    )
    .await;
    assert_ne!(r.status, 200, "force-unlock over HTTP: {}", r.text());
    // The pre-1.10 force-unlock had an empty body.
    let r = tofu(&app, "UNLOCK", &b.lock_address, &b.token, Some(b"")).await;
    assert_ne!(r.status, 200, "empty force-unlock body: {}", r.text());
    let r = tofu(&app, "UNLOCK", &b.lock_address, &b.token, None).await;
    assert_ne!(r.status, 200, "force-unlock without body: {}", r.text());
    let r = tofu_lock(&app, &b, "probe", "OperationTypeApply").await;
    assert_eq!(
        r.status, 423,
        "still held by A after the force-unlock attempts"
    );
    let info: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(info["ID"], holder.as_str());

    // The holder unlocks; a repeat is also 200; then B can lock.
    assert_eq!(
        tofu_unlock(&app, &a, &holder, "OperationTypeApply")
            .await
            .status,
        200
    );
    assert_eq!(
        tofu_unlock(&app, &a, &holder, "OperationTypeApply")
            .await
            .status,
        200
    );
    let b_id = Uuid::new_v4().to_string();
    assert_eq!(
        tofu_lock(&app, &b, &b_id, "OperationTypeApply")
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn post_without_or_with_a_wrong_lock_id_is_409_and_changes_nothing() {
    let app = spawn_app().await;
    let (a, id, _) = locked_writer(&app, "lin-id").await;
    let before = snapshot(&app, &a).await;
    let doc = state_doc(2, "lin-id", "two");

    let no_id = tofu(&app, "POST", &a.address, &a.token, Some(&doc)).await;
    assert_eq!(no_id.status, 409, "{}", no_id.text());
    let empty_id = tofu(
        &app,
        "POST",
        &format!("{}?ID=", a.address),
        &a.token,
        Some(&doc),
    )
    .await;
    assert_eq!(empty_id.status, 409, "{}", empty_id.text());
    let wrong = tofu_post(&app, &a, &Uuid::new_v4().to_string(), &doc).await;
    assert_eq!(wrong.status, 409, "{}", wrong.text());
    assert_eq!(snapshot(&app, &a).await, before);

    // Another attempt naming A's lock id is not the holder either.
    let b = app.start_run(&a.state_id, pb::RunKind::Apply).await;
    assert_eq!(app.get(&b).await.status, 200);
    let r = tofu_post(&app, &b, &id, &doc).await;
    assert_eq!(r.status, 409, "{}", r.text());
    assert_eq!(snapshot(&app, &a).await, before);

    // The holder with its id still writes.
    assert_eq!(tofu_post(&app, &a, &id, &doc).await.status, 200);
    assert_eq!(app.state_info(&a.state_id).await.current_generation, 2);

    // Once unlocked, the old id no longer authorises a write.
    assert_eq!(
        tofu_unlock(&app, &a, &id, "OperationTypeApply")
            .await
            .status,
        200
    );
    let before = snapshot(&app, &a).await;
    let late = tofu_post(&app, &a, &id, &state_doc(3, "lin-id", "three")).await;
    assert_eq!(late.status, 409, "{}", late.text());
    assert_eq!(snapshot(&app, &a).await, before);
}

#[tokio::test]
async fn a_resent_post_is_one_generation() {
    let app = spawn_app().await;
    let (a, id, _) = locked_writer(&app, "lin-resend").await;
    let doc = state_doc(2, "lin-resend", "two");
    // tofu re-sends the same body after a 5xx it got although the write committed.
    let first = tofu_post(&app, &a, &id, &doc).await;
    assert_eq!(first.status, 200, "{}", first.text());
    let after_first = snapshot(&app, &a).await;
    let again = tofu_post(&app, &a, &id, &doc).await;
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(snapshot(&app, &a).await, after_first);
    assert_eq!(after_first.current_generation, 2);
    assert_eq!(after_first.generations.len(), 2);
    assert_eq!(after_first.content, doc);

    // The real thing: the write commits but the response is lost as a 503; tofu retries.
    let three = state_doc(3, "lin-resend", "three");
    let fp = &app.server().app().failpoints;
    fp.arm(cairn_state_coordinator::failpoints::AFTER_COMMIT);
    let lost = tofu_post(&app, &a, &id, &three).await;
    fp.disarm(cairn_state_coordinator::failpoints::AFTER_COMMIT);
    assert_eq!(lost.status, 503, "{}", lost.text());
    let retry = tofu_post(&app, &a, &id, &three).await;
    assert_eq!(retry.status, 200, "{}", retry.text());
    let after = snapshot(&app, &a).await;
    assert_eq!(after.current_generation, 3);
    assert_eq!(after.generations.len(), 3);
    assert_eq!(after.content, three);
}

#[tokio::test]
async fn a_post_resent_while_the_first_is_still_in_flight_is_one_generation() {
    // A proxy answers 5xx (or the client times out) while the coordinator is still
    // committing; tofu re-sends the same body, so both requests are in flight at once.
    let app = spawn_app().await;
    let (a, id, _) = locked_writer(&app, "lin-race").await;
    for serial in 2..=21u64 {
        let doc = state_doc(serial, "lin-race", &format!("v{serial}"));
        let (first, second, third) = tokio::join!(
            tofu_post(&app, &a, &id, &doc),
            tofu_post(&app, &a, &id, &doc),
            tofu_post(&app, &a, &id, &doc)
        );
        assert_eq!(first.status, 200, "serial {serial}: {}", first.text());
        assert_eq!(second.status, 200, "serial {serial}: {}", second.text());
        assert_eq!(third.status, 200, "serial {serial}: {}", third.text());
        let now = app.state_info(&a.state_id).await;
        assert_eq!(now.current_generation, serial, "one generation per serial");
        assert_eq!(app.get(&a).await.body, doc);
    }
    let gens = inspect(&app, &a.state_id).await.generations;
    let numbers: Vec<u64> = gens.iter().map(|g| g.generation).collect();
    assert_eq!(numbers, (1..=21).collect::<Vec<u64>>());
    assert!(gens.iter().all(|g| g.verified), "{gens:?}");
    // The losers' objects are gone: one object version per generation.
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM pending_objects")
        .fetch_one(&app.admin_pool().await)
        .await
        .unwrap();
    assert_eq!(pending, 0, "no pending rows are left behind");
    let objects = object_versions(&app).await;
    assert_eq!(objects, 21, "object versions for 21 generations");
}

#[tokio::test]
async fn serial_and_lineage_conflicts_are_409_and_change_nothing() {
    let app = spawn_app().await;
    let (a, id, _) = locked_writer(&app, "lin-c").await;
    let two = state_doc(2, "lin-c", "two");
    assert_eq!(tofu_post(&app, &a, &id, &two).await.status, 200);
    let before = snapshot(&app, &a).await;
    assert_eq!(before.current_generation, 2);

    let cases = [
        ("same serial, other content", state_doc(2, "lin-c", "other")),
        ("lower serial", state_doc(1, "lin-c", "one-again")),
        ("lineage mismatch", state_doc(3, "lin-other", "three")),
    ];
    for (what, doc) in cases {
        let r = tofu_post(&app, &a, &id, &doc).await;
        assert_eq!(r.status, 409, "{what}: {}", r.text());
        assert!(!r.body.is_empty(), "{what}: the body carries the reason");
        assert_eq!(snapshot(&app, &a).await, before, "{what}");
    }
    let lineage = tofu_post(&app, &a, &id, &state_doc(3, "lin-other", "x")).await;
    assert!(lineage.text().contains("lineage"), "{}", lineage.text());
    let back = tofu_post(&app, &a, &id, &state_doc(1, "lin-c", "x")).await;
    assert!(back.text().contains("serial"), "{}", back.text());
}

#[tokio::test]
async fn malformed_bodies_are_400_and_change_nothing() {
    let app = spawn_app().await;
    let (a, id, _) = locked_writer(&app, "lin-bad").await;
    let before = snapshot(&app, &a).await;
    let url = format!("{}?ID={id}", a.address);

    for body in [
        b"this is not json".as_slice(),
        b"".as_slice(),
        b"[1,2,3]".as_slice(),
        b"{\"version\":4,\"serial\":2".as_slice(),
    ] {
        let r = tofu(&app, "POST", &url, &a.token, Some(body)).await;
        assert_eq!(
            r.status,
            400,
            "{:?}: {}",
            String::from_utf8_lossy(body),
            r.text()
        );
        assert_eq!(snapshot(&app, &a).await, before);
    }

    // A valid document with a Content-MD5 of other bytes.
    let doc = state_doc(2, "lin-bad", "two");
    let r = app
        .raw(
            app.http
                .post(&url)
                .basic_auth("run", Some(&a.token))
                .header("content-type", "application/json")
                .header("content-md5", md5_b64(b"something else"))
                .body(doc.clone()),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("MD5"), "{}", r.text());
    assert_eq!(snapshot(&app, &a).await, before);

    // The same document without Content-MD5 is fine (it is checked only when sent).
    let r = app
        .raw(
            app.http
                .post(&url)
                .basic_auth("run", Some(&a.token))
                .header("content-type", "application/json")
                .body(doc.clone()),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(snapshot(&app, &a).await.content, doc);
}

#[tokio::test]
async fn oversized_body_is_413_and_changes_nothing() {
    let limit = 4096;
    let app = spawn_app_with(Options {
        max_state_bytes: limit,
        ..Options::default()
    })
    .await;
    let (a, id, _) = locked_writer(&app, "lin-big").await;
    let before = snapshot(&app, &a).await;

    // Just over the limit (read, then refused) and far over it (refused while reading).
    for size in [limit + 100, limit * 8] {
        let doc = state_doc(2, "lin-big", &"x".repeat(size));
        assert!(doc.len() > limit);
        let r = tofu_post(&app, &a, &id, &doc).await;
        assert_eq!(r.status, 413, "{} bytes: {}", doc.len(), r.text());
        assert_eq!(snapshot(&app, &a).await, before);
    }
    // A document within the limit is accepted.
    let small = state_doc(2, "lin-big", "small");
    assert!(small.len() <= limit);
    assert_eq!(tofu_post(&app, &a, &id, &small).await.status, 200);
}

#[tokio::test]
async fn get_is_404_before_the_first_generation_and_exact_bytes_after_on_s3() {
    get_exact_bytes(Store::S3).await;
}

#[tokio::test]
async fn get_is_404_before_the_first_generation_and_exact_bytes_after_on_the_file_store() {
    get_exact_bytes(Store::File).await;
}

async fn get_exact_bytes(store: Store) {
    let app = spawn_app_with(on(store)).await;
    let state_id = app.create_state("get-404").await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let r = app.get(&a).await;
    assert_eq!(r.status, 404, "{}", r.text());
    let peek = app.start_run(&state_id, pb::RunKind::Preview).await;
    assert_eq!(app.get(&peek).await.status, 404);

    // Bytes the coordinator must not normalise: key order, spacing, unicode escapes.
    let doc = b"{\"version\":4, \"terraform_version\":\"1.12.6\",\"serial\":1,\"lineage\":\"lin-bytes\",\"outputs\":{\"s\":{\"value\":\"\\u00e9 \xc3\xa9\",\"type\":\"string\"}},\"resources\":[],\"check_results\":null}\n".to_vec();
    let id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &id).await.status, 200);
    let r = tofu_post(&app, &a, &id, &doc).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let got = app.get(&a).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, doc);
    assert_eq!(app.unlock(&a, &id).await.status, 200);
    app.finish(&a, pb::RunOutcome::Succeeded).await;

    let later = app.start_run(&state_id, pb::RunKind::Drift).await;
    let got = app.get(&later).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, doc);
}

#[tokio::test]
async fn a_stale_attempt_is_refused_at_lock_with_412_and_the_reason_is_recorded() {
    let app = spawn_app().await;
    let state_id = app.create_state("stale").await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    assert_eq!(a.base_generation, 0);

    // Run B applies a generation while A has not locked yet.
    let b = app
        .apply_doc(&state_id, &state_doc(1, "lin-stale", "b"))
        .await;
    assert_eq!(b.base_generation, 0);

    let id = Uuid::new_v4().to_string();
    let r = tofu_lock(&app, &a, &id, "OperationTypeApply").await;
    assert_eq!(r.status, 412, "{}", r.text());
    assert!(r.text().contains("stale"), "{}", r.text());
    // The human message is tofu's (the response body); the attempt records the code.
    assert!(r.text().contains("generation 1"), "{}", r.text());
    // Nothing was locked for A: a fresh run can lock.
    let c = app.start_run(&state_id, pb::RunKind::Apply).await;
    assert_eq!(app.lock(&c, "c").await.status, 200);
    assert_eq!(app.unlock(&c, "c").await.status, 200);

    let recorded: Option<String> = sqlx::query_scalar(
        "SELECT refusal_reason FROM attempts WHERE run_id = $1::uuid AND attempt = $2",
    )
    .bind(&a.run_id)
    .bind(i32::try_from(a.attempt).unwrap())
    .fetch_one(&app.admin_pool().await)
    .await
    .unwrap();
    let recorded = recorded.expect("refusal reason recorded on the attempt");
    assert_eq!(
        recorded,
        RefusalReason::Stale.code(),
        "the code, not the message"
    );

    let fin = app.finish(&a, pb::RunOutcome::Failed).await;
    assert_eq!(fin.refusal_reason, recorded);
    assert_eq!(
        RefusalReason::from_code(&fin.refusal_reason),
        Some(RefusalReason::Stale),
        "{}",
        fin.refusal_reason
    );
    assert_eq!(fin.final_generation, 1);
    assert_eq!(app.state_info(&state_id).await.current_generation, 1);
    // B's generation is intact and final.
    let gens = inspect(&app, &state_id).await.generations;
    assert_eq!(gens.len(), 1);
    assert!(gens[0].r#final);
}

#[tokio::test]
async fn a_post_moves_the_state_metrics() {
    use cairn_state_coordinator::metrics::{
        BACKEND_REQUEST_DURATION, BACKEND_REQUESTS, GENERATIONS_COMMITTED, WRITE_DURATION,
    };
    use cairn_testkit::metrics::sample;
    // The recorder is process-wide: values are compared before and after.
    cairn_service::metrics::install().expect("the Prometheus recorder");
    let render = || cairn_service::metrics::render().expect("installed");
    let app = spawn_app().await;
    let (a, id, _) = locked_writer(&app, "lin-metrics").await;
    let before = render();
    let post = tofu_post(&app, &a, &id, &state_doc(2, "lin-metrics", "two")).await;
    assert_eq!(post.status, 200, "{}", post.text());

    let posts = |t: &str| {
        sample(
            t,
            &format!("{BACKEND_REQUEST_DURATION}_count"),
            &[("method", "POST")],
        )
    };
    // The backend records a request when its response body is done, which may be just
    // after the client has it.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let after = loop {
        let now = render();
        if posts(&now) > posts(&before) {
            break now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no POST sample:\n{now}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    let moved = |name: &str, labels: &[(&str, &str)]| {
        sample(&after, name, labels) > sample(&before, name, labels)
    };
    assert!(moved(GENERATIONS_COMMITTED, &[("via", "run")]), "{after}");
    assert!(moved(
        BACKEND_REQUESTS,
        &[("method", "POST"), ("status", "200")]
    ));
    assert!(moved(
        &format!("{WRITE_DURATION}_count"),
        &[("via", "run"), ("outcome", "ok")]
    ));
    assert!(moved(
        &format!("{}_count", cairn_storage::metrics::S3_REQUEST_DURATION),
        &[("operation", "put"), ("outcome", "ok")]
    ));
    assert!(
        after.contains(&format!("# HELP {GENERATIONS_COMMITTED}")),
        "described"
    );
}
