//! Deploying web-stack: everything applies in dependency order, files appear under the
//! target's base dir, the instance is ACTIVE with its resources; a parameter change plans
//! and applies only the resources it affects.
use cairn_proto::deployments as pb;
use pb::DeploymentStatus as S;
use pb::StepKind as K;
use pb::StepStatus as T;

use crate::helpers::PARAMS;
use crate::rig::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_deploy_applies_everything_and_an_update_only_what_changed() {
    let rig = rig(Opts::default()).await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    for r in ["network", "database", "queue", "web"] {
        assert_eq!(step_status(step(&d, K::Apply, r)), T::Succeeded, "{r}");
        assert_eq!(step_status(step(&d, K::Verify, r)), T::Succeeded, "{r}");
    }
    assert_eq!(step_status(step(&d, K::Approval, "")), T::Skipped);
    assert!(step(&d, K::Approval, "").reason.contains("not production"));
    let files = rig.files();
    for f in [
        "shop/network.json",
        "shop/database.json",
        "shop/queue.json",
        "shop/service.json",
    ] {
        assert!(files.iter().any(|x| x == f), "{f} not in {files:?}");
    }
    let shop = rig.instance("shop").await;
    assert_eq!(shop.status, pb::InstanceStatus::Active as i32);
    assert_eq!(shop.last_applied_snapshot_id, d.snapshot_id);
    assert!(shop.active_deployment_id.is_empty());
    assert_eq!(shop.resources.len(), 4, "{:?}", shop.resources);
    for r in &shop.resources {
        assert_eq!(r.status, pb::ResourceStatus::Applied as i32, "{r:?}");
        assert!(
            !r.state_id.is_empty() && !r.last_applied_run_id.is_empty(),
            "{r:?}"
        );
        assert!(r.last_generation >= 1, "{r:?}");
    }
    let applied = rig.events("resource", "applied").await;
    assert_eq!(applied.len(), 4);
    assert_eq!(rig.events("deployment", "succeeded").await.len(), 1);
    // One apply run per resource, at the coordinator too.
    assert_eq!(
        rig.scalar("SELECT count(*) FROM step_runs WHERE kind = 'apply'")
            .await,
        4
    );
    assert_eq!(
        rig.coord_scalar("SELECT count(*) FROM runs WHERE kind = 'apply'")
            .await,
        4
    );
    assert_eq!(rig.scalar("SELECT count(*) FROM target_slots").await, 0);

    // More replicas change the web service only.
    let id = rig
        .request("shop", pb::DeploymentKind::Deploy, r#"{"replicas": 3}"#)
        .await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    assert_eq!(step_status(step(&d, K::Plan, "web")), T::Succeeded);
    for r in ["network", "database", "queue"] {
        let probe = step(&d, K::Probe, r);
        assert_eq!(step_status(probe), T::Succeeded, "{probe:?}");
        let apply = step(&d, K::Apply, r);
        assert_eq!(
            (step_status(apply), apply.reason.as_str()),
            (T::Skipped, "no changes")
        );
    }
    assert_eq!(step_status(step(&d, K::Apply, "web")), T::Succeeded);
    let service = std::fs::read_to_string(rig.base_dir.path().join("shop/service.json")).unwrap();
    assert!(service.contains("\"replicas\":3"), "{service}");
    assert_eq!(
        rig.scalar("SELECT count(*) FROM step_runs WHERE kind = 'apply'")
            .await,
        5
    );
    assert_eq!(rig.events("resource", "applied").await.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_plans_with_read_only_runs_and_changes_nothing() {
    let rig = rig(Opts::default()).await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    assert_eq!(status(&rig.settled(&id).await), S::Succeeded);
    let applies = rig
        .scalar("SELECT count(*) FROM step_runs WHERE kind = 'apply'")
        .await;

    let id = rig
        .request("shop", pb::DeploymentKind::Preview, r#"{"replicas": 5}"#)
        .await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    let web = step(&d, K::Plan, "web");
    assert_eq!(step_status(web), T::Succeeded);
    assert!(
        web.plan.as_ref().unwrap().change + web.plan.as_ref().unwrap().add > 0,
        "{web:?}"
    );
    assert!(d.steps.iter().all(|s| s.kind != K::Apply as i32));
    assert_eq!(
        rig.scalar(&format!(
            "SELECT count(*) FROM step_runs WHERE deployment_id = '{id}' AND kind <> 'preview'"
        ))
        .await,
        0
    );
    assert_eq!(
        rig.scalar("SELECT count(*) FROM step_runs WHERE kind = 'apply'")
            .await,
        applies
    );
    // The preview's plans show what a deployment would change (read-only runs store no
    // plan at the coordinator, so no hash or masked JSON).
    let (_, mut deployments) = rig.clients();
    let plans = deployments
        .get_plans(pb::GetPlansRequest {
            tenant_id: rig.tenant.to_string(),
            deployment_id: id.clone(),
        })
        .await
        .expect("GetPlans of a preview")
        .into_inner();
    let web_plan = plans
        .plans
        .iter()
        .find(|p| p.resource == "web")
        .unwrap_or_else(|| panic!("no plan of web in {plans:#?}"));
    let summary = web_plan.summary.as_ref().expect("a summary");
    assert!(summary.change + summary.add > 0, "{web_plan:?}");
    assert!(web_plan.masked_plan_json.is_empty() && web_plan.plan_sha256.is_empty());
    let service = std::fs::read_to_string(rig.base_dir.path().join("shop/service.json")).unwrap();
    assert!(!service.contains("\"replicas\":5"), "{service}");
    assert_eq!(
        rig.instance("shop").await.status,
        pb::InstanceStatus::Active as i32
    );
}

/// A dependent renders from its upstream's outputs as they are after that upstream applied
/// in the same deployment, not as the plan phase read them: a new network range reaches
/// the database, whose own inputs did not change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_renders_from_what_its_upstream_applied_in_the_same_deployment() {
    let rig = rig(Opts::default()).await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    assert_eq!(status(&rig.settled(&id).await), S::Succeeded);
    let database = || std::fs::read_to_string(rig.base_dir.path().join("shop/database.json"));
    assert!(database().unwrap().contains("10.20.0.0/16"));

    let id = rig
        .request(
            "shop",
            pb::DeploymentKind::Deploy,
            r#"{"cidr": "10.30.0.0/16"}"#,
        )
        .await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    assert_eq!(step_status(step(&d, K::Plan, "network")), T::Succeeded);
    // The database's probe saw the old range and found nothing to do; its apply step
    // planned again with the network's new outputs and applied them.
    let probe = step(&d, K::Probe, "database");
    assert_eq!(step_status(probe), T::Succeeded, "{probe:?}");
    let apply = step(&d, K::Apply, "database");
    assert_eq!(step_status(apply), T::Succeeded, "{apply:?}");
    let now = database().unwrap();
    assert!(
        now.contains("10.30.0.0/16") && !now.contains("10.20.0.0/16"),
        "{now}"
    );
    assert_eq!(
        rig.scalar(&format!(
            "SELECT count(*) FROM step_runs r JOIN steps s ON s.step_id = r.step_id
              WHERE r.deployment_id = '{id}' AND s.resource = 'database' AND r.kind = 'apply'"
        ))
        .await,
        1
    );
}
