//! The per-target bound across scans in flight, and resources tracked while scheduled
//! scans were off getting their slots once they are on.
use std::time::{Duration, Instant};

use cairn_proto::drift as dpb;
use cairn_proto::state as pb;
use cairn_state_coordinator::testing::RunSpec;

use crate::rig::{self, Opts, resource, status_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_in_flight_per_target_stay_within_the_bound() {
    let mut rig = rig::rig(Opts {
        max_per_target: 1,
        ..Opts::default()
    })
    .await;
    rig.stop_runner().await;
    // Three resources whose applied run is registered (never run: nothing exists yet, so
    // each scan finds its resource gone).
    let state_id = rig.fx.create_state("net1").await;
    let spec = RunSpec {
        root_config: rig.root_config("net1"),
        target_id: rig::TARGET.to_owned(),
        base_dir: rig.base.path().display().to_string(),
        credential_ref: "deploy".to_owned(),
        plan_run_id: None,
    };
    let run_id = rig
        .fx
        .register_of(&state_id, pb::RunKind::Plan, "staging", &spec)
        .await;
    let names = ["a", "b", "c"];
    for name in names {
        rig.applied(name, &state_id, &run_id).await;
    }
    rig.until("tracked", |s| {
        names.iter().all(|n| resource(s, n).is_some())
    })
    .await;
    assert_eq!(rig.trigger().await, 3);
    let s = rig
        .until("one scan out", |s| s.resources.iter().any(|r| r.scanning))
        .await;
    // The others wait for the slot: ticks keep coming, none takes a second one.
    for _ in 0..10 {
        let s = rig.status().await;
        assert_eq!(
            s.resources.iter().filter(|r| r.scanning).count(),
            1,
            "{s:#?}"
        );
        assert_eq!(
            rig.scalar("SELECT max(in_flight)::bigint FROM target_scans")
                .await,
            1
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(s);
    rig.start_runner().await;
    let s = rig
        .until("all scanned", |s| {
            s.resources
                .iter()
                .all(|r| status_of(r) == dpb::DriftStatus::DriftDetected)
        })
        .await;
    assert_eq!(s.resources.len(), 3);
    assert_eq!(rig.until_events("drift_detected", 3).await.len(), 3);
    assert_eq!(rig.scalar("SELECT count(*) FROM scans").await, 3);
    rig.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_tracked_while_scheduling_was_off_get_their_slot() {
    let mut rig = rig::rig(Opts::default()).await;
    let run_id = uuid::Uuid::now_v7().to_string();
    let state_id = uuid::Uuid::now_v7().to_string();
    rig.applied("a", &state_id, &run_id).await;
    let s = rig.until("tracked", |s| resource(s, "a").is_some()).await;
    assert!(
        resource(&s, "a").unwrap().next_scan_at.is_none(),
        "off: no next scan"
    );
    // A replica with a schedule (the slot is within the hour: no scan in this test).
    let interval = Duration::from_secs(3600);
    let config = cairn_drift::Config {
        drift_check_interval: interval,
        drift_replica: Some("drift-on".into()),
        ..rig.drift_config.clone()
    };
    rig.drift
        .push(cairn_drift::Server::start(config).await.unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    let next = loop {
        if let Some(next) = resource(&rig.status().await, "a").unwrap().next_scan_at {
            break next;
        }
        assert!(Instant::now() < deadline, "no slot given");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        next.seconds > now - 5 && next.seconds <= now + 3600,
        "{next:?}"
    );
    rig.finish().await;
}
