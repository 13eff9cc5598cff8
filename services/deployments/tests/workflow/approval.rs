//! Approvals in production: a high-risk change (the database replaced) parks the
//! deployment AWAITING_APPROVAL, holding no slot; the requester may not approve it, a stale
//! plan-set hash is refused, another approver's approval applies it; a rejection ends it;
//! an approval not given in time expires it.
use std::time::Duration;

use cairn_auth::Role;
use cairn_proto::deployments as pb;
use pb::DeploymentStatus as S;
use pb::StepKind as K;
use tonic::Code;

use crate::helpers::PARAMS;
use crate::rig::*;

/// Alice (an approver) asks for a replacement of the database (a new engine version: high
/// risk in production), and the deployment as it settles.
pub(crate) async fn request_replacement(rig: &Rig) -> pb::Deployment {
    let (_, mut alice) = rig.clients_as("alice", Role::Approver);
    let id = alice
        .create_deployment(pb::CreateDeploymentRequest {
            tenant_id: rig.tenant.to_string(),
            instance_ref: "shop".into(),
            kind: pb::DeploymentKind::Deploy as i32,
            parameters_patch_json: r#"{"db_engine_version": "17"}"#.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .deployment
        .unwrap()
        .deployment_id;
    rig.settled(&id).await
}

/// A production instance deployed once (creates only: no approval needed), then a request
/// by `alice` (an approver) that replaces the database; returns its id, parked.
pub(crate) async fn parked_replacement(rig: &Rig) -> pb::Deployment {
    rig.create_instance("shop", "Production", PARAMS).await;
    let first = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    let d = rig.settled(&first).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    assert!(
        step(&d, K::Approval, "").reason.contains("no high-risk"),
        "{d:#?}"
    );

    let d = request_replacement(rig).await;
    assert_eq!(status(&d), S::AwaitingApproval, "{d:#?}");
    let plan = step(&d, K::Plan, "database");
    assert_eq!(plan.plan.as_ref().unwrap().risk, "high", "{plan:?}");
    assert_eq!(d.plan_set_hash.len(), 64);
    // Parked: no slot held.
    assert_eq!(rig.scalar("SELECT count(*) FROM target_slots").await, 0);
    assert_eq!(rig.events("deployment", "awaiting_approval").await.len(), 1);
    d
}

pub(crate) fn approve(rig: &Rig, d: &pb::Deployment, hash: &str) -> pb::ApproveRequest {
    pb::ApproveRequest {
        tenant_id: rig.tenant.to_string(),
        deployment_id: d.deployment_id.clone(),
        plan_set_hash: hash.into(),
        comment: "looks right".into(),
    }
}

/// Bob (an approver, not the requester) rejects `d`, bound to the plans it shows, with the
/// comment "not today"; returns the deployment as the rejection left it.
pub(crate) async fn reject_as_bob(rig: &Rig, d: &pb::Deployment) -> pb::Deployment {
    let (_, mut bob) = rig.clients_as("bob", Role::Approver);
    bob.reject(pb::RejectRequest {
        tenant_id: rig.tenant.to_string(),
        deployment_id: d.deployment_id.clone(),
        plan_set_hash: d.plan_set_hash.clone(),
        comment: "not today".into(),
    })
    .await
    .unwrap()
    .into_inner()
    .deployment
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_production_replacement_waits_for_another_approver_bound_to_its_plans() {
    let rig = rig(Opts::default()).await;
    let d = parked_replacement(&rig).await;

    // The requester may not approve (audited), an operator is no approver, a stale hash
    // is refused.
    let (_, mut alice) = rig.clients_as("alice", Role::Approver);
    let err = alice
        .approve(approve(&rig, &d, &d.plan_set_hash))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert_eq!(rig.events("deployment", "approval_refused").await.len(), 1);
    let (_, mut op) = rig.clients_as("carol", Role::Operator);
    let err = op
        .approve(approve(&rig, &d, &d.plan_set_hash))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    let (_, mut bob) = rig.clients_as("bob", Role::Approver);
    let err = bob
        .approve(approve(&rig, &d, &"0".repeat(64)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(
        status(&rig.get(&d.deployment_id).await),
        S::AwaitingApproval
    );

    // Bob approves what he reviewed. The web service, wired to the new database, plans
    // again in the apply phase: a second high-risk plan goes back to approval.
    let mut approvals = 0;
    let mut current = d.clone();
    while status(&current) == S::AwaitingApproval {
        approvals += 1;
        assert!(approvals <= 3, "{current:#?}");
        let answer = bob
            .approve(approve(&rig, &current, &current.plan_set_hash))
            .await
            .unwrap()
            .into_inner()
            .deployment
            .unwrap();
        assert!(
            matches!(status(&answer), S::Queued | S::Running),
            "{answer:#?}"
        );
        current = rig.settled(&d.deployment_id).await;
    }
    assert_eq!(status(&current), S::Succeeded, "{current:#?}");
    assert_eq!(current.approvals.len(), approvals);
    assert!(
        current
            .approvals
            .iter()
            .all(|a| a.by == "bob" && a.decision == "approved")
    );
    assert_eq!(current.approvals[0].plan_set_hash, d.plan_set_hash);
    let db = std::fs::read_to_string(rig.base_dir.path().join("shop/database.json")).unwrap();
    assert!(db.contains("\"engine_version\":\"17\""), "{db}");
    assert_eq!(rig.events("deployment", "approved").await.len(), approvals);
    // Each resource applied once per deployment.
    assert_eq!(
        rig.scalar(
            "SELECT count(*) FROM (SELECT step_id FROM step_runs WHERE kind = 'apply'
               GROUP BY step_id HAVING count(*) > 1) x"
        )
        .await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_deployment_ends_and_applies_nothing() {
    let rig = rig(Opts::default()).await;
    let d = parked_replacement(&rig).await;
    let applies_before = rig
        .scalar("SELECT count(*) FROM step_runs WHERE kind = 'apply'")
        .await;
    let rejected = reject_as_bob(&rig, &d).await;
    assert_eq!(status(&rejected), S::Rejected, "{rejected:#?}");
    assert_eq!(rejected.approvals[0].decision, "rejected");
    assert!(
        rejected.summary.contains("not today"),
        "{}",
        rejected.summary
    );
    assert!(
        rejected
            .steps
            .iter()
            .all(|s| s.status != pb::StepStatus::Pending as i32
                && s.status != pb::StepStatus::Running as i32),
        "{rejected:#?}"
    );
    assert_eq!(
        rig.instance("shop").await.status,
        pb::InstanceStatus::Active as i32
    );
    assert_eq!(
        rig.scalar("SELECT count(*) FROM step_runs WHERE kind = 'apply'")
            .await,
        applies_before
    );
    assert_eq!(rig.events("deployment", "rejected").await.len(), 1);
    let db = std::fs::read_to_string(rig.base_dir.path().join("shop/database.json")).unwrap();
    assert!(db.contains("\"engine_version\":\"16\""), "{db}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_not_given_in_time_expires() {
    let rig = rig(Opts {
        approval_ttl: Duration::from_secs(3),
        ..Opts::default()
    })
    .await;
    let d = parked_replacement(&rig).await;
    let d = rig
        .until(&d.deployment_id, "expires", |d| status(d) == S::Expired)
        .await;
    assert!(d.finished_at.is_some());
    assert_eq!(
        rig.instance("shop").await.status,
        pb::InstanceStatus::Active as i32
    );
    assert_eq!(rig.events("deployment", "expired").await.len(), 1);
    let (_, mut bob) = rig.clients_as("bob", Role::Approver);
    let err = bob
        .approve(approve(&rig, &d, &d.plan_set_hash))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
}
