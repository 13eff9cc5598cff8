//! The coordinator away while a scan is dispatched, or when its result comes back (drift
//! asks whether the scan's state changed meanwhile): the scan is postponed (no verdict, its
//! slot freed), the resource never turns CHECK_FAILED nor DRIFT_DETECTED on an unchecked
//! result, and the next tick after the coordinator is back scans it, without anyone asking
//! again.
use std::time::{Duration, Instant};

use cairn_proto::drift as dpb;
use cairn_testkit::Fault;

use crate::rig::{self, Opts, resource, status_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_outage_postpones_a_scan_and_a_later_tick_runs_it() {
    let rig = rig::rig(Opts {
        coordinator_proxy: true,
        ..Opts::default()
    })
    .await;
    let (state_id, run_id) = rig.apply("net1", None).await;
    rig.applied("network", &state_id, &run_id).await;
    rig.until("tracked", |s| resource(s, "network").is_some())
        .await;
    let proxy = rig.coordinator_proxy.as_ref().expect("the rig has a proxy");
    proxy.set(Fault::Cut);
    assert_eq!(rig.trigger().await, 1);

    let deadline = Instant::now() + Duration::from_secs(30);
    while rig
        .scalar("SELECT count(*) FROM scans WHERE status = 'postponed'")
        .await
        == 0
    {
        if Instant::now() > deadline {
            let rows = rig
                .rows("SELECT status, coalesce(message, '') FROM scans")
                .await;
            panic!("no scan was postponed: {rows:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = rig.status().await;
    let network = resource(&s, "network").expect("tracked");
    assert_eq!(status_of(network), dpb::DriftStatus::Unknown, "{network:?}");
    assert_eq!(
        rig.scalar("SELECT count(*) FROM scans WHERE status IN ('failed', 'expired')")
            .await,
        0,
        "an outage is no verdict"
    );
    assert_eq!(
        rig.scalar("SELECT coalesce(sum(in_flight), 0)::bigint FROM target_scans")
            .await,
        0,
        "the postponed scan gave its slot back"
    );

    // Back: a later tick scans it (no second trigger).
    proxy.heal();
    rig.until("in sync after the outage", |s| {
        resource(s, "network").is_some_and(|r| status_of(r) == dpb::DriftStatus::InSync)
    })
    .await;
    assert_eq!(
        rig.scalar("SELECT count(*) FROM scans WHERE status = 'succeeded'")
            .await,
        1
    );
    rig.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_outage_when_the_result_comes_back_postpones_the_scan() {
    let mut rig = rig::rig(Opts {
        coordinator_proxy: true,
        ..Opts::default()
    })
    .await;
    let (state_id, run_id) = rig.apply("net1", None).await;
    rig.applied("network", &state_id, &run_id).await;
    rig.until("tracked", |s| resource(s, "network").is_some())
        .await;
    // The resource drifts; the scan is requested while no runner serves the target.
    std::fs::remove_file(rig.base.path().join("net1/network.json")).unwrap();
    rig.stop_runner().await;
    assert_eq!(rig.trigger().await, 1);
    rig.until_count(
        "scan requested",
        "SELECT count(*) FROM scans WHERE status = 'requested'",
        1,
    )
    .await;
    // The coordinator goes away for drift (the runner still reaches it) and the scan runs.
    let proxy = rig.coordinator_proxy.as_ref().expect("the rig has a proxy");
    proxy.set(Fault::Cut);
    rig.start_runner().await;
    rig.until_count(
        "the scan with a result postponed",
        "SELECT count(*) FROM scans WHERE status = 'postponed' AND requested_at IS NOT NULL",
        1,
    )
    .await;
    let s = rig.status().await;
    let network = resource(&s, "network").expect("tracked");
    assert_eq!(status_of(network), dpb::DriftStatus::Unknown, "{network:?}");
    assert_eq!(rig.scalar("SELECT count(*) FROM findings").await, 0);
    assert!(rig.events("drift_detected").await.is_empty());

    // Back: a later tick scans it again and that result counts.
    let proxy = rig.coordinator_proxy.as_ref().expect("the rig has a proxy");
    proxy.heal();
    rig.until("drift detected after the outage", |s| {
        resource(s, "network").is_some_and(|r| status_of(r) == dpb::DriftStatus::DriftDetected)
    })
    .await;
    assert_eq!(rig.until_events("drift_detected", 1).await.len(), 1);
    assert_eq!(
        rig.scalar("SELECT coalesce(sum(in_flight), 0)::bigint FROM target_scans")
            .await,
        0
    );
    rig.finish().await;
}
