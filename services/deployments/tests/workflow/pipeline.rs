//! Runs in flight and runs prepared ahead: `CAIRN_DEPLOY_PARALLELISM` bounds the runs
//! requested and not yet finished; steps beyond it render, persist and register their runs
//! meanwhile, and are requested only once a run ends; a cancel asked for while a run waits
//! prepared means it is never requested.
use cairn_proto::deployments as pb;
use pb::DeploymentStatus as S;
use pb::StepKind as K;
use pb::StepStatus as T;

use crate::helpers::PARAMS;
use crate::rig::*;

/// Pairs of the deployment's runs in flight at the same time: both
/// requested, neither finished.
fn overlapping(id: &str) -> String {
    format!(
        "SELECT count(*) FROM step_runs a JOIN step_runs b ON a.run_id < b.run_id
          WHERE a.deployment_id = '{id}' AND b.deployment_id = '{id}'
            AND a.requested_at < b.result_at AND b.requested_at < a.result_at"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_at_a_time_with_the_next_prepared_while_it_runs() {
    let rig = rig(Opts {
        parallelism: 1,
        resource_delay: Some("300ms"),
        ..Opts::default()
    })
    .await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    for r in ["network", "database", "queue", "web"] {
        assert_eq!(step_status(step(&d, K::Apply, r)), T::Succeeded, "{r}");
        assert_eq!(step_status(step(&d, K::Verify, r)), T::Succeeded, "{r}");
    }
    // Every run was requested and got its result.
    assert_eq!(
        rig.scalar(&format!(
            "SELECT count(*) FROM step_runs WHERE deployment_id = '{id}'
                AND (requested_at IS NULL OR result_at IS NULL)"
        ))
        .await,
        0
    );
    assert_eq!(
        rig.scalar(&format!(
            "SELECT count(*) FROM step_runs WHERE deployment_id = '{id}'"
        ))
        .await,
        8
    );
    // Never two in flight at once.
    assert_eq!(rig.scalar(&overlapping(&id)).await, 0);
    // A verify run was persisted (rendered and registered) while the one before it ran,
    // and requested only after that one's result.
    let prepared = rig
        .scalar(&format!(
            "SELECT count(*) FROM step_runs a JOIN step_runs b ON a.run_id <> b.run_id
              WHERE a.deployment_id = '{id}' AND b.deployment_id = '{id}'
                AND a.kind = 'preview' AND b.kind = 'preview'
                AND b.created_at < a.result_at AND b.requested_at > a.result_at"
        ))
        .await;
    assert!(prepared >= 1, "no verify run was prepared ahead");
    // Each run registered once at the coordinator, each with one attempt.
    assert_eq!(rig.coord_scalar("SELECT count(*) FROM runs").await, 8);
    assert_eq!(rig.coord_scalar("SELECT count(*) FROM attempts").await, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_prepared_when_the_cancel_comes_is_never_requested() {
    let rig = rig(Opts {
        parallelism: 1,
        resource_delay: Some("2s"),
        ..Opts::default()
    })
    .await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    // The network applied, then the database and the queue are ready at once: one applies,
    // the other's run waits prepared (persisted and registered, not requested).
    let prepared_sql = format!(
        "SELECT count(*) FROM step_runs WHERE deployment_id = '{id}'
            AND kind = 'apply' AND status = 'pending'"
    );
    let ready_sql = format!(
        "SELECT (count(*) FILTER (WHERE status = 'requested') = 2
                 AND count(*) FILTER (WHERE status = 'pending') = 1)::int::bigint
           FROM step_runs WHERE deployment_id = '{id}' AND kind = 'apply'"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while rig.scalar(&ready_sql).await == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no apply run prepared behind the one in flight"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (_, mut c) = rig.clients();
    c.cancel(pb::CancelRequest {
        tenant_id: rig.tenant.to_string(),
        deployment_id: id.clone(),
        reason: "wrong day".into(),
    })
    .await
    .unwrap();
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Cancelled, "{d:#?}");
    // The prepared run was never requested: two applies went to a runner (the network's
    // and the one in flight at the cancel), and the coordinator saw no attempt of a third.
    assert_eq!(rig.scalar(&prepared_sql).await, 1);
    assert_eq!(
        rig.scalar(&format!(
            "SELECT count(*) FROM step_runs WHERE deployment_id = '{id}'
                AND kind = 'apply' AND status = 'requested'"
        ))
        .await,
        2
    );
    assert_eq!(
        rig.coord_scalar("SELECT count(*) FROM runs WHERE kind = 'apply'")
            .await,
        3
    );
    assert_eq!(
        rig.coord_scalar(
            "SELECT count(*) FROM attempts a JOIN runs r USING (run_id) WHERE r.kind = 'apply'"
        )
        .await,
        2
    );
    assert_eq!(step_status(step(&d, K::Apply, "network")), T::Succeeded);
    assert_eq!(step_status(step(&d, K::Apply, "web")), T::Cancelled);
    assert!(
        d.steps
            .iter()
            .all(|s| !matches!(step_status(s), T::Pending | T::Running)),
        "{d:#?}"
    );
    assert_eq!(rig.scalar("SELECT count(*) FROM target_slots").await, 0);
}
