//! Crash windows of the write path (pending row → put → commit): a coordinator that stops
//! after any step leaves the current generation intact, tofu's re-sent POST commits exactly
//! one generation, the sweeper removes what the crash left behind (never a committed
//! object), and a commit whose pending row was swept fails instead of advancing.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use cairn_proto::state as pb;
use cairn_state_coordinator::background::sweeper::{SweepReport, SweepSettings, sweep_once};
use cairn_state_coordinator::failpoints::{AFTER_COMMIT, AFTER_PENDING, AFTER_PUT, BEFORE_COMMIT};
use cairn_testkit::Fault;
use common::*;
use uuid::Uuid;

const LINEAGE: &str = "lineage-crash";

fn sweep_now() -> SweepSettings {
    SweepSettings {
        interval: Duration::from_secs(3600),
        pending_ttl: Duration::ZERO,
        intermediate_retention: Duration::from_secs(3600),
        time_limit: cairn_db::BACKGROUND_LIMIT,
    }
}

async fn pending_keys(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar("SELECT object_key FROM pending_objects ORDER BY created_at")
        .fetch_all(&app.admin_pool().await)
        .await
        .unwrap()
}

/// A state at generation 1 and an apply that holds the lock and has read it.
async fn ready_to_write(app: &TestApp) -> (String, Vec<u8>, Admitted, String) {
    let state_id = app.create_state("crash-db").await;
    let doc1 = state_doc(1, LINEAGE, "v1");
    app.apply_doc(&state_id, &doc1).await;
    let apply = app.start_run(&state_id, pb::RunKind::Apply).await;
    let lock_id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&apply, &lock_id).await.status, 200);
    assert_eq!(app.get(&apply).await.status, 200);
    (state_id, doc1, apply, lock_id)
}

/// What a read-only run sees now.
async fn read_back(app: &TestApp, state_id: &str) -> Vec<u8> {
    let reader = app.start_run(state_id, pb::RunKind::Plan).await;
    let got = app.get(&reader).await;
    assert_eq!(got.status, 200, "{}", got.text());
    got.body
}

/// Every generation's object is still in the bucket with the recorded ciphertext.
async fn assert_committed_objects_intact(app: &TestApp, state_id: &str) {
    let count = app.generation_count(state_id).await;
    for g in 1..=count {
        let row = app.generation_row(state_id, g).await;
        let bytes = app
            .bucket_get(&row.object_key, &row.object_version)
            .await
            .unwrap_or_else(|| panic!("generation {g}'s object was deleted"));
        assert_eq!(cairn_storage::sha256_hex(&bytes), row.ciphertext_sha256);
    }
}

/// Crash at `point` during a POST, then tofu re-sends the same POST.
async fn crash_and_retry(point: &str, object_put_before_crash: bool) {
    let app = spawn_app().await;
    let (state_id, doc1, apply, lock_id) = ready_to_write(&app).await;
    let doc2 = state_doc(2, LINEAGE, "v2");

    app.core().failpoints.arm(point);
    let crashed = app.post(&apply, &lock_id, &doc2).await;
    assert_eq!(crashed.status, 503, "{point}: {}", crashed.text());
    app.core().failpoints.disarm(point);

    // In between: nothing committed, the current generation is intact.
    let info = app.state_info(&state_id).await;
    assert_eq!(info.current_generation, 1, "{point}");
    assert_eq!(info.status, pb::StateStatus::Healthy as i32);
    assert_eq!(app.generation_count(&state_id).await, 1);
    assert_eq!(read_back(&app, &state_id).await, doc1, "{point}");
    let left = pending_keys(&app).await;
    assert_eq!(left.len(), 1, "{point}: one pending row left behind");
    let left_key = app.bucket_key(&left[0]);
    let left_versions: BTreeSet<(String, String)> = app
        .bucket_versions()
        .await
        .into_iter()
        .filter(|(k, _)| *k == left_key)
        .collect();
    assert_eq!(
        left_versions.len(),
        usize::from(object_put_before_crash),
        "{point}: object of the crashed write"
    );

    // tofu re-sends: exactly one new generation, also when re-sent once more.
    let retried = app.post(&apply, &lock_id, &doc2).await;
    assert_eq!(retried.status, 200, "{point}: {}", retried.text());
    let again = app.post(&apply, &lock_id, &doc2).await;
    assert_eq!(again.status, 200, "{point}: {}", again.text());
    assert_eq!(app.state_info(&state_id).await.current_generation, 2);
    assert_eq!(app.generation_count(&state_id).await, 2);
    assert_eq!(read_back(&app, &state_id).await, doc2);
    assert_eq!(app.unlock(&apply, &lock_id).await.status, 200);
    app.finish(&apply, pb::RunOutcome::Succeeded).await;

    // The sweeper removes the leftover row and its object, and nothing else.
    let before: BTreeSet<_> = app.bucket_versions().await.into_iter().collect();
    let report = sweep_once(app.core(), &sweep_now()).await.unwrap();
    assert_eq!(report.pending, 1, "{point}: {report:?}");
    assert!(pending_keys(&app).await.is_empty());
    let after: BTreeSet<_> = app.bucket_versions().await.into_iter().collect();
    let removed: BTreeSet<_> = before.difference(&after).cloned().collect();
    assert_eq!(
        removed, left_versions,
        "{point}: only the crashed write's object goes"
    );
    assert!(after.is_subset(&before));
    assert_committed_objects_intact(&app, &state_id).await;
}

#[tokio::test]
async fn crash_after_the_pending_row() {
    crash_and_retry(AFTER_PENDING, false).await;
}

#[tokio::test]
async fn crash_after_the_object_put() {
    crash_and_retry(AFTER_PUT, true).await;
}

#[tokio::test]
async fn crash_just_before_commit() {
    crash_and_retry(BEFORE_COMMIT, true).await;
}

#[tokio::test]
async fn crash_after_commit_before_the_response() {
    let app = spawn_app().await;
    let (state_id, _doc1, apply, lock_id) = ready_to_write(&app).await;
    let doc2 = state_doc(2, LINEAGE, "v2");

    app.core().failpoints.arm(AFTER_COMMIT);
    let crashed = app.post(&apply, &lock_id, &doc2).await;
    assert_eq!(crashed.status, 503, "{}", crashed.text());
    app.core().failpoints.disarm(AFTER_COMMIT);

    // The commit happened: generation 2 is current and complete.
    assert_eq!(app.state_info(&state_id).await.current_generation, 2);
    assert_eq!(app.generation_count(&state_id).await, 2);
    assert_eq!(read_back(&app, &state_id).await, doc2);
    assert!(pending_keys(&app).await.is_empty());

    // tofu's re-sent POST is an idempotent success, not a second generation.
    let retried = app.post(&apply, &lock_id, &doc2).await;
    assert_eq!(retried.status, 200, "{}", retried.text());
    assert_eq!(app.generation_count(&state_id).await, 2);
    assert_eq!(app.state_info(&state_id).await.current_generation, 2);
    assert_eq!(app.unlock(&apply, &lock_id).await.status, 200);
    app.finish(&apply, pb::RunOutcome::Succeeded).await;

    let before = app.bucket_versions().await;
    let report = sweep_once(app.core(), &sweep_now()).await.unwrap();
    assert_eq!(report, SweepReport::default());
    assert_eq!(app.bucket_versions().await, before);
    assert_committed_objects_intact(&app, &state_id).await;
}

#[tokio::test]
async fn a_commit_whose_pending_row_was_swept_fails_and_does_not_advance() {
    let app = spawn_app().await;
    let (state_id, doc1, apply, lock_id) = ready_to_write(&app).await;
    let doc2 = state_doc(2, LINEAGE, "v2");

    // Slow S3 down so the sweeper runs between the pending row and the commit.
    app.s3_proxy.set(Fault::Delay(Duration::from_secs(1)));
    let sweeper = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while pending_keys(&app).await.is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the write never recorded a pending row"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        sweep_once(app.core(), &sweep_now()).await.unwrap()
    };
    let (posted, report) = tokio::join!(app.post(&apply, &lock_id, &doc2), sweeper);
    app.s3_proxy.heal();

    assert_eq!(report.pending, 1, "{report:?}");
    assert_eq!(posted.status, 503, "{}", posted.text());
    assert!(posted.text().contains("swept"), "{}", posted.text());
    let info = app.state_info(&state_id).await;
    assert_eq!(info.current_generation, 1);
    assert_eq!(info.status, pb::StateStatus::Healthy as i32);
    assert_eq!(app.generation_count(&state_id).await, 1);
    assert_eq!(read_back(&app, &state_id).await, doc1);

    // tofu retries the 503 and the write completes once.
    let retried = app.post(&apply, &lock_id, &doc2).await;
    assert_eq!(retried.status, 200, "{}", retried.text());
    assert_eq!(app.state_info(&state_id).await.current_generation, 2);
    assert_eq!(app.generation_count(&state_id).await, 2);
    assert_eq!(read_back(&app, &state_id).await, doc2);
    assert_committed_objects_intact(&app, &state_id).await;
}

/// A sweep whose database work waits on connections gone silent (PostgreSQL's host vanished
/// without FIN or RST) is given up as unavailable after its time limit, having removed
/// nothing; a later pass, on a new connection, removes the leftover: the sweeper is not held
/// for good.
#[tokio::test]
async fn a_sweep_on_a_connection_gone_silent_is_given_up_and_the_next_one_sweeps() {
    let app = spawn_app_with(Options {
        db_proxy: true,
        ..Options::default()
    })
    .await;
    let (state_id, _doc1, apply, lock_id) = ready_to_write(&app).await;
    app.core().failpoints.arm(AFTER_PUT);
    let crashed = app
        .post(&apply, &lock_id, &state_doc(2, LINEAGE, "v2"))
        .await;
    assert_eq!(crashed.status, 503, "{}", crashed.text());
    app.core().failpoints.disarm(AFTER_PUT);
    let left = pending_keys(&app).await;
    assert_eq!(left.len(), 1, "the crashed write left its pending row");
    let left_key = app.bucket_key(&left[0]);
    let before: BTreeSet<_> = app.bucket_versions().await.into_iter().collect();
    assert!(
        before.iter().any(|(k, _)| *k == left_key),
        "its object was put"
    );

    let pool = &app.core().pool;
    let proxy = app.db_proxy.as_ref().unwrap();
    // Every connection the coordinator holds now goes silent; each pass that takes one of
    // them is given up, and the pool makes new ones once those are gone.
    let silent = pool.size() as usize;
    assert!(silent > 0, "the coordinator holds connections");
    proxy.stall_open_connections();
    let settings = SweepSettings {
        time_limit: Duration::from_millis(500),
        ..sweep_now()
    };
    let first = sweep_once(app.core(), &settings)
        .await
        .expect_err("a pass on a silent connection has no answer");
    assert_eq!(tonic::Status::from(first).code(), tonic::Code::Unavailable);
    assert_eq!(
        pending_keys(&app).await,
        left,
        "a given-up pass removed nothing"
    );
    let mut passes = 1;
    let report = loop {
        passes += 1;
        match sweep_once(app.core(), &settings).await {
            Ok(report) => break report,
            Err(err) => {
                assert_eq!(tonic::Status::from(err).code(), tonic::Code::Unavailable);
                assert!(
                    passes <= silent + 1,
                    "{passes} passes given up with {silent} silent connections"
                );
            }
        }
    };
    assert_eq!(report.pending, 1, "{report:?}");
    assert!(pending_keys(&app).await.is_empty());
    // Checked on the test's own connection: the coordinator's pool may still hold a silent
    // one in a task of its own.
    let after: BTreeSet<_> = app.bucket_versions().await.into_iter().collect();
    let kept: BTreeSet<_> = before
        .iter()
        .filter(|(k, _)| *k != left_key)
        .cloned()
        .collect();
    assert_eq!(after, kept, "only the leftover object went");
    assert_eq!(app.generation_count(&state_id).await, 1);
}
