//! The request phase of deployments over gRPC: the full step list created at once, the
//! job on cairn.deployq, one active deployment per instance (settled in PostgreSQL),
//! idempotency keys, reads and cancel of a queued deployment.
use cairn_auth::Role;
use cairn_proto::deployments as pb;
use pb::StepKind::{Apply, Approval, Resolve, Verify};
use tonic::Code;
use uuid::Uuid;

use crate::helpers::*;

fn status(d: &pb::Deployment) -> pb::DeploymentStatus {
    pb::DeploymentStatus::try_from(d.status).unwrap()
}

async fn instance(app: &TestApp, r: &str) -> pb::Instance {
    let (mut i, _) = app.clients();
    i.get_instance(pb::GetInstanceRequest {
        tenant_id: app.tenant.to_string(),
        instance_ref: r.into(),
    })
    .await
    .unwrap()
    .into_inner()
    .instance
    .unwrap()
}

#[tokio::test]
async fn a_first_deploy_of_web_stack_creates_every_step_and_queues_its_job() {
    let app = spawn_app().await;
    let shop = app.create_instance("shop", "staging").await;
    let (_, mut d) = app.clients();
    let answer = d
        .create_deployment(app.deploy_request("shop", ""))
        .await
        .unwrap()
        .into_inner();
    assert!(answer.created);
    let dep = answer.deployment.unwrap();
    assert_eq!(status(&dep), pb::DeploymentStatus::Queued);
    assert_eq!(dep.kind, pb::DeploymentKind::Deploy as i32);
    assert_eq!(dep.instance_id, shop.instance_id);
    assert_eq!(dep.instance_name, "shop");
    assert_eq!(dep.target_id, app.target_id);
    assert_eq!(dep.environment, "staging");
    assert_eq!(dep.template_version, 1);
    assert_eq!(dep.requested_by, "test-user");
    assert!(!dep.snapshot_id.is_empty());

    // Every phase at once: resolve (done), approval, an apply per resource in dependency
    // order, a verify per resource. Nothing was applied before, so no plan or probe steps.
    let steps = step_list(&dep);
    let order: Vec<String> = steps
        .iter()
        .filter(|(k, _)| *k == Apply)
        .map(|(_, r)| r.clone())
        .collect();
    assert_eq!(order.len(), 4, "{steps:?}");
    assert_eq!(order.first().map(String::as_str), Some("network"));
    assert_eq!(order.last().map(String::as_str), Some("web"));
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(sorted, ["database", "network", "queue", "web"]);
    let mut expected = vec![(Resolve, String::new()), (Approval, String::new())];
    expected.extend(order.iter().map(|r| (Apply, r.clone())));
    expected.extend(order.iter().map(|r| (Verify, r.clone())));
    assert_eq!(steps, expected);
    assert_eq!(dep.steps[0].status, pb::StepStatus::Succeeded as i32);
    assert!(
        dep.steps[1..]
            .iter()
            .all(|s| s.status == pb::StepStatus::Pending as i32)
    );
    let web = dep
        .steps
        .iter()
        .find(|s| s.kind == Apply as i32 && s.resource == "web")
        .unwrap();
    let mut upstreams = web.depends_on.clone();
    upstreams.sort();
    assert_eq!(upstreams, ["database", "network", "queue"]);

    // The job (the deployment id only) is on the work queue; the event is in the outbox.
    assert_eq!(
        app.deploy_jobs(1).await,
        std::slice::from_ref(&dep.deployment_id)
    );
    assert!(
        app.count("outbox").await >= 2,
        "instance.created and deployment.requested"
    );

    // The instance is taken: deploying, naming the deployment; updates and deletes refused.
    let now = instance(&app, "shop").await;
    assert_eq!(now.status, pb::InstanceStatus::Deploying as i32);
    assert_eq!(now.active_deployment_id, dep.deployment_id);
    let (mut i, _) = app.clients();
    let refused = i
        .update_instance(pb::UpdateInstanceRequest {
            tenant_id: app.tenant.to_string(),
            instance_ref: "shop".into(),
            template_version: 0,
            parameters_patch_json: r#"{"replicas": 3}"#.into(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(
        refused.message().contains(&dep.deployment_id),
        "{}",
        refused.message()
    );
    let refused = i
        .delete_instance(pb::DeleteInstanceRequest {
            tenant_id: app.tenant.to_string(),
            instance_ref: "shop".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");

    // Reads: by id with steps; listed (without steps), also per instance; viewers may read,
    // another tenant may not.
    let (_, mut viewer) = app.clients_for(app.tenant, Role::Viewer);
    let got = viewer
        .get_deployment(pb::GetDeploymentRequest {
            tenant_id: app.tenant.to_string(),
            deployment_id: dep.deployment_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .deployment
        .unwrap();
    assert_eq!(step_list(&got), step_list(&dep));
    for instance_ref in ["", "shop"] {
        let listed = viewer
            .list_deployments(pb::ListDeploymentsRequest {
                tenant_id: app.tenant.to_string(),
                instance_ref: instance_ref.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .deployments;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].deployment_id, dep.deployment_id);
        assert!(listed[0].steps.is_empty());
    }
    let (_, mut stranger) = app.clients_for(Uuid::new_v4(), Role::Owner);
    let hidden = stranger
        .get_deployment(pb::GetDeploymentRequest {
            tenant_id: app.tenant.to_string(),
            deployment_id: dep.deployment_id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(hidden.code(), Code::NotFound, "{hidden:?}");

    // Cancel while queued: the deployment and its pending steps end CANCELLED, the
    // instance is pending again; a second cancel returns the same.
    let cancelled = d
        .cancel(pb::CancelRequest {
            tenant_id: app.tenant.to_string(),
            deployment_id: dep.deployment_id.clone(),
            reason: "wrong day".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .deployment
        .unwrap();
    assert_eq!(status(&cancelled), pb::DeploymentStatus::Cancelled);
    assert!(
        cancelled.summary.contains("wrong day"),
        "{}",
        cancelled.summary
    );
    assert!(cancelled.finished_at.is_some());
    assert_eq!(cancelled.steps[0].status, pb::StepStatus::Succeeded as i32);
    for s in &cancelled.steps[1..] {
        assert_eq!(s.status, pb::StepStatus::Cancelled as i32, "{s:?}");
        assert!(!s.reason.is_empty());
    }
    let now = instance(&app, "shop").await;
    assert_eq!(now.status, pb::InstanceStatus::Pending as i32);
    assert!(now.active_deployment_id.is_empty());
    let again = d
        .cancel(pb::CancelRequest {
            tenant_id: app.tenant.to_string(),
            deployment_id: dep.deployment_id.clone(),
            reason: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .deployment
        .unwrap();
    assert_eq!(again.summary, cancelled.summary);

    // Free again: a new deployment may be requested, and the instance deleted once idle.
    let next = d
        .create_deployment(app.deploy_request("shop", ""))
        .await
        .unwrap()
        .into_inner()
        .deployment
        .unwrap();
    assert_ne!(next.deployment_id, dep.deployment_id);
    assert_eq!(
        app.deploy_jobs(1).await,
        std::slice::from_ref(&next.deployment_id)
    );
}

#[tokio::test]
async fn two_concurrent_requests_for_one_instance_create_exactly_one() {
    let app = spawn_app().await;
    app.create_instance("shop", "staging").await;
    let (_, d) = app.clients();
    let calls = (0..4).map(|n| {
        let mut d = d.clone();
        let req = app.deploy_request("shop", &format!("key-{n}"));
        async move { d.create_deployment(req).await }
    });
    let results = futures::future::join_all(calls).await;
    let created: Vec<pb::Deployment> = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|r| r.get_ref().deployment.clone().unwrap())
        .collect();
    assert_eq!(created.len(), 1, "{results:?}");
    let winner = &created[0].deployment_id;
    for r in &results {
        if let Err(e) = r {
            assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
            assert!(e.message().contains(winner.as_str()), "{}", e.message());
        }
    }
    assert_eq!(app.count("deployments").await, 1);
    assert_eq!(instance(&app, "shop").await.active_deployment_id, *winner);
    assert_eq!(app.deploy_jobs(1).await, std::slice::from_ref(winner));
}

#[tokio::test]
async fn the_same_idempotency_key_names_the_same_deployment() {
    let app = spawn_app().await;
    app.create_instance("shop", "staging").await;
    let (_, mut d) = app.clients();
    let first = d
        .create_deployment(app.deploy_request("shop", "release-42"))
        .await
        .unwrap()
        .into_inner();
    assert!(first.created);
    let id = first.deployment.unwrap().deployment_id;
    // Sequentially and concurrently: the same deployment, never a second one.
    let again = d
        .create_deployment(app.deploy_request("shop", "release-42"))
        .await
        .unwrap()
        .into_inner();
    assert!(!again.created);
    assert_eq!(again.deployment.unwrap().deployment_id, id);
    let calls = (0..3).map(|_| {
        let mut d = d.clone();
        let req = app.deploy_request("shop", "release-42");
        async move { d.create_deployment(req).await }
    });
    for r in futures::future::join_all(calls).await {
        let r = r.unwrap().into_inner();
        assert!(!r.created);
        assert_eq!(r.deployment.unwrap().deployment_id, id);
    }
    assert_eq!(app.count("deployments").await, 1);
    assert_eq!(app.deploy_jobs(1).await, std::slice::from_ref(&id));

    // Still the same once it ended: the key names it, it does not start another.
    d.cancel(pb::CancelRequest {
        tenant_id: app.tenant.to_string(),
        deployment_id: id.clone(),
        reason: String::new(),
    })
    .await
    .unwrap();
    let later = d
        .create_deployment(app.deploy_request("shop", "release-42"))
        .await
        .unwrap()
        .into_inner();
    assert!(!later.created);
    let later = later.deployment.unwrap();
    assert_eq!(later.deployment_id, id);
    assert_eq!(status(&later), pb::DeploymentStatus::Cancelled);
    assert_eq!(app.count("deployments").await, 1);
}

#[tokio::test]
async fn changes_requested_with_a_deployment_apply_to_the_instance_and_bad_ones_create_nothing() {
    let app = spawn_app().await;
    app.create_instance("shop", "Production").await;
    let (_, mut d) = app.clients();
    // A bad patch or an unspecified kind creates nothing.
    let bad = d
        .create_deployment(pb::CreateDeploymentRequest {
            parameters_patch_json: r#"{"replicas": 0}"#.into(),
            ..app.deploy_request("shop", "")
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
    assert!(bad.message().contains("replicas"), "{}", bad.message());
    let bad = d
        .create_deployment(pb::CreateDeploymentRequest {
            kind: pb::DeploymentKind::Unspecified as i32,
            ..app.deploy_request("shop", "")
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
    // Nothing applied yet: a destroy has nothing to do.
    let bad = d
        .create_deployment(pb::CreateDeploymentRequest {
            kind: pb::DeploymentKind::Destroy as i32,
            ..app.deploy_request("shop", "")
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::FailedPrecondition, "{bad:?}");
    assert_eq!(app.count("deployments").await, 0);
    assert_eq!(app.count("message_outbox").await, 0);

    // A preview leaves the instance alone (and takes no slot of it).
    let preview = d
        .create_deployment(pb::CreateDeploymentRequest {
            kind: pb::DeploymentKind::Preview as i32,
            parameters_patch_json: r#"{"replicas": 5}"#.into(),
            ..app.deploy_request("shop", "")
        })
        .await
        .unwrap()
        .into_inner()
        .deployment
        .unwrap();
    let kinds: Vec<pb::StepKind> = step_list(&preview).into_iter().map(|(k, _)| k).collect();
    assert_eq!(kinds[0], Resolve);
    assert_eq!(
        kinds.len(),
        5,
        "resolve and a plan of each new resource: {kinds:?}"
    );
    let now = instance(&app, "shop").await;
    assert_eq!(now.status, pb::InstanceStatus::Pending as i32);
    assert!(!now.parameters_json.contains("\"replicas\""));

    // A deploy with a patch takes it atomically.
    let dep = d
        .create_deployment(pb::CreateDeploymentRequest {
            parameters_patch_json: r#"{"replicas": 6}"#.into(),
            ..app.deploy_request("shop", "")
        })
        .await
        .unwrap()
        .into_inner()
        .deployment
        .unwrap();
    assert_eq!(dep.environment, "production");
    let now = instance(&app, "shop").await;
    assert_eq!(now.active_deployment_id, dep.deployment_id);
    let params: serde_json::Value = serde_json::from_str(&now.parameters_json).unwrap();
    assert_eq!(params["replicas"], 6);
    assert_eq!(
        app.deploy_jobs(2).await.len(),
        2,
        "the preview's job and the deploy's"
    );
}
