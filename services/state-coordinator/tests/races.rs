//! Concurrency: attempts of one run racing for admission, runs of one state racing for the
//! lock, a revoked attempt's write racing its successor, and many writers of one state.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_contract::RefusalReason;
use cairn_proto::state as pb;
use cairn_testkit::Fault;
use common::*;
use tokio::time::Instant;
use uuid::Uuid;

fn short_lease(secs: u64) -> Options {
    Options {
        lease: Duration::from_secs(secs),
        ..Options::default()
    }
}

/// Polls `check` until it returns true; fails the test naming `what` after `within`.
async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn count(app: &TestApp, sql: &'static str, id: &str) -> i64 {
    let pool = app.admin_pool().await;
    sqlx::query_scalar(sql)
        .bind(Uuid::parse_str(id).unwrap())
        .fetch_one(&pool)
        .await
        .unwrap()
}

async fn attempts_of(app: &TestApp, run_id: &str) -> i64 {
    count(
        app,
        "SELECT count(*) FROM attempts WHERE run_id = $1",
        run_id,
    )
    .await
}

async fn generations_of(app: &TestApp, state_id: &str) -> i64 {
    count(
        app,
        "SELECT count(*) FROM generations WHERE state_id = $1",
        state_id,
    )
    .await
}

/// Concurrent admissions after attempt n's lease expired: exactly one becomes attempt n+1.
async fn race_admissions(app: &TestApp, run_id: &str, racers: usize, expect: u32) -> Admitted {
    let results = futures::future::join_all((0..racers).map(|_| app.admit(run_id))).await;
    let mut winners = Vec::new();
    for r in results {
        match r {
            Ok(a) => winners.push(a),
            Err(s) => assert!(
                matches!(
                    s.code(),
                    tonic::Code::Aborted | tonic::Code::FailedPrecondition
                ),
                "a losing admission must be ABORTED or FAILED_PRECONDITION, got {s:?}"
            ),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one admission wins: {winners:?}");
    let winner = winners.pop().unwrap();
    assert_eq!(winner.attempt, expect);
    winner
}

#[tokio::test]
async fn concurrent_admissions_of_one_run_create_exactly_one_new_attempt() {
    let app = spawn_app_with(short_lease(2)).await;
    let state = app.create_state("race-admit").await;
    let run = app.register(&state, pb::RunKind::Apply, "dev").await;
    let first = app.admit(&run).await.unwrap();
    assert_eq!(first.attempt, 1);

    app.wait_lease_expired(&run, 1).await;
    let (a, b) = tokio::join!(app.admit(&run), app.admit(&run));
    let (winner, loser) = match (a, b) {
        (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
        (a, b) => panic!("exactly one admission must win: {a:?} / {b:?}"),
    };
    assert_eq!(winner.attempt, 2);
    assert!(
        matches!(
            loser.code(),
            tonic::Code::Aborted | tonic::Code::FailedPrecondition
        ),
        "{loser:?}"
    );
    assert_eq!(attempts_of(&app, &run).await, 2, "no attempt 3 exists");

    // The winner's token works, attempt 1's is refused.
    assert_eq!(app.lock(&winner, "lock-two").await.status, 200);
    assert_eq!(app.lock(&first, "lock-one").await.status, 401);

    // Again with more racers once attempt 2 expired: still exactly one new attempt.
    app.wait_lease_expired(&run, 2).await;
    let third = race_admissions(&app, &run, 6, 3).await;
    assert_eq!(attempts_of(&app, &run).await, 3, "no attempt 4 exists");
    // Attempt 2's lock went with its revocation.
    assert_eq!(app.lock(&third, "lock-three").await.status, 200);
}

#[tokio::test]
async fn two_runs_racing_for_the_lock_one_wins_the_other_goes_stale() {
    let app = spawn_app().await;
    let state = app.create_state("race-lock").await;
    let a = app.start_run(&state, pb::RunKind::Apply).await;
    let b = app.start_run(&state, pb::RunKind::Apply).await;
    assert_eq!((a.base_generation, b.base_generation), (0, 0));

    let (lock_a, lock_b) = ("lock-a", "lock-b");
    let (ra, rb) = tokio::join!(app.lock(&a, lock_a), app.lock(&b, lock_b));
    let ((winner, win_id), (loser, lose_id), refused) = match (ra.status, rb.status) {
        (200, 423) => ((&a, lock_a), (&b, lock_b), rb),
        (423, 200) => ((&b, lock_b), (&a, lock_a), ra),
        other => panic!(
            "one LOCK must win (200) and one must see 423, got {other:?}: {} / {}",
            ra.text(),
            rb.text()
        ),
    };
    let holder: serde_json::Value = serde_json::from_slice(&refused.body).unwrap();
    assert_eq!(holder["ID"], win_id, "423 carries the holder's LockInfo");
    assert_eq!(holder["Operation"], "OperationTypeApply");
    assert_eq!(holder["Who"], "test@host");

    // The winner writes and unlocks.
    assert_eq!(app.get(winner).await.status, 404);
    let doc = state_doc(1, "lineage-race", "winner");
    let posted = app.post(winner, win_id, &doc).await;
    assert_eq!(posted.status, 200, "{}", posted.text());
    assert_eq!(app.unlock(winner, win_id).await.status, 200);
    app.finish(winner, pb::RunOutcome::Succeeded).await;

    // The loser is stale now: 412, and nothing changes.
    let stale = app.lock(loser, lose_id).await;
    assert_eq!(stale.status, 412, "{}", stale.text());
    assert!(stale.text().contains("generation 1"), "{}", stale.text());
    let blind = app
        .post(loser, lose_id, &state_doc(1, "lineage-race", "loser"))
        .await;
    assert_ne!(blind.status, 200, "a write without the lock must fail");
    assert_eq!(app.state_info(&state).await.current_generation, 1);
    assert_eq!(generations_of(&app, &state).await, 1);
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM locks WHERE state_id = $1",
            &state
        )
        .await,
        0,
        "the refused LOCK took nothing"
    );
    let read = app.get(loser).await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body, doc, "the state is the winner's");
    let finished = app.finish(loser, pb::RunOutcome::Failed).await;
    assert_eq!(finished.final_generation, 1);
    assert_eq!(
        RefusalReason::from_code(&finished.refusal_reason),
        Some(RefusalReason::Stale),
        "the coordinator recorded why: {:?}",
        finished.refusal_reason
    );
}

#[tokio::test]
async fn a_revoked_attempts_post_is_refused_and_writes_nothing() {
    let app = spawn_app_with(short_lease(2)).await;
    let state = app.create_state("race-post").await;
    let run = app.register(&state, pb::RunKind::Apply, "dev").await;
    let first = app.admit(&run).await.unwrap();
    assert_eq!(app.lock(&first, "lock-one").await.status, 200);
    assert_eq!(app.get(&first).await.status, 404);

    app.wait_lease_expired(&run, 1).await;
    let doc = state_doc(1, "lineage-post", "from-attempt-one");
    // Attempt 1's POST races the admission of attempt 2; either order refuses the POST.
    let (post, second) = tokio::join!(app.post(&first, "lock-one", &doc), app.admit(&run));
    let second = second.unwrap();
    assert_eq!(second.attempt, 2);
    assert_eq!(post.status, 401, "{}", post.text());
    let again = app.post(&first, "lock-one", &doc).await;
    assert_eq!(again.status, 401, "{}", again.text());
    assert_eq!(app.unlock(&first, "lock-one").await.status, 401);

    assert_eq!(generations_of(&app, &state).await, 0);
    assert_eq!(app.state_info(&state).await.current_generation, 0);

    // Attempt 1's lock went with it: attempt 2 locks and writes generation 1.
    assert_eq!(app.lock(&second, "lock-two").await.status, 200);
    let doc2 = state_doc(1, "lineage-post", "from-attempt-two");
    assert_eq!(app.post(&second, "lock-two", &doc2).await.status, 200);
    let pool = app.admin_pool().await;
    let writer: i32 = sqlx::query_scalar(
        "SELECT attempt FROM generations WHERE state_id = $1 AND generation = 1",
    )
    .bind(Uuid::parse_str(&state).unwrap())
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(writer, 2);
}

#[tokio::test]
async fn a_post_in_flight_when_its_lease_ends_does_not_commit() {
    let app = spawn_app_with(short_lease(2)).await;
    let state = app.create_state("race-inflight").await;
    let run = app.register(&state, pb::RunKind::Apply, "dev").await;
    let first = app.admit(&run).await.unwrap();
    assert_eq!(app.lock(&first, "lock-one").await.status, 200);
    assert_eq!(app.get(&first).await.status, 404);

    // Hold attempt 1's object upload in S3 until its lease has ended and attempt 2 exists.
    app.s3_proxy.set(Fault::Delay(Duration::from_secs(600)));
    let doc = state_doc(1, "lineage-inflight", "from-attempt-one");
    let app = Arc::new(app);
    let post = {
        let (app, first, doc) = (app.clone(), first.clone(), doc.clone());
        tokio::spawn(async move { app.post(&first, "lock-one", &doc).await })
    };
    let pool = app.admin_pool().await;
    let state_uuid = Uuid::parse_str(&state).unwrap();
    eventually(
        "attempt 1's pending write row",
        Duration::from_secs(20),
        || async {
            let n: i64 =
                sqlx::query_scalar("SELECT count(*) FROM pending_objects WHERE state_id = $1")
                    .bind(state_uuid)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            n == 1
        },
    )
    .await;
    app.wait_lease_expired(&run, 1).await;
    let second = app.admit(&run).await.unwrap();
    assert_eq!(second.attempt, 2);
    app.s3_proxy.set(Fault::None);

    let post = post.await.unwrap();
    assert_eq!(post.status, 401, "{}", post.text());
    assert_eq!(generations_of(&app, &state).await, 0);
    assert_eq!(app.state_info(&state).await.current_generation, 0);

    assert_eq!(app.lock(&second, "lock-two").await.status, 200);
    let doc2 = state_doc(1, "lineage-inflight", "from-attempt-two");
    assert_eq!(app.post(&second, "lock-two", &doc2).await.status, 200);
    assert_eq!(app.get(&second).await.body, doc2);
}

const WRITERS: usize = 50;
const LINEAGE: &str = "lineage-many-writers";

/// One writer: admit, lock (waiting on 423, starting a fresh run on 412), read, write
/// read serial + 1, unlock, finish. Returns the run that wrote and the document it posted.
async fn writer(app: Arc<TestApp>, state: String, index: usize) -> (String, Vec<u8>) {
    let mut run = app.start_run(&state, pb::RunKind::Apply).await;
    let mut lock_id = Uuid::new_v4().to_string();
    loop {
        let r = app.lock(&run, &lock_id).await;
        match r.status {
            200 => break,
            423 => {
                let jitter = u64::from(Uuid::new_v4().as_bytes()[0] % 50);
                tokio::time::sleep(Duration::from_millis(20 + jitter)).await;
            }
            412 => {
                app.finish(&run, pb::RunOutcome::Failed).await;
                run = app.start_run(&state, pb::RunKind::Apply).await;
                lock_id = Uuid::new_v4().to_string();
            }
            other => panic!("writer {index}: LOCK answered {other}: {}", r.text()),
        }
    }
    let got = app.get(&run).await;
    let serial = match got.status {
        404 => {
            assert_eq!(run.base_generation, 0, "404 only before the first write");
            0
        }
        200 => {
            let v: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
            assert_eq!(v["lineage"], LINEAGE);
            v["serial"].as_u64().unwrap()
        }
        other => panic!("writer {index}: GET answered {other}: {}", got.text()),
    };
    let doc = state_doc(serial + 1, LINEAGE, &format!("writer-{index}"));
    let posted = app.post(&run, &lock_id, &doc).await;
    assert_eq!(
        posted.status,
        200,
        "writer {index}: POST: {}",
        posted.text()
    );
    let unlocked = app.unlock(&run, &lock_id).await;
    assert_eq!(unlocked.status, 200, "writer {index}: UNLOCK");
    app.finish(&run, pb::RunOutcome::Succeeded).await;
    (run.run_id, doc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_writers_produce_fifty_gapless_generations() {
    let app = Arc::new(spawn_app().await);
    let state = app.create_state("many-writers").await;

    let tasks: Vec<_> = (0..WRITERS)
        .map(|i| tokio::spawn(writer(app.clone(), state.clone(), i)))
        .collect();
    let all = tokio::time::timeout(Duration::from_secs(240), futures::future::join_all(tasks))
        .await
        .expect("50 writers did not all finish within 240 s");
    let mut posted: HashMap<String, Vec<u8>> = HashMap::new();
    for r in all {
        let (run, doc) = r.expect("writer task");
        assert!(posted.insert(run, doc).is_none(), "one run wrote twice");
    }
    assert_eq!(posted.len(), WRITERS);

    assert_eq!(app.state_info(&state).await.current_generation, 50);
    let pool = app.admin_pool().await;
    let rows: Vec<(i64, i64, Option<Uuid>, String, bool)> = sqlx::query_as(
        "SELECT generation, tofu_serial, run_id, plaintext_sha256, is_final
         FROM generations WHERE state_id = $1 ORDER BY generation",
    )
    .bind(Uuid::parse_str(&state).unwrap())
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), WRITERS);
    let mut last_serial = 0;
    let mut writers_seen = std::collections::HashSet::new();
    for (i, (generation, serial, run, sha, is_final)) in rows.iter().enumerate() {
        assert_eq!(*generation, i64::try_from(i).unwrap() + 1, "gapless");
        assert!(*serial > last_serial, "serials strictly increase");
        last_serial = *serial;
        let run = run.expect("written by a run").to_string();
        let doc = posted.get(&run).expect("written by one of the writers");
        assert_eq!(
            *sha,
            cairn_storage::sha256_hex(doc),
            "generation {generation} holds what its writer posted"
        );
        assert!(is_final, "each writer unlocked and finished");
        assert!(writers_seen.insert(run), "one generation per writer");
    }

    // Every object opens and matches its recorded plaintext hash.
    let inspected = app
        .recovery(&app.user_token(cairn_auth::Role::Admin))
        .inspect_state(pb::InspectStateRequest {
            state_id: state.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(inspected.generations.len(), WRITERS);
    for g in &inspected.generations {
        assert!(
            g.verified,
            "generation {}: {}",
            g.generation, g.verify_error
        );
    }

    // And the current state is the last writer's document.
    let reader = app.start_run(&state, pb::RunKind::Plan).await;
    let current = app.get(&reader).await;
    let last_run = rows.last().unwrap().2.unwrap().to_string();
    assert_eq!(current.body, posted[&last_run]);
}

#[tokio::test]
async fn concurrent_creations_and_registrations_settle_on_one_row() {
    let app = spawn_app().await;
    let create = || {
        let mut states = app.states(&app.service_token());
        let req = pb::CreateStateRequest {
            tenant_id: app.tenant.to_string(),
            instance_id: app.instance.to_string(),
            physical_name: "race-create".to_owned(),
        };
        async move { states.create_state(req).await.unwrap().into_inner() }
    };
    let created = futures::future::join_all((0..6).map(|_| create())).await;
    assert_eq!(
        created.iter().filter(|c| c.created).count(),
        1,
        "exactly one creation"
    );
    let state = created[0].state.as_ref().unwrap().state_id.clone();
    assert!(
        created
            .iter()
            .all(|c| c.state.as_ref().unwrap().state_id == state)
    );

    // The same registration sent concurrently: one creates, the others are no-ops.
    let req = app.registration(&state, pb::RunKind::Apply, "dev");
    let register = |r: pb::RegisterRunRequest| {
        let mut runs = app.runs(&app.service_token());
        async move { runs.register_run(r).await.map(|r| r.into_inner().created) }
    };
    let same = futures::future::join_all((0..6).map(|_| register(req.clone()))).await;
    let same: Vec<bool> = same.into_iter().map(Result::unwrap).collect();
    assert_eq!(same.iter().filter(|c| **c).count(), 1, "{same:?}");

    // One run id, different content, concurrently: one wins, the other is refused.
    let a = app.registration(&state, pb::RunKind::Apply, "dev");
    let mut b = a.clone();
    b.environment = "production".to_owned();
    let (ra, rb) = tokio::join!(register(a.clone()), register(b));
    let outcomes = [ra, rb];
    assert_eq!(
        outcomes.iter().filter(|r| matches!(r, Ok(true))).count(),
        1,
        "{outcomes:?}"
    );
    assert!(
        outcomes
            .iter()
            .any(|r| matches!(r, Err(s) if s.code() == tonic::Code::FailedPrecondition)),
        "{outcomes:?}"
    );
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM runs WHERE state_id = $1",
            &state
        )
        .await,
        2
    );
}

/// The outbox events of `event_type` about run `run_id`.
async fn outbox_events(app: &TestApp, event_type: &str, run_id: &str) -> usize {
    use prost::Message;
    let pool = app.admin_pool().await;
    let payloads: Vec<Vec<u8>> = sqlx::query_scalar("SELECT payload FROM outbox")
        .fetch_all(&pool)
        .await
        .unwrap();
    payloads
        .iter()
        .map(|p| cairn_proto::events::Event::decode(p.as_slice()).unwrap())
        .filter(|e| e.event_type == event_type)
        .filter(|e| {
            use cairn_proto::events::event::Payload;
            match &e.payload {
                Some(Payload::RunFinished(f)) => f.run_id == run_id,
                Some(Payload::RunAdmitted(a)) => a.run_id == run_id,
                Some(Payload::GenerationCommitted(g)) => g.run_id == run_id,
                _ => false,
            }
        })
        .count()
}

#[tokio::test]
async fn concurrent_finishes_agree_and_record_one_event() {
    let app = spawn_app().await;
    let state = app.create_state("race-finish").await;
    let a = app.start_run(&state, pb::RunKind::Apply).await;
    assert_eq!(app.lock(&a, "lock-f").await.status, 200);
    let doc = state_doc(1, "lineage-finish", "one");
    assert_eq!(app.post(&a, "lock-f", &doc).await.status, 200);

    let finish = || {
        let mut runs = app.runs(&app.service_token());
        let req = pb::FinishRunRequest {
            run_id: a.run_id.clone(),
            attempt: 1,
            outcome: pb::RunOutcome::Succeeded as i32,
            message: String::new(),
        };
        async move { runs.finish_run(req).await.unwrap().into_inner() }
    };
    let answers = futures::future::join_all((0..5).map(|_| finish())).await;
    assert!(
        answers.iter().all(|r| *r == answers[0]),
        "every finish gives the same answer: {answers:?}"
    );
    assert_eq!(answers[0].final_generation, 1);
    assert_eq!(outbox_events(&app, "run_finished", &a.run_id).await, 1);
    let pool = app.admin_pool().await;
    let is_final: bool = sqlx::query_scalar(
        "SELECT is_final FROM generations WHERE state_id = $1 AND generation = 1",
    )
    .bind(Uuid::parse_str(&state).unwrap())
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(is_final);
}

#[tokio::test]
async fn a_finish_racing_a_write_leaves_a_final_generation_or_none() {
    let app = spawn_app().await;
    for round in 0..5 {
        let state = app
            .create_state(&format!("race-finish-write-{round}"))
            .await;
        let a = app.start_run(&state, pb::RunKind::Apply).await;
        assert_eq!(app.lock(&a, "lock-w").await.status, 200);
        let doc = state_doc(1, "lineage-fw", &format!("round-{round}"));
        let (posted, finished) = tokio::join!(
            app.post(&a, "lock-w", &doc),
            app.finish(&a, pb::RunOutcome::Succeeded)
        );
        let pool = app.admin_pool().await;
        let rows: Vec<bool> =
            sqlx::query_scalar("SELECT is_final FROM generations WHERE state_id = $1")
                .bind(Uuid::parse_str(&state).unwrap())
                .fetch_all(&pool)
                .await
                .unwrap();
        let current = app.state_info(&state).await.current_generation;
        match posted.status {
            200 => {
                assert_eq!(rows, vec![true], "round {round}: the write became final");
                assert_eq!(current, 1);
            }
            401 => {
                assert!(
                    rows.is_empty(),
                    "round {round}: a refused write left {rows:?}"
                );
                assert_eq!(current, 0);
                assert_eq!(finished.final_generation, 0);
            }
            other => panic!("round {round}: POST answered {other}: {}", posted.text()),
        }
        assert_eq!(
            count(
                &app,
                "SELECT count(*) FROM locks WHERE state_id = $1",
                &state
            )
            .await,
            0,
            "round {round}: the finish freed the lock"
        );
    }
}

#[tokio::test]
async fn the_same_lock_sent_twice_at_once_is_held_once() {
    let app = spawn_app().await;
    let state = app.create_state("race-same-lock").await;
    let a = app.start_run(&state, pb::RunKind::Apply).await;
    let (r1, r2) = tokio::join!(app.lock(&a, "lock-same"), app.lock(&a, "lock-same"));
    assert_eq!(
        (r1.status, r2.status),
        (200, 200),
        "LOCK is idempotent per lock id"
    );
    let other = app.start_run(&state, pb::RunKind::Apply).await;
    let held = app.lock(&other, "lock-other").await;
    assert_eq!(held.status, 423);
    let holder: serde_json::Value = serde_json::from_slice(&held.body).unwrap();
    assert_eq!(holder["ID"], "lock-same");
}

#[tokio::test]
async fn concurrent_takes_of_one_saved_plan_lease_it_to_exactly_one_apply_on_s3() {
    concurrent_takes(Store::S3).await;
}

#[tokio::test]
async fn concurrent_takes_of_one_saved_plan_lease_it_to_exactly_one_apply_on_the_file_store() {
    concurrent_takes(Store::File).await;
}

async fn concurrent_takes(store: Store) {
    let app = spawn_app_with(on(store)).await;
    let state = app.create_state("race-take").await;
    let plan_req = app.registration(&state, pb::RunKind::Plan, "dev");
    let plan_run = plan_req.run_id.clone();
    let config_hash = plan_req.config_hash.clone();
    app.runs(&app.service_token())
        .register_run(plan_req)
        .await
        .unwrap();
    let p = app.admit(&plan_run).await.unwrap();
    app.runs(&app.service_token())
        .put_plan(pb::PutPlanRequest {
            run_id: plan_run.clone(),
            attempt: 1,
            plan: b"saved-plan".to_vec(),
            tags: Some(pb::PlanTags {
                config_hash,
                base_generation: 0,
                tofu_version: "1.12.6".to_owned(),
                provider_lock_hash: String::new(),
                module_library_hash: String::new(),
            }),
            provider_lock_file: Vec::new(),
            masked_plan_json: Vec::new(),
        })
        .await
        .unwrap();
    app.finish(&p, pb::RunOutcome::Succeeded).await;

    let mut applies = Vec::new();
    for _ in 0..5 {
        let mut req = app.registration(&state, pb::RunKind::Apply, "dev");
        req.plan_run_id = plan_run.clone();
        let run = req.run_id.clone();
        app.runs(&app.service_token())
            .register_run(req)
            .await
            .unwrap();
        applies.push(app.admit(&run).await.unwrap());
    }
    let take = |a: &Admitted| {
        let mut runs = app.runs(&app.service_token());
        let req = pb::TakePlanRequest {
            run_id: a.run_id.clone(),
            attempt: a.attempt,
        };
        async move { runs.take_plan(req).await.map(tonic::Response::into_inner) }
    };
    let results = futures::future::join_all(applies.iter().map(take)).await;
    let winners: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_ok())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for r in &results {
        if let Err(s) = r {
            assert_eq!(s.code(), tonic::Code::FailedPrecondition, "{s:?}");
        }
    }
    let winner = &applies[winners[0]];
    assert_eq!(results[winners[0]].as_ref().unwrap().plan, b"saved-plan");
    let pool = app.admin_pool().await;
    let leased_to: Option<Uuid> =
        sqlx::query_scalar("SELECT leased_to_attempt FROM plans WHERE run_id = $1")
            .bind(Uuid::parse_str(&plan_run).unwrap())
            .fetch_one(&pool)
            .await
            .unwrap();
    let winner_attempt: Uuid =
        sqlx::query_scalar("SELECT attempt_id FROM attempts WHERE run_id = $1 AND attempt = $2")
            .bind(Uuid::parse_str(&winner.run_id).unwrap())
            .bind(i32::try_from(winner.attempt).unwrap())
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(leased_to, Some(winner_attempt));
}

fn put_plan_req(run_id: &str, config_hash: &str) -> pb::PutPlanRequest {
    pb::PutPlanRequest {
        run_id: run_id.to_owned(),
        attempt: 1,
        plan: b"saved-plan".to_vec(),
        tags: Some(pb::PlanTags {
            config_hash: config_hash.to_owned(),
            base_generation: 0,
            tofu_version: "1.12.6".to_owned(),
            provider_lock_hash: String::new(),
            module_library_hash: String::new(),
        }),
        provider_lock_file: Vec::new(),
        masked_plan_json: br#"{"format_version":"1.2"}"#.to_vec(),
    }
}

/// PutPlan checks the attempt live in the statement that inserts the plan: an attempt that
/// finished after the first check (while its objects were being stored) stores nothing and
/// leaves no object behind.
#[tokio::test]
async fn a_put_plan_racing_its_attempts_finish_stores_nothing() {
    let app = spawn_app_with(on(Store::File)).await;
    let state = app.create_state("race-put-plan").await;
    let req = app.registration(&state, pb::RunKind::Plan, "dev");
    let (plan_run, config_hash) = (req.run_id.clone(), req.config_hash.clone());
    app.runs(&app.service_token())
        .register_run(req)
        .await
        .unwrap();
    let p = app.admit(&plan_run).await.unwrap();
    let point = cairn_state_coordinator::failpoints::PLAN_BEFORE_INSERT;
    let pause = app.core().failpoints.pause(point);
    let mut runs = app.runs(&app.service_token());
    let put = tokio::spawn({
        let req = put_plan_req(&plan_run, &config_hash);
        async move { runs.put_plan(req).await }
    });
    pause.reached().await;
    app.finish(&p, pb::RunOutcome::Failed).await;
    app.core().failpoints.unpause(point);
    pause.release();
    let err = put
        .await
        .unwrap()
        .expect_err("a finished attempt stores no plan");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM plans WHERE run_id = $1",
            &plan_run
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM masked_plans WHERE run_id = $1",
            &plan_run
        )
        .await,
        0
    );
    let left: Vec<_> = app
        .object_versions()
        .await
        .into_iter()
        .filter(|o| o.key.starts_with("plans/") || o.key.starts_with("masked-plans/"))
        .collect();
    assert!(left.is_empty(), "no plan object left behind: {left:?}");
}

/// TakePlan checks the attempt live in the statement that leases the plan: an apply
/// attempt that finished after the first check never gets the plan (nothing would ever
/// delete a plan leased to an already finished attempt).
#[tokio::test]
async fn a_take_plan_racing_its_attempts_finish_leases_nothing() {
    let app = spawn_app().await;
    let state = app.create_state("race-take-finish").await;
    let req = app.registration(&state, pb::RunKind::Plan, "dev");
    let (plan_run, config_hash) = (req.run_id.clone(), req.config_hash.clone());
    app.runs(&app.service_token())
        .register_run(req)
        .await
        .unwrap();
    let p = app.admit(&plan_run).await.unwrap();
    app.runs(&app.service_token())
        .put_plan(put_plan_req(&plan_run, &config_hash))
        .await
        .unwrap();
    app.finish(&p, pb::RunOutcome::Succeeded).await;
    let mut req = app.registration(&state, pb::RunKind::Apply, "dev");
    req.plan_run_id = plan_run.clone();
    let apply_run = req.run_id.clone();
    app.runs(&app.service_token())
        .register_run(req)
        .await
        .unwrap();
    let apply = app.admit(&apply_run).await.unwrap();

    let point = cairn_state_coordinator::failpoints::PLAN_BEFORE_LEASE;
    let pause = app.core().failpoints.pause(point);
    let mut runs = app.runs(&app.service_token());
    let take = tokio::spawn(async move {
        runs.take_plan(pb::TakePlanRequest {
            run_id: apply_run,
            attempt: 1,
        })
        .await
    });
    pause.reached().await;
    app.finish(&apply, pb::RunOutcome::Cancelled).await;
    app.core().failpoints.unpause(point);
    pause.release();
    let err = take
        .await
        .unwrap()
        .expect_err("a finished attempt takes no plan");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    let leased: Option<Uuid> =
        sqlx::query_scalar("SELECT leased_to_attempt FROM plans WHERE run_id = $1")
            .bind(Uuid::parse_str(&plan_run).unwrap())
            .fetch_one(&app.admin_pool().await)
            .await
            .unwrap();
    assert_eq!(leased, None, "the plan stays free for another apply");
}

/// An attempt's last seen generation only moves forward: a GET that read generation n and
/// records it after the attempt's own POST committed n+1 must not move the mark back (the
/// attempt's next POST would be refused as a write over a generation it never saw).
#[tokio::test]
async fn a_slow_read_recorded_after_the_attempts_own_write_does_not_cause_a_conflict() {
    let app = spawn_app().await;
    let state = app.create_state("race-seen").await;
    let a = app.start_run(&state, pb::RunKind::Apply).await;
    assert_eq!(app.lock(&a, "lock-s").await.status, 200);
    for serial in 1..=2 {
        let r = app
            .post(&a, "lock-s", &state_doc(serial, "lineage-seen", "v"))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // What the slow GET does last: record that it saw generation 1 (read before POST 2).
    let attempt_id: Uuid =
        sqlx::query_scalar("SELECT attempt_id FROM attempts WHERE run_id = $1 AND attempt = 1")
            .bind(Uuid::parse_str(&a.run_id).unwrap())
            .fetch_one(&app.admin_pool().await)
            .await
            .unwrap();
    let mut conn = app.core().pool.acquire().await.unwrap();
    cairn_state_coordinator::store::attempts::attempt_saw(&mut conn, attempt_id, 1)
        .await
        .unwrap();
    drop(conn);
    let r = app
        .post(&a, "lock-s", &state_doc(3, "lineage-seen", "v"))
        .await;
    assert_eq!(r.status, 200, "no spurious conflict: {}", r.text());
    assert_eq!(app.state_info(&state).await.current_generation, 3);
}
