//! The deployments service's domain metrics, scraped from its own `/metrics` listener while
//! real deployments go through the workflow: `cairn_deployments_finished_total` by terminal status, and the
//! gauges of active deployments and waiting approvals (refreshed from the database on the
//! expiry tick): a production replacement parks (1 waiting), a rejection and an approval
//! each bring it back to 0.
use std::net::SocketAddr;
use std::time::Duration;

use cairn_auth::Role;
use cairn_deployments::metrics::{ACTIVE, APPROVALS_WAITING, FINISHED};
use cairn_proto::deployments as pb;
use cairn_testkit::metrics::{sample, scrape, scrape_until};
use pb::DeploymentStatus as S;

use crate::approval::{approve, parked_replacement, reject_as_bob, request_replacement};
use crate::rig::*;

fn finished(text: &str, status: &str) -> f64 {
    sample(text, FINISHED, &[("status", status)])
}

/// Whether the approvals waiting and the deployments awaiting approval are both `n` (the
/// gauges follow the database within one expiry tick, ≤ 10 s).
fn waiting(t: &str, n: f64) -> bool {
    // Present, not only 0 for want of a series.
    t.lines()
        .any(|l| l.starts_with(&format!("{APPROVALS_WAITING} ")))
        && sample(t, APPROVALS_WAITING, &[]) == n
        && sample(t, ACTIVE, &[("status", "awaiting_approval")]) == n
}

/// Scrapes until `done` holds.
async fn until(metrics: SocketAddr, done: impl Fn(&str) -> bool) -> String {
    scrape_until(metrics, Duration::from_secs(30), done)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_deployments_and_waiting_approvals_are_measured() {
    // The rig's deployments service, started again serving metrics (CAIRN_METRICS_ADDR).
    let mut rig = rig(Opts::default()).await;
    rig.config.shared.metrics.metrics_addr = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    rig.restart().await;
    let metrics = rig.server.as_ref().and_then(|s| s.metrics_addr());
    let metrics = metrics.expect("the restarted service reports its metrics address");
    let before = scrape(metrics).await.unwrap();

    // A first deploy (succeeded), then a replacement parked for approval.
    let d = parked_replacement(&rig).await;
    let parked = until(metrics, |t| waiting(t, 1.0)).await;
    assert_eq!(
        finished(&parked, "succeeded") - finished(&before, "succeeded"),
        1.0,
        "{parked}"
    );
    assert_eq!(sample(&parked, ACTIVE, &[("status", "running")]), 0.0);
    assert!(parked.contains(&format!("# HELP {FINISHED}")), "described");

    // Rejected: finished as rejected, nothing waits any more.
    let rejected = reject_as_bob(&rig, &d).await;
    assert_eq!(status(&rejected), S::Rejected, "{rejected:#?}");
    let after_reject = until(metrics, |t| {
        waiting(t, 0.0) && finished(t, "rejected") > finished(&before, "rejected")
    })
    .await;
    assert_eq!(
        finished(&after_reject, "rejected") - finished(&before, "rejected"),
        1.0,
        "{after_reject}"
    );

    // Asked again: parked again; approved (as often as the workflow parks it): succeeded.
    let mut current = request_replacement(&rig).await;
    assert_eq!(status(&current), S::AwaitingApproval, "{current:#?}");
    until(metrics, |t| waiting(t, 1.0)).await;
    let (_, mut bob) = rig.clients_as("bob", Role::Approver);
    let mut approvals = 0;
    while status(&current) == S::AwaitingApproval {
        approvals += 1;
        assert!(approvals <= 3, "{current:#?}");
        bob.approve(approve(&rig, &current, &current.plan_set_hash))
            .await
            .unwrap();
        current = rig.settled(&current.deployment_id).await;
    }
    assert_eq!(status(&current), S::Succeeded, "{current:#?}");
    let done = until(metrics, |t| {
        waiting(t, 0.0) && finished(t, "succeeded") - finished(&before, "succeeded") >= 2.0
    })
    .await;
    assert_eq!(
        finished(&done, "succeeded") - finished(&before, "succeeded"),
        2.0,
        "{done}"
    );
    assert_eq!(
        finished(&done, "rejected") - finished(&before, "rejected"),
        1.0
    );
    assert_eq!(finished(&done, "failed"), finished(&before, "failed"));
    assert_eq!(sample(&done, ACTIVE, &[("status", "queued")]), 0.0);
}
