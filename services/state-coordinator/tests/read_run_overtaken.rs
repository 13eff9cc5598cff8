//! `GetRunResponse.state_changed_since_registered`: for a read-only run (a drift scan, a
//! preview), whether a state-changing run of its state was registered or admitted, was live
//! or finished, or a generation was committed since the read-only run was registered. The
//! drift service discards a scan's result on it, whatever its events say.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use cairn_proto::state as pb;
use common::*;
use uuid::Uuid;

async fn changed(app: &TestApp, run_id: &str) -> bool {
    app.runs(&app.service_token())
        .get_run(pb::GetRunRequest {
            run_id: run_id.to_owned(),
        })
        .await
        .expect("get run")
        .into_inner()
        .state_changed_since_registered
}

#[tokio::test]
async fn a_write_run_registered_after_a_drift_run_is_reported() {
    let app = spawn_app().await;
    let state = app.create_state("overtaken").await;
    let other = app.create_state("elsewhere").await;
    // A deployment that ended before the scan was registered does not count.
    app.apply_doc(&state, &state_doc(1, &Uuid::new_v4().to_string(), "a"))
        .await;
    let scan = app.register(&state, pb::RunKind::Drift, "dev").await;
    assert!(!changed(&app, &scan).await, "nothing happened since");

    // Other states, and read-only runs of this one, do not count.
    app.register(&other, pb::RunKind::Apply, "dev").await;
    app.register(&state, pb::RunKind::Preview, "dev").await;
    app.register(&state, pb::RunKind::Drift, "dev").await;
    assert!(!changed(&app, &scan).await);

    // A deployment's plan of this state, registered only (never admitted), counts.
    let plan = app.register(&state, pb::RunKind::Plan, "dev").await;
    assert!(changed(&app, &scan).await);
    // A write run is never asked about its own overtaking: the field is for readers.
    assert!(!changed(&app, &plan).await);
}

#[tokio::test]
async fn a_write_run_in_flight_when_the_drift_run_was_registered_counts() {
    let app = spawn_app().await;
    let state = app.create_state("in-flight").await;
    // Admitted before the scan was registered, still live.
    let apply = app.start_run(&state, pb::RunKind::Apply).await;
    let scan = app.register(&state, pb::RunKind::Drift, "dev").await;
    assert!(changed(&app, &scan).await, "a live write attempt");
    // Finished since (after the scan's registration): it still overlapped the scan.
    app.finish(&apply, pb::RunOutcome::Failed).await;
    assert!(
        changed(&app, &scan).await,
        "finished after the registration"
    );

    // A scan registered after that write run finished is clean.
    let later = app.register(&state, pb::RunKind::Drift, "dev").await;
    assert!(!changed(&app, &later).await);
    // A write that commits a generation after it is seen.
    app.apply_doc(&state, &state_doc(1, &Uuid::new_v4().to_string(), "b"))
        .await;
    assert!(changed(&app, &later).await);
}
