//! Drift findings travel with the result of a read-only scan: a file of an applied resource
//! deleted by hand is found as gone outside (`delete`), by address, with no value.
use std::time::Duration;

use cairn_proto::state as pb;

use crate::rig;

#[tokio::test]
async fn a_drift_scan_result_carries_the_findings_and_a_clean_one_none() {
    let rig = rig::rig(Duration::from_secs(30)).await;
    let runner = rig.start_runner("drift", "").await;
    let (plan_id, planned) = rig.run(pb::RunKind::Plan, "staging", 1, None).await;
    assert_eq!(
        planned.outcome,
        pb::RunOutcome::Succeeded as i32,
        "{planned:#?}"
    );
    // A plan's findings are what applying would change: the resources it creates.
    assert!(
        planned.drift_findings.iter().all(|f| f.action == "delete"),
        "{:#?}",
        planned.drift_findings
    );
    let (_, applied) = rig
        .run(pb::RunKind::Apply, "staging", 1, Some(&plan_id))
        .await;
    assert_eq!(
        applied.outcome,
        pb::RunOutcome::Succeeded as i32,
        "{applied:#?}"
    );
    assert!(applied.drift_findings.is_empty(), "an apply carries none");

    // In sync right after the apply.
    let (_, clean) = rig.run(pb::RunKind::Drift, "staging", 1, None).await;
    assert_eq!(
        clean.outcome,
        pb::RunOutcome::Succeeded as i32,
        "{clean:#?}"
    );
    assert!(
        clean.drift_findings.is_empty(),
        "{:#?}",
        clean.drift_findings
    );

    // Someone deletes the file by hand.
    let file = rig.base.path().join("net1/network.json");
    let content = std::fs::read_to_string(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    let (_, drifted) = rig.run(pb::RunKind::Drift, "staging", 1, None).await;
    assert_eq!(
        drifted.outcome,
        pb::RunOutcome::Succeeded as i32,
        "{drifted:#?}"
    );
    let found: Vec<(&str, &str)> = drifted
        .drift_findings
        .iter()
        .map(|f| (f.address.as_str(), f.action.as_str()))
        .collect();
    assert_eq!(
        found,
        [("module.net1.local_file.network", "delete")],
        "{drifted:#?}"
    );
    // Read-only: the scan changed nothing, and no value of the resource travelled.
    assert!(!file.exists());
    let text = format!("{:?}", drifted.drift_findings);
    for line in content.lines().filter(|l| l.trim().len() > 8) {
        assert!(!text.contains(line.trim()), "{line} travelled");
    }
    runner.shutdown().await;
}
