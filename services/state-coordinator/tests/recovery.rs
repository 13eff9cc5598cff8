//! Recovery of fenced states by a tenant admin (clear in place after a restore, or roll back
//! to an earlier verified generation), forced unlocks over gRPC, VerifyAll, and the
//! after-restore mode that blocks state-changing runs until a VerifyAll passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use cairn_auth::Role;
use cairn_proto::events::event::Payload;
use cairn_proto::state as pb;
use common::*;
use uuid::Uuid;

const LINEAGE: &str = "lineage-recovery";
const REASON: &str = "restored from the nightly backup (ticket OPS-42)";

async fn set_object_version(app: &TestApp, state_id: &str, generation: i64, version: &str) {
    let done = sqlx::query(
        "UPDATE generations SET object_version = $3 WHERE state_id = $1 AND generation = $2",
    )
    .bind(state_id.parse::<Uuid>().unwrap())
    .bind(generation)
    .bind(version)
    .execute(&app.admin_pool().await)
    .await
    .unwrap();
    assert_eq!(done.rows_affected(), 1);
}

/// A read-only run hits the damage and the state is fenced.
async fn detect(app: &TestApp, state_id: &str) {
    let reader = app.start_run(state_id, pb::RunKind::Plan).await;
    let got = app.get(&reader).await;
    assert_eq!(got.status, 422, "{}", got.text());
    let info = app.state_info(state_id).await;
    assert_eq!(info.status, pb::StateStatus::RecoveryRequired as i32);
}

fn recover_req(state_id: &str, to: u64, reason: &str) -> pb::RecoverRequest {
    pb::RecoverRequest {
        state_id: state_id.to_owned(),
        rollback_to_generation: to,
        reason: reason.to_owned(),
    }
}

async fn recover(
    app: &TestApp,
    token: &str,
    req: pb::RecoverRequest,
) -> Result<pb::RecoverResponse, tonic::Status> {
    app.recovery(token)
        .recover(req)
        .await
        .map(tonic::Response::into_inner)
}

async fn inspect(app: &TestApp, state_id: &str) -> pb::InspectStateResponse {
    app.recovery(&app.user_token(Role::Admin))
        .inspect_state(pb::InspectStateRequest {
            state_id: state_id.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
}

async fn read_back(app: &TestApp, state_id: &str) -> Vec<u8> {
    let reader = app.start_run(state_id, pb::RunKind::Plan).await;
    let got = app.get(&reader).await;
    assert_eq!(got.status, 200, "{}", got.text());
    got.body
}

async fn verify_all(app: &TestApp) -> Vec<pb::VerifyReportItem> {
    let mut stream = app
        .recovery(&app.platform_admin_token())
        .verify_all(pb::VerifyAllRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut items = Vec::new();
    while let Some(item) = stream.message().await.unwrap() {
        items.push(item);
    }
    assert!(!items.is_empty(), "VerifyAll ends with a summary");
    items
}

/// The last item: no state, no object, `ok` for the whole pass.
fn summary(items: &[pb::VerifyReportItem]) -> &pb::VerifyReportItem {
    let last = items.last().unwrap();
    assert!(
        last.state_id.is_empty() && last.unknown_object_key.is_empty(),
        "{last:?}"
    );
    last
}

async fn admit_kind(
    app: &TestApp,
    state_id: &str,
    kind: pb::RunKind,
) -> Result<Admitted, tonic::Status> {
    let run = app.register(state_id, kind, "dev").await;
    app.admit(&run).await
}

#[tokio::test]
async fn the_fence_is_cleared_in_place_once_the_object_is_restored() {
    let app = spawn_app().await;
    let state_id = app.create_state("restored-db").await;
    let doc1 = state_doc(1, LINEAGE, "v1");
    app.apply_doc(&state_id, &doc1).await;
    let original = app.generation_row(&state_id, 1).await.object_version;
    // The object "goes missing": the row names a version the bucket does not have.
    set_object_version(&app, &state_id, 1, &Uuid::new_v4().to_string()).await;
    detect(&app, &state_id).await;

    let fenced = app
        .recovery(&app.user_token(Role::Admin))
        .list_fenced(pb::ListFencedRequest {
            tenant_id: app.tenant.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(fenced.states.len(), 1);
    assert_eq!(fenced.states[0].state_id, state_id);

    // Only a human admin of the tenant recovers, with a reason.
    let admin = app.user_token(Role::Admin);
    for (token, code) in [
        (app.service_token(), tonic::Code::PermissionDenied),
        (
            app.user_token(Role::Operator),
            tonic::Code::PermissionDenied,
        ),
        (
            app.keys.user_token(Uuid::new_v4(), Role::Admin),
            tonic::Code::NotFound,
        ),
    ] {
        let err = recover(&app, &token, recover_req(&state_id, 0, REASON))
            .await
            .expect_err("refused");
        assert_eq!(err.code(), code, "{err:?}");
    }
    let err = recover(&app, &admin, recover_req(&state_id, 0, " "))
        .await
        .expect_err("no reason");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");

    // Still damaged: clearing in place is refused and names the generation.
    let err = recover(&app, &admin, recover_req(&state_id, 0, REASON))
        .await
        .expect_err("still damaged");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("generation 1"), "{}", err.message());
    assert_eq!(
        app.state_info(&state_id).await.status,
        pb::StateStatus::RecoveryRequired as i32
    );

    // The object is back (restored from backup): the fence clears, no new generation.
    set_object_version(&app, &state_id, 1, &original).await;
    assert!(inspect(&app, &state_id).await.generations[0].verified);
    let done = recover(&app, &admin, recover_req(&state_id, 0, REASON))
        .await
        .unwrap();
    assert!(!done.already_recovered);
    assert_eq!(done.new_generation, 0);
    let state = done.state.unwrap();
    assert_eq!(state.status, pb::StateStatus::Healthy as i32);
    assert_eq!(state.current_generation, 1);
    assert!(state.fence_reason.is_empty());
    assert_eq!(app.generation_count(&state_id).await, 1);

    let again = recover(&app, &admin, recover_req(&state_id, 0, REASON))
        .await
        .unwrap();
    assert!(again.already_recovered);
    assert_eq!(again.new_generation, 0);

    let event = app.wait_for_event("recovered", &state_id, |_| true).await;
    match event.payload {
        Some(Payload::Recovered(r)) => {
            assert_eq!(r.new_generation, 0);
            assert_eq!(r.recovered_from, 1);
            assert_eq!(r.reason, REASON);
        }
        other => panic!("unexpected payload {other:?}"),
    }
    assert_eq!(
        app.outbox_events()
            .await
            .iter()
            .filter(|e| e.event_type == "recovered")
            .count(),
        1,
        "the repeat did nothing"
    );

    // Back in service: reads and writes work.
    assert_eq!(read_back(&app, &state_id).await, doc1);
    app.apply_doc(&state_id, &state_doc(2, LINEAGE, "v2")).await;
    assert_eq!(app.state_info(&state_id).await.current_generation, 2);
}

#[tokio::test]
async fn a_rollback_writes_a_new_generation_with_the_earlier_content() {
    let app = spawn_app().await;
    let state_id = app.create_state("rollback-db").await;
    let docs: Vec<Vec<u8>> = (1..=3)
        .map(|n| state_doc(n, LINEAGE, &format!("v{n}")))
        .collect();
    for doc in &docs {
        app.apply_doc(&state_id, doc).await;
    }
    let g3 = app.generation_row(&state_id, 3).await;
    app.bucket_delete(&g3.object_key, &g3.object_version).await;
    detect(&app, &state_id).await;

    let inspected = inspect(&app, &state_id).await;
    let verified: Vec<(u64, bool)> = inspected
        .generations
        .iter()
        .map(|g| (g.generation, g.verified))
        .collect();
    assert_eq!(verified, vec![(1, true), (2, true), (3, false)]);
    assert!(
        inspected.generations[2]
            .verify_error
            .contains("does not exist"),
        "{:?}",
        inspected.generations[2]
    );
    let err = app
        .recovery(&app.user_token(Role::Operator))
        .inspect_state(pb::InspectStateRequest {
            state_id: state_id.clone(),
        })
        .await
        .expect_err("operators do not inspect");
    assert_eq!(err.code(), tonic::Code::PermissionDenied);

    let admin = app.user_token(Role::Admin);
    for (to, code) in [
        (3, tonic::Code::InvalidArgument),
        (9, tonic::Code::InvalidArgument),
        (0, tonic::Code::FailedPrecondition),
    ] {
        let err = recover(&app, &admin, recover_req(&state_id, to, REASON))
            .await
            .expect_err("refused rollback target");
        assert_eq!(err.code(), code, "rollback to {to}: {err:?}");
    }
    // A target that does not verify itself is refused, naming it.
    let g1_version = app.generation_row(&state_id, 1).await.object_version;
    set_object_version(&app, &state_id, 1, &Uuid::new_v4().to_string()).await;
    let err = recover(&app, &admin, recover_req(&state_id, 1, REASON))
        .await
        .expect_err("unverifiable target");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("generation 1"), "{}", err.message());
    set_object_version(&app, &state_id, 1, &g1_version).await;
    assert_eq!(app.generation_count(&state_id).await, 3);

    let done = recover(&app, &admin, recover_req(&state_id, 2, REASON))
        .await
        .unwrap();
    assert!(!done.already_recovered);
    assert_eq!(done.new_generation, 4);
    let state = done.state.unwrap();
    assert_eq!(state.status, pb::StateStatus::Healthy as i32);
    assert_eq!(state.current_generation, 4);

    let g4 = inspect(&app, &state_id)
        .await
        .generations
        .into_iter()
        .find(|g| g.generation == 4)
        .unwrap();
    assert_eq!(g4.recovered_from, 2);
    assert!(g4.verified && g4.r#final, "{g4:?}");
    assert_eq!(g4.tofu_serial, 2);
    // A new object, never a relabel of generation 2's.
    assert_ne!(
        app.generation_row(&state_id, 4).await.object_key,
        app.generation_row(&state_id, 2).await.object_key
    );
    assert_eq!(read_back(&app, &state_id).await, docs[1]);

    let again = recover(&app, &admin, recover_req(&state_id, 2, REASON))
        .await
        .unwrap();
    assert!(again.already_recovered);
    assert_eq!(again.new_generation, 0);
    assert_eq!(app.generation_count(&state_id).await, 4);

    let event = app.wait_for_event("recovered", &state_id, |_| true).await;
    assert_eq!(event.actor, cairn_testkit::tokens::TEST_USER);
    match event.payload {
        Some(Payload::Recovered(r)) => {
            assert_eq!((r.new_generation, r.recovered_from), (4, 2));
            assert_eq!(r.reason, REASON);
        }
        other => panic!("unexpected payload {other:?}"),
    }

    // tofu carries on from the rolled-back content.
    app.apply_doc(&state_id, &state_doc(3, LINEAGE, "after"))
        .await;
    assert_eq!(app.state_info(&state_id).await.current_generation, 5);
}

#[tokio::test]
async fn an_admin_forces_a_held_lock_open_over_grpc_only() {
    let app = spawn_app().await;
    let state_id = app.create_state("locked-db").await;
    app.apply_doc(&state_id, &state_doc(1, LINEAGE, "v1")).await;
    let stuck = app.start_run(&state_id, pb::RunKind::Apply).await;
    let stuck_lock = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&stuck, &stuck_lock).await.status, 200);
    let next = app.start_run(&state_id, pb::RunKind::Apply).await;
    let next_lock = Uuid::new_v4().to_string();
    let held = app.lock(&next, &next_lock).await;
    assert_eq!(held.status, 423, "{}", held.text());
    assert!(held.text().contains(&stuck_lock));
    // The HTTP backend never force-unlocks: UNLOCK with the holder's id from another
    // attempt is refused.
    assert_eq!(app.unlock(&next, &stuck_lock).await.status, 423);

    let force = |reason: &str| pb::ForceUnlockRequest {
        state_id: state_id.clone(),
        lock_id: stuck_lock.clone(),
        reason: reason.to_owned(),
    };
    let err = app
        .recovery(&app.user_token(Role::Operator))
        .force_unlock(force(REASON))
        .await
        .expect_err("operator");
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
    let err = app
        .recovery(&app.service_token())
        .force_unlock(force(REASON))
        .await
        .expect_err("service");
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
    let err = app
        .recovery(&app.user_token(Role::Admin))
        .force_unlock(force(""))
        .await
        .expect_err("no reason");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert_eq!(app.lock(&next, &next_lock).await.status, 423);

    let reason = "runner host died mid-apply";
    let released = app
        .recovery(&app.user_token(Role::Admin))
        .force_unlock(force(reason))
        .await
        .unwrap()
        .into_inner();
    assert!(released.released);
    let again = app
        .recovery(&app.user_token(Role::Admin))
        .force_unlock(force(reason))
        .await
        .unwrap()
        .into_inner();
    assert!(!again.released, "nothing left to release");

    assert_eq!(app.lock(&next, &next_lock).await.status, 200);
    // The old holder lost its lock: its write is refused.
    let stale_write = app
        .post(&stuck, &stuck_lock, &state_doc(2, LINEAGE, "v2"))
        .await;
    assert_eq!(stale_write.status, 409, "{}", stale_write.text());

    let event = app.wait_for_event("lock_forced", &state_id, |_| true).await;
    match event.payload {
        Some(Payload::LockForced(f)) => {
            assert_eq!(f.lock_id, stuck_lock);
            assert_eq!(f.reason, reason);
        }
        other => panic!("unexpected payload {other:?}"),
    }
    assert_eq!(
        app.outbox_events()
            .await
            .iter()
            .filter(|e| e.event_type == "lock_forced")
            .count(),
        1
    );
}

#[tokio::test]
async fn verify_all_checks_every_generation_and_reports_unknown_objects() {
    let app = spawn_app().await;
    let a = app.create_state("verify-a").await;
    let b = app.create_state("verify-b").await;
    for n in 1..=2 {
        app.apply_doc(&a, &state_doc(n, LINEAGE, "a")).await;
    }
    app.apply_doc(&b, &state_doc(1, "lineage-b", "b")).await;

    let err = app
        .recovery(&app.user_token(Role::Admin))
        .verify_all(pb::VerifyAllRequest {})
        .await
        .expect_err("a tenant admin is not a platform admin");
    assert_eq!(err.code(), tonic::Code::PermissionDenied);

    let items = verify_all(&app).await;
    let checked: Vec<(String, u64, bool)> = items
        .iter()
        .filter(|i| !i.state_id.is_empty())
        .map(|i| (i.state_id.clone(), i.generation, i.ok))
        .collect();
    let mut want = vec![
        (a.clone(), 1, true),
        (a.clone(), 2, true),
        (b.clone(), 1, true),
    ];
    want.sort();
    let mut got = checked.clone();
    got.sort();
    assert_eq!(got, want);
    assert!(summary(&items).ok, "{items:?}");

    // An object the database does not know (e.g. newer than a restored database).
    let stray = "cairn/stray.tfstate/g000000000009-deadbeef";
    let stray_version = app.bucket_put(stray, b"not ours".to_vec()).await;
    // A second version under a known key (an overwrite) is not the database's either.
    let ga = app.generation_row(&a, 1).await;
    let overwrite = app
        .bucket_put(&ga.object_key, b"overwritten".to_vec())
        .await;
    // And proof of damage on b's current generation.
    let gb = app.generation_row(&b, 1).await;
    app.bucket_delete(&gb.object_key, &gb.object_version).await;

    let items = verify_all(&app).await;
    let unknown: Vec<_> = items
        .iter()
        .filter(|i| !i.unknown_object_key.is_empty())
        .collect();
    let mut unknown_keys: Vec<&str> = unknown
        .iter()
        .map(|i| i.unknown_object_key.as_str())
        .collect();
    unknown_keys.sort_unstable();
    let mut want_unknown = vec![stray, ga.object_key.as_str()];
    want_unknown.sort_unstable();
    assert_eq!(unknown_keys, want_unknown, "{items:?}");
    assert!(unknown.iter().all(|i| !i.ok));
    assert!(
        unknown
            .iter()
            .any(|i| i.problem.contains(&overwrite) && i.problem.contains(&ga.object_key)),
        "{unknown:?}"
    );
    // The overwrite did not touch what generation 1 of a points at.
    assert!(
        items
            .iter()
            .any(|i| i.state_id == a && i.generation == 1 && i.ok)
    );
    let damaged = items
        .iter()
        .find(|i| i.state_id == b && i.generation == 1)
        .unwrap();
    assert!(
        !damaged.ok && damaged.problem.contains("does not exist"),
        "{damaged:?}"
    );
    assert!(!summary(&items).ok);
    // VerifyAll fences what it proves damaged, and only that.
    assert_eq!(
        app.state_info(&b).await.status,
        pb::StateStatus::RecoveryRequired as i32
    );
    assert_eq!(
        app.state_info(&a).await.status,
        pb::StateStatus::Healthy as i32
    );
    app.wait_for_event("recovery_required", &b, |_| true).await;
    // The stray object is reported, never deleted.
    assert!(app.bucket_get(stray, &stray_version).await.is_some());
}

async fn assert_apply_blocked(app: &TestApp, state_id: &str) {
    for kind in [pb::RunKind::Apply, pb::RunKind::Destroy] {
        let err = admit_kind(app, state_id, kind)
            .await
            .expect_err("state-changing run during after-restore mode");
        assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
        assert!(err.message().contains("after-restore"), "{}", err.message());
    }
    for kind in [pb::RunKind::Plan, pb::RunKind::Preview, pb::RunKind::Drift] {
        admit_kind(app, state_id, kind)
            .await
            .unwrap_or_else(|e| panic!("{kind:?} must stay possible: {e:?}"));
    }
}

#[tokio::test]
async fn after_a_restore_applies_wait_for_a_clean_verify_all() {
    let app = spawn_app_with(Options {
        after_restore: true,
        ..Options::default()
    })
    .await;
    let state_id = app.create_state("restore-drill").await;
    assert_apply_blocked(&app, &state_id).await;
    let waiting = app.register(&state_id, pb::RunKind::Apply, "dev").await;
    assert!(app.admit(&waiting).await.is_err());

    // An object the restored database does not know keeps the mode on.
    let stray = "cairn/newer-than-backup.tfstate/g000000000001-0";
    let version = app
        .bucket_put(stray, b"written after the backup".to_vec())
        .await;
    let items = verify_all(&app).await;
    assert!(!summary(&items).ok);
    assert!(items.iter().any(|i| i.unknown_object_key == stray));
    assert_apply_blocked(&app, &state_id).await;

    // Dealt with (the operator removed it): a clean pass ends the mode.
    app.bucket_delete(stray, &version).await;
    let items = verify_all(&app).await;
    assert!(summary(&items).ok, "{items:?}");
    let admitted = app
        .admit(&waiting)
        .await
        .expect("apply after a clean VerifyAll");
    assert!(!admitted.read_only);
    app.apply_doc(&state_id, &state_doc(1, LINEAGE, "v1")).await;
}

#[tokio::test]
async fn a_platform_admin_switches_after_restore_mode_on() {
    let app = spawn_app().await;
    let state_id = app.create_state("drill-db").await;
    app.apply_doc(&state_id, &state_doc(1, LINEAGE, "v1")).await;
    let set = |enabled| pb::SetAfterRestoreRequest {
        enabled,
        reason: "database restored to 02:00".to_owned(),
    };
    let err = app
        .recovery(&app.user_token(Role::Admin))
        .set_after_restore(set(true))
        .await
        .expect_err("tenant admin");
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    admit_kind(&app, &state_id, pb::RunKind::Apply)
        .await
        .expect("not in after-restore mode yet");

    let on = app
        .recovery(&app.platform_admin_token())
        .set_after_restore(set(true))
        .await
        .unwrap()
        .into_inner();
    assert!(on.enabled);
    assert_apply_blocked(&app, &state_id).await;

    let items = verify_all(&app).await;
    assert!(summary(&items).ok, "{items:?}");
    assert!(items.iter().any(|i| i.state_id == state_id && i.ok));
    admit_kind(&app, &state_id, pb::RunKind::Apply)
        .await
        .expect("apply after a clean VerifyAll");
}

/// Locks held in `state_id`, and whether every unfinished attempt of it is revoked by a
/// recovery.
async fn locks_and_live_attempts(app: &TestApp, state_id: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM locks WHERE state_id = $1),
                (SELECT count(*) FROM attempts WHERE state_id = $1
                   AND revoked_at IS NULL AND finished_at IS NULL)",
    )
    .bind(state_id.parse::<Uuid>().unwrap())
    .fetch_one(&app.admin_pool().await)
    .await
    .unwrap()
}

/// An attempt that held the lock before a fence was checked at LOCK against a state that
/// a recovery replaced: after the recovery (in place, or by a rollback) it can neither write
/// nor read, its lock is gone, and it may still finish its run, recorded as incomplete.
#[tokio::test]
async fn a_recovery_revokes_the_writers_that_held_the_lock_before_the_fence() {
    for rollback in [false, true] {
        let app = spawn_app().await;
        let state_id = app.create_state(&format!("fenced-writer-{rollback}")).await;
        app.apply_doc(&state_id, &state_doc(1, LINEAGE, "v1")).await;
        app.apply_doc(&state_id, &state_doc(2, LINEAGE, "v2")).await;
        let writer = app.start_run(&state_id, pb::RunKind::Apply).await;
        let reader = app.start_run(&state_id, pb::RunKind::Plan).await;
        assert_eq!(app.lock(&writer, "lock-w").await.status, 200);
        assert_eq!(app.get(&writer).await.status, 200);

        // The state is fenced while the writer holds its lock; its writes are refused.
        let row = app.state_row(&state_id).await;
        app.core()
            .fence(&row, row.current_generation, "damage found by the test")
            .await
            .unwrap();
        let r = app
            .post(&writer, "lock-w", &state_doc(3, LINEAGE, "v3"))
            .await;
        assert_eq!(r.status, 422, "{}", r.text());

        let (to, generation) = if rollback { (1, 3) } else { (0, 2) };
        recover(
            &app,
            &app.user_token(Role::Admin),
            recover_req(&state_id, to, REASON),
        )
        .await
        .unwrap();
        assert_eq!(
            app.state_info(&state_id).await.current_generation,
            generation
        );
        assert_eq!(
            locks_and_live_attempts(&app, &state_id).await,
            (0, 0),
            "rollback {rollback}: no lock and no live attempt survive the recovery"
        );

        // The old writer is out: its write, read and lock are refused as a dead token's.
        let r = app
            .post(&writer, "lock-w", &state_doc(3, LINEAGE, "v3"))
            .await;
        assert_eq!(r.status, 401, "rollback {rollback}: POST {}", r.text());
        assert!(r.text().contains("revoked by a recovery"), "{}", r.text());
        assert_eq!(app.get(&writer).await.status, 401);
        assert_eq!(app.get(&reader).await.status, 401, "read-only attempts too");
        assert_eq!(app.lock(&writer, "lock-w").await.status, 401);
        assert_eq!(
            app.state_info(&state_id).await.current_generation,
            generation,
            "nothing was written"
        );

        // Its run can still be finished (it is the latest attempt), recorded as incomplete.
        app.finish(&writer, pb::RunOutcome::Failed).await;
        let incomplete: Option<String> = sqlx::query_scalar(
            "SELECT incomplete_reason FROM attempts WHERE run_id = $1 AND attempt = 1",
        )
        .bind(writer.run_id.parse::<Uuid>().unwrap())
        .fetch_one(&app.admin_pool().await)
        .await
        .unwrap();
        assert!(
            incomplete
                .as_deref()
                .is_some_and(|m| m.contains("state may be incomplete")),
            "{incomplete:?}"
        );

        // A new run works on the recovered state.
        app.apply_doc(&state_id, &state_doc(4, LINEAGE, "v4")).await;
    }
}

/// A VerifyAll pass ends after-restore mode by compare-and-set: a pass that began before an
/// admin switched the mode on (a newer restore it did not see) leaves the mode on.
#[tokio::test]
async fn a_verify_all_that_began_before_the_switch_does_not_end_after_restore_mode() {
    let app = spawn_app().await;
    let state_id = app.create_state("verify-race").await;
    app.apply_doc(&state_id, &state_doc(1, LINEAGE, "v1")).await;

    let pause = app
        .core()
        .failpoints
        .pause(cairn_state_coordinator::failpoints::VERIFY_BEFORE_END);
    let mut client = app.recovery(&app.platform_admin_token());
    let pass = tokio::spawn(async move {
        let mut stream = client
            .verify_all(pb::VerifyAllRequest {})
            .await
            .unwrap()
            .into_inner();
        let mut items = Vec::new();
        while let Some(item) = stream.message().await.unwrap() {
            items.push(item);
        }
        items
    });
    pause.reached().await;
    // The pass checked everything; now the admin restores again and switches the mode on.
    app.recovery(&app.platform_admin_token())
        .set_after_restore(pb::SetAfterRestoreRequest {
            enabled: true,
            reason: "restored again to 03:00".to_owned(),
        })
        .await
        .unwrap();
    app.core()
        .failpoints
        .unpause(cairn_state_coordinator::failpoints::VERIFY_BEFORE_END);
    pause.release();
    let items = pass.await.unwrap();
    assert!(summary(&items).ok, "{items:?}");
    assert_apply_blocked(&app, &state_id).await;

    // A pass that began after the switch ends it.
    let items = verify_all(&app).await;
    assert!(summary(&items).ok, "{items:?}");
    admit_kind(&app, &state_id, pb::RunKind::Apply)
        .await
        .expect("apply after a VerifyAll that saw the restore");
}
