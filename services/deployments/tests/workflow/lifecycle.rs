//! The rest of an instance's life: a resource deleted outside Cairn is found by its probe
//! and created again; a running deployment is cancelled through its runs; a destroy
//! removes everything in reverse order and the instance ends DESTROYED.
use cairn_proto::deployments as pb;
use pb::DeploymentStatus as S;
use pb::StepKind as K;
use pb::StepStatus as T;

use crate::helpers::PARAMS;
use crate::rig::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_deleted_outside_is_recreated_then_destroy_removes_everything() {
    let rig = rig(Opts::default()).await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    assert_eq!(status(&rig.settled(&id).await), S::Succeeded);

    std::fs::remove_file(rig.base_dir.path().join("shop/queue.json")).unwrap();
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    // The probe found it gone and became a plan step; the queue applied again.
    let queue_plan = d
        .steps
        .iter()
        .find(|s| s.resource == "queue" && s.kind == K::Plan as i32)
        .expect("the queue's probe became a plan step");
    assert!(queue_plan.plan.as_ref().unwrap().add > 0, "{queue_plan:?}");
    assert_eq!(step_status(step(&d, K::Apply, "queue")), T::Succeeded);
    assert_eq!(step_status(step(&d, K::Verify, "queue")), T::Succeeded);
    assert_eq!(step_status(step(&d, K::Apply, "network")), T::Skipped);
    assert!(rig.files().iter().any(|f| f == "shop/queue.json"));

    let id = rig.request("shop", pb::DeploymentKind::Destroy, "").await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    let order: Vec<&str> = d
        .steps
        .iter()
        .filter(|s| s.kind == K::Destroy as i32)
        .map(|s| s.resource.as_str())
        .collect();
    assert_eq!(order.first(), Some(&"web"));
    assert_eq!(order.last(), Some(&"network"));
    for s in d.steps.iter().filter(|s| s.kind == K::Destroy as i32) {
        assert_eq!(step_status(s), T::Succeeded, "{s:?}");
    }
    let left: Vec<String> = rig
        .files()
        .into_iter()
        .filter(|f| f.ends_with(".json"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let shop = rig.instance("shop").await;
    assert_eq!(shop.status, pb::InstanceStatus::Destroyed as i32);
    assert!(
        shop.resources
            .iter()
            .all(|r| r.status == pb::ResourceStatus::Destroyed as i32)
    );
    assert_eq!(rig.events("resource", "destroyed").await.len(), 4);
    let (mut i, _) = rig.clients();
    i.delete_instance(pb::DeleteInstanceRequest {
        tenant_id: rig.tenant.to_string(),
        instance_ref: "shop".into(),
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_deployment_is_cancelled_through_its_runs() {
    let rig = rig(Opts {
        resource_delay: Some("3s"),
        ..Opts::default()
    })
    .await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    rig.until(&id, "the network applies", |d| {
        step_status(step(d, K::Apply, "network")) == T::Running
    })
    .await;
    let (_, mut c) = rig.clients();
    let answer = c
        .cancel(pb::CancelRequest {
            tenant_id: rig.tenant.to_string(),
            deployment_id: id.clone(),
            reason: "wrong day".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .deployment
        .unwrap();
    assert!(
        matches!(status(&answer), S::Running | S::Cancelled),
        "{answer:#?}"
    );
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Cancelled, "{d:#?}");
    assert!(d.summary.contains("wrong day"), "{}", d.summary);
    assert!(
        d.steps
            .iter()
            .all(|s| !matches!(step_status(s), T::Pending | T::Running)),
        "{d:#?}"
    );
    // The network's run was stopped through cairn.runctl; the rest never started.
    for r in ["network", "database", "queue", "web"] {
        assert_eq!(step_status(step(&d, K::Apply, r)), T::Cancelled, "{r}");
    }
    assert_eq!(rig.scalar("SELECT count(*) FROM target_slots").await, 0);
    assert!(rig.instance("shop").await.active_deployment_id.is_empty());
}
