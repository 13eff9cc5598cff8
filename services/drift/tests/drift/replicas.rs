//! Two replicas share the schedule: every tracked resource is scanned once per interval
//! slot, never twice in one, and no resource belongs to a replica: when the busier one
//! stops, the other scans every resource in the slots that follow.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::rig::{self, Opts, resource};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_scan_each_resource_once_per_interval() {
    let interval = Duration::from_secs(8);
    let mut rig = rig::rig(Opts {
        interval,
        max_per_target: 3,
        tick: Duration::from_millis(100),
        ..Opts::default()
    })
    .await;
    rig.start_drift("drift-b").await;
    // One applied config, tracked as six resources (each is planned on its own).
    let (state_id, run_id) = rig.apply("net1", None).await;
    let names: Vec<String> = (1..=6).map(|i| format!("part{i}")).collect();
    for name in &names {
        rig.applied(name, &state_id, &run_id).await;
    }
    rig.until("tracked", |s| {
        names.iter().all(|n| resource(s, n).is_some())
    })
    .await;
    // Wait until every resource was scanned in at least two slots.
    until_each_scanned(&rig, 2, "TRUE", "not every resource was scanned twice").await;
    assert_one_scan_per_slot(&rig, &names, interval).await;
    // Which replica takes a due resource is up to the database (whichever asks first), so
    // stop the one that took the most and let the other carry the whole schedule.
    let busiest = rig
        .rows("SELECT replica, count(*)::text FROM scans GROUP BY replica ORDER BY count(*) DESC, replica LIMIT 1")
        .await
        .remove(0)
        .0;
    let (gone, left) = match busiest.as_str() {
        "drift-a" => (0, "drift-b"),
        "drift-b" => (1, "drift-a"),
        other => panic!("unexpected replica {other}"),
    };
    rig.drift.remove(gone).shutdown().await;
    let stopped_at = rig.rows("SELECT now()::text, ''").await.remove(0).0;
    until_each_scanned(
        &rig,
        1,
        &format!("s.replica = '{left}' AND s.created_at > '{stopped_at}'::timestamptz"),
        &format!("{left} did not take over every resource once {busiest} stopped"),
    )
    .await;
    // Across the handover too: one scan per slot.
    assert_one_scan_per_slot(&rig, &names, interval).await;
    let replicas = rig
        .scalar("SELECT count(DISTINCT replica) FROM scans")
        .await;
    assert_eq!(replicas, 2, "both replicas scanned");
    assert!(
        rig.scalar(
            "SELECT count(*) FROM scans WHERE status NOT IN ('succeeded', 'requested', 'claimed')"
        )
        .await
            == 0
    );
    rig.finish().await;
}

/// Every tracked resource was scanned, each in its own phase, one interval apart: never two
/// scans in one interval.
async fn assert_one_scan_per_slot(rig: &rig::Rig, names: &[String], interval: Duration) {
    let rows = rig
        .rows(
            "SELECT resource_id::text, (extract(epoch FROM slot_at) * 1000)::bigint::text \
             FROM scans ORDER BY resource_id, slot_at",
        )
        .await;
    let mut slots: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (resource, slot) in rows {
        slots
            .entry(resource)
            .or_default()
            .push(slot.parse().unwrap());
    }
    assert_eq!(slots.len(), names.len());
    let ms = i64::try_from(interval.as_millis()).unwrap();
    for (resource, at) in &slots {
        for pair in at.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(gap >= ms && gap % ms == 0, "{resource}: slots {at:?}");
        }
    }
}

/// Waits until every tracked resource has at least `n` succeeded scans that meet `condition`
/// (SQL on the scan `s`); fails with `what` after three minutes.
async fn until_each_scanned(rig: &rig::Rig, n: i64, condition: &str, what: &str) {
    let sql = format!(
        "SELECT coalesce(min(n), 0)::bigint FROM (SELECT t.resource_id, count(s.scan_id) AS n \
         FROM tracked_resources t LEFT JOIN scans s \
           ON s.resource_id = t.resource_id AND s.status = 'succeeded' AND ({condition}) \
         GROUP BY t.resource_id) c"
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    while rig.scalar(&sql).await < n {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
