//! A hand edit found once, not again for the same drift, cleared by the next apply; the
//! API's tenant isolation and roles; ignore rules checked.
use cairn_auth::Role;
use cairn_proto::drift as dpb;
use cairn_proto::events::event::Payload;
use tonic::Code;

use crate::rig::{self, Opts, at, resource, status_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edit_is_found_once_and_the_next_apply_resolves_it() {
    let rig = rig::rig(Opts::default()).await;
    let (state_id, run_id) = rig.apply("net1", None).await;
    rig.applied("network", &state_id, &run_id).await;
    let s = rig
        .until("tracked", |s| resource(s, "network").is_some())
        .await;
    assert_eq!(
        status_of(resource(&s, "network").unwrap()),
        dpb::DriftStatus::Unknown
    );

    // A scan right after the apply: in sync.
    assert_eq!(rig.trigger().await, 1);
    rig.until("in sync", |s| {
        resource(s, "network").is_some_and(|r| status_of(r) == dpb::DriftStatus::InSync)
    })
    .await;

    // Someone edits the file by hand (tofu-sim, like hashicorp/local, reads it as gone).
    let file = rig.base.path().join("net1/network.json");
    std::fs::write(&file, "{\"edited\": \"by hand\"}").unwrap();
    assert_eq!(rig.trigger().await, 1);
    let s = rig
        .until("drift detected", |s| {
            resource(s, "network").is_some_and(|r| status_of(r) == dpb::DriftStatus::DriftDetected)
        })
        .await;
    assert_eq!(s.status, dpb::DriftStatus::DriftDetected as i32);
    let first = resource(&s, "network").unwrap().clone();
    let events = rig.until_events("drift_detected", 1).await;
    let Some(Payload::Drift(d)) = &events[0].payload else {
        panic!("{events:#?}")
    };
    assert_eq!(d.resource, "network");
    assert_eq!(d.finding_id, first.finding_id);
    assert!(
        d.summary
            .contains("module.net1.local_file.network (delete)"),
        "{d:?}"
    );
    assert!(!d.summary.contains("by hand"));
    let findings = rig
        .client(Role::Viewer)
        .await
        .list_findings(dpb::ListFindingsRequest {
            tenant_id: rig.fx.tenant.to_string(),
            instance_id: rig.instance.to_string(),
            status: "open".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .findings;
    assert_eq!(findings.len(), 1);
    let changes: Vec<(&str, &str)> = findings[0]
        .changes
        .iter()
        .map(|c| (c.address.as_str(), c.action.as_str()))
        .collect();
    assert_eq!(changes, [("module.net1.local_file.network", "delete")]);

    // The next scan finds the same drift: no second finding, no second event.
    assert_eq!(rig.trigger().await, 1);
    let s = rig
        .until("scanned again", |s| {
            resource(s, "network")
                .is_some_and(|r| !r.scanning && at(&r.last_scan_at) > at(&first.last_scan_at))
        })
        .await;
    let again = resource(&s, "network").unwrap();
    let again_at = again.last_scan_at;
    assert_eq!(status_of(again), dpb::DriftStatus::DriftDetected);
    assert_eq!(again.finding_id, first.finding_id);
    assert_eq!(rig.events("drift_detected").await.len(), 1);
    assert_eq!(rig.scalar("SELECT count(*) FROM findings").await, 1);

    // A deployment applies it again: in sync, the finding resolved, one drift_resolved.
    let (_, reapplied) = rig.apply("net1", Some(&state_id)).await;
    rig.applied("network", &state_id, &reapplied).await;
    let s = rig
        .until("resolved by the apply", |s| {
            resource(s, "network").is_some_and(|r| status_of(r) == dpb::DriftStatus::InSync)
        })
        .await;
    assert_eq!(resource(&s, "network").unwrap().applied_run_id, reapplied);
    let resolved = rig.until_events("drift_resolved", 1).await;
    let Some(Payload::Drift(r)) = &resolved[0].payload else {
        panic!("{resolved:#?}")
    };
    assert_eq!(r.finding_id, first.finding_id);
    assert_eq!(
        rig.scalar("SELECT count(*) FROM findings WHERE status = 'resolved'")
            .await,
        1
    );
    // And a scan of the re-applied config agrees.
    assert_eq!(rig.trigger().await, 1);
    rig.until("scanned in sync", |s| {
        resource(s, "network").is_some_and(|r| !r.scanning && at(&r.last_scan_at) > at(&again_at))
    })
    .await;
    let s = rig.status().await;
    assert_eq!(
        status_of(resource(&s, "network").unwrap()),
        dpb::DriftStatus::InSync
    );
    assert_eq!(rig.events("drift_detected").await.len(), 1);
    rig.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_instance_is_not_found_and_writes_need_an_operator() {
    let rig = rig::rig(Opts::default()).await;
    // Known to drift through its creation event.
    rig.publish(
        cairn_bus::Aggregate::Instance,
        "created",
        Payload::Instance(cairn_proto::events::InstanceChange {
            instance_id: rig.instance.to_string(),
            name: "shop".into(),
            target_id: rig::TARGET.into(),
            environment: "staging".into(),
            status: "pending".into(),
            ..Default::default()
        }),
    )
    .await;
    rig.until("known", |_| true).await;
    let other = uuid::Uuid::new_v4();
    let mut theirs = rig.client_of(other, Role::Owner).await;
    for (tenant, code) in [(other, Code::NotFound), (rig.fx.tenant, Code::NotFound)] {
        let err = theirs
            .get_drift_status(dpb::GetDriftStatusRequest {
                tenant_id: tenant.to_string(),
                instance_id: rig.instance.to_string(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), code, "{err:?}");
    }
    let err = theirs
        .trigger_scan(dpb::TriggerScanRequest {
            tenant_id: other.to_string(),
            instance_id: rig.instance.to_string(),
            resource: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    let rules = |rules: &[&str]| dpb::SetIgnoreRulesRequest {
        tenant_id: rig.fx.tenant.to_string(),
        instance_id: rig.instance.to_string(),
        rules: rules.iter().map(|r| (*r).to_owned()).collect(),
    };
    let err = rig
        .client(Role::Viewer)
        .await
        .set_ignore_rules(rules(&["tags.LastSeen"]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    let err = rig
        .client(Role::Operator)
        .await
        .set_ignore_rules(rules(&["tags..x"]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let set = rig
        .client(Role::Operator)
        .await
        .set_ignore_rules(rules(&["tags.LastSeen", " tags.LastSeen ", "tags.*"]))
        .await
        .unwrap()
        .into_inner()
        .rules;
    assert_eq!(set, ["tags.LastSeen", "tags.*"]);
    assert_eq!(rig.status().await.ignore_rules, set);
    let err = theirs
        .set_ignore_rules(dpb::SetIgnoreRulesRequest {
            tenant_id: other.to_string(),
            ..rules(&[])
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(
        rig.status().await.ignore_rules,
        set,
        "untouched by the other tenant"
    );
    rig.finish().await;
}
