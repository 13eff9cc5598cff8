//! Drift's domain metric, scraped from the drift service's own `/metrics` listener:
//! `cairn_drift_findings_total` counts a finding when a scan detects it, and its resolution
//! both when a later scan finds the resource in sync again and when a deployment applies the
//! resource again.
use std::net::SocketAddr;
use std::time::Duration;

use cairn_drift::metrics::FINDINGS;
use cairn_proto::drift as dpb;
use cairn_testkit::metrics::{sample, scrape, scrape_until};

use crate::rig::{self, Opts, at, resource, status_of};

fn findings(text: &str, event: &str) -> f64 {
    sample(text, FINDINGS, &[("event", event)])
}

/// Waits until the findings counted for `event` reach `before`'s plus `by`.
async fn until_findings(metrics: SocketAddr, before: &str, event: &str, by: f64) -> String {
    let want = findings(before, event) + by;
    scrape_until(metrics, Duration::from_secs(30), |t| {
        findings(t, event) >= want
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_are_counted_when_detected_and_when_resolved() {
    // The rig's drift replica, replaced by one serving metrics (CAIRN_METRICS_ADDR).
    let mut rig = rig::rig(Opts::default()).await;
    rig.drift.pop().unwrap().shutdown().await;
    rig.drift_config.shared.metrics.metrics_addr = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    rig.start_drift("drift-metrics").await;
    let metrics = rig.drift.last().and_then(|s| s.metrics_addr());
    let metrics = metrics.expect("the new replica reports its metrics address");
    let (state_id, run_id) = rig.apply("net1", None).await;
    rig.applied("network", &state_id, &run_id).await;
    rig.until("tracked", |s| resource(s, "network").is_some())
        .await;
    let start = scrape(metrics).await.unwrap();

    // In sync after the apply: nothing counted.
    assert_eq!(rig.trigger().await, 1);
    rig.until("in sync", |s| {
        resource(s, "network").is_some_and(|r| status_of(r) == dpb::DriftStatus::InSync)
    })
    .await;
    let in_sync = scrape(metrics).await.unwrap();
    assert_eq!(findings(&in_sync, "detected"), findings(&start, "detected"));
    assert_eq!(findings(&in_sync, "resolved"), findings(&start, "resolved"));

    // A hand edit: one finding detected.
    let file = rig.base.path().join("net1/network.json");
    let original = std::fs::read(&file).unwrap();
    std::fs::write(&file, "{\"edited\": \"by hand\"}").unwrap();
    assert_eq!(rig.trigger().await, 1);
    let s = rig
        .until("drift detected", |s| {
            resource(s, "network").is_some_and(|r| status_of(r) == dpb::DriftStatus::DriftDetected)
        })
        .await;
    let detected = until_findings(metrics, &in_sync, "detected", 1.0).await;
    assert_eq!(
        findings(&detected, "detected") - findings(&in_sync, "detected"),
        1.0
    );
    assert_eq!(
        findings(&detected, "resolved"),
        findings(&in_sync, "resolved")
    );

    // The same drift scanned again: no new finding.
    let first = resource(&s, "network").unwrap().clone();
    assert_eq!(rig.trigger().await, 1);
    let s = rig
        .until("scanned again", |s| {
            resource(s, "network")
                .is_some_and(|r| !r.scanning && at(&r.last_scan_at) > at(&first.last_scan_at))
        })
        .await;
    let again = scrape(metrics).await.unwrap();
    assert_eq!(
        findings(&again, "detected"),
        findings(&detected, "detected")
    );

    // The file put back by hand: the next scan resolves the finding.
    std::fs::write(&file, &original).unwrap();
    let again_at = resource(&s, "network").unwrap().last_scan_at;
    assert_eq!(rig.trigger().await, 1);
    rig.until("in sync again", |s| {
        resource(s, "network").is_some_and(|r| {
            at(&r.last_scan_at) > at(&again_at) && status_of(r) == dpb::DriftStatus::InSync
        })
    })
    .await;
    let fixed = until_findings(metrics, &again, "resolved", 1.0).await;
    assert_eq!(
        findings(&fixed, "resolved") - findings(&again, "resolved"),
        1.0
    );
    assert_eq!(findings(&fixed, "detected"), findings(&again, "detected"));

    // Edited again (detected), then applied again by a deployment (resolved).
    std::fs::write(&file, "{\"edited\": \"twice\"}").unwrap();
    assert_eq!(rig.trigger().await, 1);
    let redetected = until_findings(metrics, &fixed, "detected", 1.0).await;
    let (_, reapplied) = rig.apply("net1", Some(&state_id)).await;
    rig.applied("network", &state_id, &reapplied).await;
    rig.until("resolved by the apply", |s| {
        resource(s, "network").is_some_and(|r| r.applied_run_id == reapplied)
    })
    .await;
    let resolved = until_findings(metrics, &redetected, "resolved", 1.0).await;
    assert_eq!(
        findings(&resolved, "resolved") - findings(&redetected, "resolved"),
        1.0,
        "{resolved}"
    );
    assert_eq!(
        findings(&resolved, "detected") - findings(&fixed, "detected"),
        1.0
    );
    assert!(
        resolved.contains(&format!("# HELP {FINDINGS}")),
        "described"
    );
    assert_eq!(
        rig.scalar("SELECT count(*) FROM findings WHERE status = 'resolved'")
            .await,
        2
    );
    rig.finish().await;
}
