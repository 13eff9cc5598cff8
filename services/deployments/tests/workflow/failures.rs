//! Failures: a resource whose apply fails skips exactly its dependents while independent
//! branches finish; a transient failure is retried (planned again first) and succeeds.
use std::path::PathBuf;

use cairn_proto::deployments as pb;
use pb::DeploymentStatus as S;
use pb::StepKind as K;
use pb::StepStatus as T;

use crate::helpers::PARAMS;
use crate::rig::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_resource_skips_exactly_its_dependents() {
    let rig = rig(Opts {
        extra_env: "TOFU_SIM_FAIL_RESOURCE=module.this.terraform_data.instance".into(),
        ..Opts::default()
    })
    .await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Failed, "{d:#?}");
    let db = step(&d, K::Apply, "database");
    assert_eq!(step_status(db), T::Failed, "{db:?}");
    assert_eq!(db.error_class, "provider", "{db:?}");
    assert!(db.reason.starts_with("apply failed"), "{db:?}");
    let web = step(&d, K::Apply, "web");
    assert_eq!(
        (step_status(web), web.reason.as_str()),
        (T::Skipped, "upstream database failed")
    );
    for r in ["network", "queue"] {
        assert_eq!(step_status(step(&d, K::Apply, r)), T::Succeeded, "{r}");
        assert_eq!(step_status(step(&d, K::Verify, r)), T::Succeeded, "{r}");
    }
    assert_eq!(step_status(step(&d, K::Verify, "web")), T::Skipped);
    assert!(
        d.summary.contains("failed: apply database"),
        "{}",
        d.summary
    );
    // A provider failure is not retried.
    assert_eq!(
        rig.scalar(&format!(
            "SELECT count(*) FROM step_runs r JOIN steps s USING (step_id)
              WHERE s.resource = 'database' AND r.kind = 'apply' AND s.deployment_id = '{id}'"
        ))
        .await,
        1
    );
    let shop = rig.instance("shop").await;
    assert_eq!(shop.status, pb::InstanceStatus::Failed as i32);
    assert!(shop.last_applied_snapshot_id.is_empty());
    assert_eq!(rig.events("deployment", "failed").await.len(), 1);
    assert_eq!(rig.scalar("SELECT count(*) FROM target_slots").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_failure_is_planned_again_and_retried() {
    let rig = rig(Opts {
        extra_env: "TOFU_SIM_FAIL_TRANSIENT=module.this.terraform_data.queue:1".into(),
        ..Opts::default()
    })
    .await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    let queue = step(&d, K::Apply, "queue");
    assert_eq!(step_status(queue), T::Succeeded);
    assert_eq!(queue.tries, 2, "{queue:?}");
    let kinds: Vec<String> = {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&rig.db.admin_url)
            .await
            .unwrap();
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT r.kind || ':' || r.outcome || ':' || r.error_class
               FROM deployments.step_runs r WHERE r.step_id = '{}' ORDER BY r.seq",
            queue.step_id
        )))
        .fetch_all(&mut conn)
        .await
        .unwrap()
    };
    assert_eq!(
        kinds,
        [
            "apply:failed:transient",
            "plan:succeeded:",
            "apply:succeeded:"
        ],
        "{kinds:?}"
    );
    assert!(rig.files().iter().any(|f| f == "shop/queue.json"));
}

/// A runner that cannot run tofu at all fails every run in the runner (a transient class):
/// the plans of the retries fail as well, and the step still ends after its bounded tries
/// instead of planning again for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_bounded_when_the_retry_plans_fail_too() {
    let rig = rig(Opts {
        tofu_bin: Some(PathBuf::from("/nonexistent/tofu")),
        ..Opts::default()
    })
    .await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Failed, "{d:#?}");
    let network = step(&d, K::Apply, "network");
    assert_eq!(step_status(network), T::Failed, "{network:?}");
    let runs = rig
        .scalar(&format!(
            "SELECT count(*) FROM deployments.step_runs WHERE step_id = '{}'",
            network.step_id
        ))
        .await;
    let retries = i64::from(rig.config.deploy_retries);
    assert_eq!(runs, retries + 1, "one first try and {retries} retries");
    for r in ["database", "queue", "web"] {
        assert_eq!(step_status(step(&d, K::Apply, r)), T::Skipped, "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_no_runner_admits_fails_its_step_saying_so() {
    let rig = rig(Opts {
        runner: false,
        admit_timeout: std::time::Duration::from_secs(2),
        ..Opts::default()
    })
    .await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Failed, "{d:#?}");
    let network = step(&d, K::Apply, "network");
    assert_eq!(step_status(network), T::Failed);
    assert_eq!(network.error_class, "not_admitted");
    assert!(
        network
            .reason
            .contains("not admitted by a runner within 2s")
            && network.reason.contains(&rig.target_id),
        "{network:?}"
    );
    for r in ["database", "queue"] {
        assert_eq!(step(&d, K::Apply, r).reason, "upstream network failed");
    }
    assert!(step(&d, K::Apply, "web").reason.starts_with("upstream "));
}
