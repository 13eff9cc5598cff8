//! `instance.deleted`: the instance's resources stop being scheduled, a scan in flight for
//! it is discarded when it returns (its slot freed), its findings and ignore rules are gone
//! (the API answers NOT_FOUND for it, as for an instance drift never heard of), a late event
//! of it does not bring it back, and an instance re-created with the same name (a new id)
//! starts clean.
use cairn_auth::Role;
use cairn_bus::Aggregate;
use cairn_proto::drift as dpb;
use cairn_proto::events::{self as epb, event::Payload};
use tonic::Code;
use uuid::Uuid;

use crate::rig::{self, Opts, Rig, resource, status_of};

fn instance_change(rig: &Rig) -> Payload {
    Payload::Instance(epb::InstanceChange {
        instance_id: rig.instance.to_string(),
        name: "shop".to_owned(),
        target_id: rig::TARGET.to_owned(),
        environment: "staging".to_owned(),
        status: "destroyed".to_owned(),
        ..Default::default()
    })
}

/// Every read and write of the API for the rig's current instance.
async fn api_refusals(rig: &Rig, instance: Uuid) -> Vec<Code> {
    let tenant = rig.fx.tenant.to_string();
    let instance = instance.to_string();
    let viewer = rig.client(Role::Viewer).await;
    let operator = rig.client(Role::Operator).await;
    let status = viewer
        .clone()
        .get_drift_status(dpb::GetDriftStatusRequest {
            tenant_id: tenant.clone(),
            instance_id: instance.clone(),
        })
        .await;
    let findings = viewer
        .clone()
        .list_findings(dpb::ListFindingsRequest {
            tenant_id: tenant.clone(),
            instance_id: instance.clone(),
            ..Default::default()
        })
        .await;
    let trigger = operator
        .clone()
        .trigger_scan(dpb::TriggerScanRequest {
            tenant_id: tenant.clone(),
            instance_id: instance.clone(),
            resource: String::new(),
        })
        .await;
    let rules = operator
        .clone()
        .set_ignore_rules(dpb::SetIgnoreRulesRequest {
            tenant_id: tenant,
            instance_id: instance,
            rules: vec!["tags.LastSeen".to_owned()],
        })
        .await;
    vec![
        status.map(|_| ()).unwrap_err().code(),
        findings.map(|_| ()).unwrap_err().code(),
        trigger.map(|_| ()).unwrap_err().code(),
        rules.map(|_| ()).unwrap_err().code(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_instance_is_forgotten_and_a_new_one_of_its_name_starts_clean() {
    let mut rig = rig::rig(Opts::default()).await;
    let (state_id, run_id) = rig.apply("net1", None).await;
    rig.applied("network", &state_id, &run_id).await;
    rig.until("tracked", |s| resource(s, "network").is_some())
        .await;
    rig.client(Role::Operator)
        .await
        .set_ignore_rules(dpb::SetIgnoreRulesRequest {
            tenant_id: rig.fx.tenant.to_string(),
            instance_id: rig.instance.to_string(),
            rules: vec!["tags.LastSeen".to_owned()],
        })
        .await
        .unwrap();
    // It drifts: a finding is open.
    std::fs::remove_file(rig.base.path().join("net1/network.json")).unwrap();
    assert_eq!(rig.trigger().await, 1);
    rig.until("drift detected", |s| {
        resource(s, "network").is_some_and(|r| status_of(r) == dpb::DriftStatus::DriftDetected)
    })
    .await;
    assert_eq!(rig.until_events("drift_detected", 1).await.len(), 1);

    // A second scan is out (no runner) when the instance is deleted.
    rig.stop_runner().await;
    assert_eq!(rig.trigger().await, 1);
    rig.until_count(
        "second scan requested",
        "SELECT count(*) FROM scans WHERE status = 'requested'",
        1,
    )
    .await;
    let old = rig.instance;
    rig.publish(Aggregate::Instance, "deleted", instance_change(&rig))
        .await;
    rig.until_count(
        "deletion projected",
        "SELECT count(*) FROM instances WHERE deleted_at IS NOT NULL",
        1,
    )
    .await;
    assert_eq!(
        rig.scalar("SELECT count(*) FROM tracked_resources").await,
        0
    );
    assert_eq!(rig.scalar("SELECT count(*) FROM findings").await, 0);
    assert_eq!(
        rig.scalar("SELECT cardinality(ignore_rules)::bigint FROM instances")
            .await,
        0
    );
    assert_eq!(api_refusals(&rig, old).await, vec![Code::NotFound; 4]);
    let all = rig
        .client(Role::Viewer)
        .await
        .list_findings(dpb::ListFindingsRequest {
            tenant_id: rig.fx.tenant.to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(all.findings.is_empty(), "{all:#?}");

    // The scan in flight comes back: discarded, its slot freed, no event.
    rig.start_runner().await;
    rig.until_count(
        "scan discarded",
        "SELECT count(*) FROM scans WHERE status = 'discarded'",
        1,
    )
    .await;
    assert_eq!(
        rig.scalar("SELECT coalesce(sum(in_flight), 0)::bigint FROM target_scans")
            .await,
        0
    );

    // A late event of the deleted instance, and the deletion delivered again as a new event,
    // change nothing.
    rig.applied("network", &state_id, &run_id).await;
    rig.publish(Aggregate::Instance, "deleted", instance_change(&rig))
        .await;
    // A marker event after them: once it is projected, so are they (one ordered stream).
    let marker = Uuid::new_v4();
    rig.instance = marker;
    rig.publish(Aggregate::Instance, "created", instance_change(&rig))
        .await;
    rig.until_count(
        "marker projected",
        &format!("SELECT count(*) FROM instances WHERE instance_id = '{marker}'"),
        1,
    )
    .await;
    assert_eq!(
        rig.scalar("SELECT count(*) FROM tracked_resources").await,
        0
    );
    assert_eq!(api_refusals(&rig, old).await, vec![Code::NotFound; 4]);

    // The instance is created again under its name: a new id, a clean start.
    rig.instance = Uuid::new_v4();
    rig.publish(Aggregate::Instance, "created", instance_change(&rig))
        .await;
    let (state_id, run_id) = rig.apply("net2", None).await;
    rig.applied("network", &state_id, &run_id).await;
    let s = rig
        .until("tracked again", |s| resource(s, "network").is_some())
        .await;
    let r = resource(&s, "network").unwrap();
    assert_eq!(status_of(r), dpb::DriftStatus::Unknown, "{r:#?}");
    assert!(r.finding_id.is_empty() && r.last_scan_at.is_none());
    assert!(s.ignore_rules.is_empty());
    let mine = rig
        .client(Role::Viewer)
        .await
        .list_findings(dpb::ListFindingsRequest {
            tenant_id: rig.fx.tenant.to_string(),
            instance_id: rig.instance.to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(mine.findings.is_empty());
    assert_eq!(rig.trigger().await, 1);
    rig.until("the new instance in sync", |s| {
        resource(s, "network").is_some_and(|r| status_of(r) == dpb::DriftStatus::InSync)
    })
    .await;
    rig.finish().await;
}
