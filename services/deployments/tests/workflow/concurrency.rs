//! Slots and crashes: a target with one slot runs one deployment at a time (the others
//! wait in order); a worker killed mid-deployment leaves a job that another worker resumes,
//! applying no resource twice.
use std::time::{Duration, Instant};

use cairn_proto::deployments as pb;
use pb::DeploymentStatus as S;
use pb::StepKind as K;
use pb::StepStatus as T;

use crate::rig::*;

fn params(app: &str) -> String {
    format!(
        r#"{{"app_name": "{app}", "db_admin_password": "arn:aws:secretsmanager:us-east-1:000000000000:secret:shop-db"}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slot_runs_one_deployment_at_a_time() {
    let rig = rig(Opts {
        slots: 1,
        resource_delay: Some("200ms"),
        ..Opts::default()
    })
    .await;
    let mut ids = Vec::new();
    for name in ["one", "two", "three"] {
        rig.create_instance(name, "staging", &params(name)).await;
    }
    for name in ["one", "two", "three"] {
        ids.push(rig.request(name, pb::DeploymentKind::Deploy, "").await);
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut max_running = 0;
    loop {
        let running = rig
            .scalar("SELECT count(*) FROM deployments WHERE status = 'running'")
            .await;
        let slots = rig.scalar("SELECT count(*) FROM target_slots").await;
        assert!(slots <= 1, "{slots} slots taken");
        max_running = max_running.max(running);
        let open = rig
            .scalar("SELECT count(*) FROM deployments WHERE status IN ('queued', 'running')")
            .await;
        if open == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "deployments did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(max_running, 1);
    for id in &ids {
        assert_eq!(status(&rig.get(id).await), S::Succeeded);
    }
    assert_eq!(rig.scalar("SELECT count(*) FROM target_slots").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_s_deployment_resumes_without_applying_twice() {
    let mut rig = rig(Opts {
        resource_delay: Some("1s"),
        ..Opts::default()
    })
    .await;
    rig.create_instance("shop", "staging", &params("shop"))
        .await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    rig.until(&id, "the network applied", |d| {
        step_status(step(d, K::Apply, "network")) == T::Succeeded
    })
    .await;
    rig.restart().await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    assert_eq!(
        rig.scalar(
            "SELECT count(*) FROM (SELECT step_id FROM step_runs WHERE kind = 'apply'
               GROUP BY step_id HAVING count(*) > 1) x"
        )
        .await,
        0
    );
    assert_eq!(
        rig.coord_scalar("SELECT count(*) FROM runs WHERE kind = 'apply'")
            .await,
        4
    );
    assert_eq!(rig.events("resource", "applied").await.len(), 4);
    assert_eq!(rig.scalar("SELECT count(*) FROM target_slots").await, 0);
}
