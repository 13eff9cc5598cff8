//! Never during a deployment: a scan whose result comes back after a deployment of its
//! instance was requested is discarded; while the deployment is in progress, due scans
//! are skipped; once it ended, scans count again. And when the deployment's event has not
//! reached drift yet, the coordinator's word that the scan's state is being changed
//! discards the result all the same.
use cairn_proto::drift as dpb;
use uuid::Uuid;

use crate::rig::{self, Opts, resource, status_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_that_comes_back_after_a_deployment_started_is_discarded() {
    let mut rig = rig::rig(Opts::default()).await;
    let (state_id, run_id) = rig.apply("net1", None).await;
    rig.applied("network", &state_id, &run_id).await;
    rig.until("tracked", |s| resource(s, "network").is_some())
        .await;
    // The resource drifts; no runner takes the scan yet.
    std::fs::remove_file(rig.base.path().join("net1/network.json")).unwrap();
    rig.stop_runner().await;
    assert_eq!(rig.trigger().await, 1);
    rig.until("scan requested", |s| {
        resource(s, "network").is_some_and(|r| r.scanning)
    })
    .await;
    // Claimed first, then registered and requested through the outbox.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while rig
        .scalar("SELECT count(*) FROM scans WHERE status = 'requested'")
        .await
        != 1
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the scan was not requested"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // A deployment of the instance is requested while the scan is out.
    let deployment = Uuid::now_v7();
    rig.deployment(deployment, "requested", "queued").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while rig.scalar("SELECT deployments FROM instances").await != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "deployment event not projected"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Now the scan runs and finds the drift, but its result is thrown away.
    rig.start_runner().await;
    let s = rig
        .until("scan ended", |s| {
            resource(s, "network").is_some_and(|r| !r.scanning)
        })
        .await;
    let r = resource(&s, "network").unwrap();
    assert_eq!(status_of(r), dpb::DriftStatus::Unknown, "{r:#?}");
    assert!(r.last_scan_at.is_none());
    assert_eq!(
        rig.scalar("SELECT count(*) FROM scans WHERE status = 'discarded'")
            .await,
        1
    );
    assert_eq!(rig.scalar("SELECT count(*) FROM findings").await, 0);
    assert_eq!(
        rig.scalar("SELECT coalesce(sum(in_flight), 0)::bigint FROM target_scans")
            .await,
        0
    );
    assert!(rig.events("drift_detected").await.is_empty());

    // While it is in progress a due scan is skipped, not run.
    assert_eq!(rig.trigger().await, 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        // Skipping moves the resource to its next slot (never, with the schedule off).
        let due_now = rig
            .scalar("SELECT count(*) FROM tracked_resources WHERE next_due_at <= now()")
            .await;
        if due_now == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the due scan was not skipped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        rig.scalar("SELECT count(*) FROM scans").await,
        1,
        "no second scan"
    );

    // The deployment ends (it failed and applied nothing): scans count again.
    rig.deployment(deployment, "failed", "failed").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while rig
        .scalar("SELECT count(*) FROM deployments WHERE ended_at IS NOT NULL")
        .await
        != 1
    {
        assert!(
            std::time::Instant::now() < deadline,
            "deployment end not projected"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(rig.trigger().await, 1);
    rig.until("drift detected", |s| {
        resource(s, "network").is_some_and(|r| status_of(r) == dpb::DriftStatus::DriftDetected)
    })
    .await;
    assert_eq!(rig.until_events("drift_detected", 1).await.len(), 1);
    rig.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_is_discarded_when_the_coordinator_saw_a_write_run_drift_has_not_heard_of() {
    let mut rig = rig::rig(Opts::default()).await;
    let (state_id, run_id) = rig.apply("net1", None).await;
    rig.applied("network", &state_id, &run_id).await;
    rig.until("tracked", |s| resource(s, "network").is_some())
        .await;
    // The resource drifts; no runner takes the scan yet.
    std::fs::remove_file(rig.base.path().join("net1/network.json")).unwrap();
    rig.stop_runner().await;
    assert_eq!(rig.trigger().await, 1);
    rig.until_count(
        "scan requested",
        "SELECT count(*) FROM scans WHERE status = 'requested'",
        1,
    )
    .await;

    // A deployment registers its plan of the same state at the coordinator while the scan
    // is out; its `deployment.requested` is late: nothing is published.
    rig.register_write("net1", &state_id).await;
    assert_eq!(rig.scalar("SELECT deployments FROM instances").await, 0);
    assert_eq!(
        rig.scalar("SELECT count(*) FROM deployments").await,
        0,
        "drift knows of no deployment"
    );

    // The scan runs and finds the drift, but its result is thrown away.
    rig.start_runner().await;
    rig.until_count(
        "scan discarded",
        "SELECT count(*) FROM scans WHERE status = 'discarded'",
        1,
    )
    .await;
    let s = rig.status().await;
    let r = resource(&s, "network").unwrap();
    assert!(!r.scanning, "{r:#?}");
    assert_eq!(status_of(r), dpb::DriftStatus::Unknown, "{r:#?}");
    assert!(r.last_scan_at.is_none());
    assert_eq!(
        rig.rows("SELECT status, message FROM scans").await,
        vec![(
            "discarded".to_owned(),
            "its state was being changed meanwhile".to_owned()
        )]
    );
    assert_eq!(rig.scalar("SELECT count(*) FROM findings").await, 0);
    assert_eq!(
        rig.scalar("SELECT coalesce(sum(in_flight), 0)::bigint FROM target_scans")
            .await,
        0,
        "the slot was freed"
    );
    assert!(rig.events("drift_detected").await.is_empty());
    rig.finish().await;
}
