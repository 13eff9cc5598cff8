//! `Runs.GetRun` (a run and its latest attempt's lease, by the database clock) and the
//! machine-readable `cairn-reason` metadata on refusals of `Runs.AdmitRun`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::Duration;

use cairn_auth::Role;
use cairn_contract::REASON_METADATA;
use cairn_proto::state as pb;
use common::*;
use tonic::Code;
use uuid::Uuid;

fn short_lease(secs: u64) -> Options {
    Options {
        lease: Duration::from_secs(secs),
        ..Options::default()
    }
}

async fn get_run(
    app: &TestApp,
    token: &str,
    run_id: &str,
) -> Result<pb::GetRunResponse, tonic::Status> {
    app.runs(token)
        .get_run(pb::GetRunRequest {
            run_id: run_id.to_owned(),
        })
        .await
        .map(tonic::Response::into_inner)
}

async fn run_info(app: &TestApp, run_id: &str) -> pb::GetRunResponse {
    get_run(app, &app.service_token(), run_id)
        .await
        .expect("get run")
}

fn refusal<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> tonic::Status {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(s) => s,
    }
}

/// The `cairn-reason` metadata of a status, if any.
fn reason(s: &tonic::Status) -> Option<String> {
    s.metadata()
        .get(REASON_METADATA)
        .map(|v| v.to_str().expect("ascii reason").to_owned())
}

#[tokio::test]
async fn get_run_follows_a_run_from_registration_to_finish() {
    let app = spawn_app().await;
    let state = app.create_state("get-run").await;
    let run = app.register(&state, pb::RunKind::Plan, "dev").await;

    let before = run_info(&app, &run).await;
    assert_eq!(before.run_id, run);
    assert_eq!(before.state_id, state);
    assert_eq!(before.kind, pb::RunKind::Plan as i32);
    assert_eq!(before.environment, "dev");
    assert_eq!(before.status, "registered");
    assert_eq!(before.attempt, 0, "never admitted");
    assert!(!before.finished);
    assert!(before.lease_expires_at.is_none());
    assert!(before.finished_at.is_none());
    assert!(!before.lease_live);
    assert!(!before.attempt_revoked && !before.attempt_finished);

    let admitted = app
        .runs(&app.service_token())
        .admit_run(pb::AdmitRunRequest {
            run_id: run.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let live = run_info(&app, &run).await;
    assert_eq!(live.status, "running");
    assert_eq!(live.attempt, 1);
    assert!(!live.finished);
    assert!(live.lease_live, "the fresh lease is live");
    assert_eq!(live.lease_expires_at, admitted.lease_expires_at);
    assert_eq!(live.base_generation, admitted.base_generation);
    assert_eq!(live.read_only, admitted.read_only);
    assert!(!live.attempt_revoked && !live.attempt_finished);

    // Admitting again while attempt 1 holds its lease: ABORTED, reason lease-held.
    let held = refusal(app.admit(&run).await);
    assert_eq!(held.code(), Code::Aborted);
    assert_eq!(reason(&held).as_deref(), Some("lease-held"));
    assert!(
        held.message().contains("still holds a live lease"),
        "{}",
        held.message()
    );

    let a = Admitted {
        run_id: run.clone(),
        attempt: 1,
        state_id: state.clone(),
        token: admitted.run_token.clone(),
        address: String::new(),
        lock_address: String::new(),
        base_generation: admitted.base_generation,
        read_only: admitted.read_only,
        interrupted: admitted.interrupted,
        plan_current: admitted.plan_current,
    };
    app.finish(&a, pb::RunOutcome::Succeeded).await;
    let done = run_info(&app, &run).await;
    assert!(done.finished);
    assert!(done.finished_at.is_some());
    assert_eq!(done.status, "succeeded");
    assert_eq!(done.attempt, 1);
    assert!(!done.lease_live, "a finished attempt's lease is not live");
    assert!(done.attempt_finished);
    assert_eq!(
        done.lease_expires_at, admitted.lease_expires_at,
        "the lease of the latest attempt is still reported"
    );

    // A finished run is never admitted again: FAILED_PRECONDITION, reason run-finished.
    let finished = refusal(app.admit(&run).await);
    assert_eq!(finished.code(), Code::FailedPrecondition);
    assert_eq!(reason(&finished).as_deref(), Some("run-finished"));
    assert!(
        finished.message().contains("has already finished"),
        "{}",
        finished.message()
    );
}

#[tokio::test]
async fn get_run_reports_an_expired_lease_as_not_live() {
    let app = spawn_app_with(short_lease(2)).await;
    let state = app.create_state("get-run-expiry").await;
    let run = app.register(&state, pb::RunKind::Apply, "dev").await;
    let first = app.admit(&run).await.unwrap();
    assert!(run_info(&app, &run).await.lease_live);

    app.wait_lease_expired(&run, first.attempt).await;
    let expired = run_info(&app, &run).await;
    assert_eq!(expired.attempt, 1);
    assert!(!expired.finished);
    assert!(
        !expired.lease_live,
        "the lease expired by the database clock"
    );
    assert!(!expired.attempt_revoked && !expired.attempt_finished);
    assert_eq!(expired.status, "running");

    // Attempt 2 takes over; GetRun reports the latest attempt.
    let second = app.admit(&run).await.unwrap();
    assert_eq!(second.attempt, 2);
    let again = run_info(&app, &run).await;
    assert_eq!(again.attempt, 2);
    assert!(again.lease_live);
    assert!(!again.attempt_revoked);
}

#[tokio::test]
async fn get_run_checks_its_argument_and_caller() {
    let app = spawn_app().await;
    let state = app.create_state("get-run-auth").await;
    let run = app.register(&state, pb::RunKind::Plan, "dev").await;
    let svc = app.service_token();

    let missing = refusal(get_run(&app, &svc, &Uuid::now_v7().to_string()).await);
    assert_eq!(missing.code(), Code::NotFound);
    assert_eq!(reason(&missing), None, "no machine-readable reason");
    let bad = refusal(get_run(&app, &svc, "not-a-uuid").await);
    assert_eq!(bad.code(), Code::InvalidArgument);
    let empty = refusal(get_run(&app, &svc, "").await);
    assert_eq!(empty.code(), Code::InvalidArgument);

    // Service-only, like AdmitRun: every user role of the owning tenant is refused.
    for role in [
        Role::Viewer,
        Role::Operator,
        Role::Approver,
        Role::Admin,
        Role::Owner,
    ] {
        let s = refusal(get_run(&app, &app.user_token(role), &run).await);
        assert_eq!(s.code(), Code::PermissionDenied, "GetRun as {role:?}");
    }
    // Another tenant's user learns nothing: the same answer for its run and a missing one.
    let other = app.keys.user_token(Uuid::new_v4(), Role::Owner);
    let theirs = refusal(get_run(&app, &other, &run).await);
    let nothing = refusal(get_run(&app, &other, &Uuid::now_v7().to_string()).await);
    assert_eq!(theirs.code(), Code::PermissionDenied);
    assert_eq!(nothing.code(), theirs.code());
    // Unauthenticated callers are refused before anything is looked up.
    let anon = refusal(get_run(&app, "not-a-token", &run).await);
    assert_eq!(anon.code(), Code::Unauthenticated);
}

#[tokio::test]
async fn admitting_on_a_fenced_state_says_fenced() {
    let app = spawn_app().await;
    let state = app.create_state("get-run-fenced").await;
    let run = app.register(&state, pb::RunKind::Plan, "dev").await;
    {
        let mut conn = app.core().pool.acquire().await.unwrap();
        let fenced = cairn_state_coordinator::store::states::state_fence(
            &mut conn,
            state.parse().unwrap(),
            0,
            "damage planted by the test",
        )
        .await
        .unwrap();
        assert!(fenced);
    }
    let s = refusal(app.admit(&run).await);
    assert_eq!(s.code(), Code::FailedPrecondition);
    assert_eq!(reason(&s).as_deref(), Some("fenced"));
    assert!(s.message().contains("requires recovery"), "{}", s.message());
    let info = run_info(&app, &run).await;
    assert_eq!(info.attempt, 0, "nothing was admitted");
    assert!(!info.lease_live);
}

#[tokio::test]
async fn admitting_a_state_changing_run_after_a_restore_says_after_restore() {
    let app = spawn_app_with(Options {
        after_restore: true,
        ..Options::default()
    })
    .await;
    let state = app.create_state("get-run-restore").await;
    let apply = app.register(&state, pb::RunKind::Apply, "dev").await;
    let s = refusal(app.admit(&apply).await);
    assert_eq!(s.code(), Code::FailedPrecondition);
    assert_eq!(reason(&s).as_deref(), Some("after-restore"));
    assert!(s.message().contains("after-restore"), "{}", s.message());

    // A plan is still admitted, and a successful answer carries no reason.
    let plan = app.register(&state, pb::RunKind::Plan, "dev").await;
    let ok = app
        .runs(&app.service_token())
        .admit_run(pb::AdmitRunRequest { run_id: plan })
        .await
        .unwrap();
    assert!(ok.metadata().get(REASON_METADATA).is_none());
}
