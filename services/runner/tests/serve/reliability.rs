//! What the runner does when its coordinator goes away: a lease that cannot be renewed stops
//! tofu before it ends, and an `errored.tfstate` is kept (spooled on disk, across a restart)
//! until the coordinator has it.

use std::time::{Duration, Instant};

use cairn_proto::runner as rpb;
use cairn_proto::state as pb;
use cairn_runner::serve::Runner;
use cairn_service::Service as _;
use cairn_testkit::fault_proxy::{Fault, FaultProxy};

use crate::rig::{self, container_attempts, containers_of};
use crate::{WITHIN, class, helpers, outcome};

/// A runner whose coordinator calls go through `proxy`, with tofu's grace `grace`.
async fn runner_via(
    rig: &rig::Rig,
    proxy: &FaultProxy,
    instance: &str,
    extra_env: &str,
    grace: Duration,
) -> Runner {
    let mut config = rig.config(instance, extra_env);
    config.coordinator_url = format!("http://{}", proxy.addr());
    config.tofu_grace = grace;
    Runner::start(config).await.unwrap()
}

/// Starts an apply of ten resources (five modules of two) of `resource_delay` each, one after
/// another, through a runner whose coordinator link is `proxy`, with tofu's grace `grace`,
/// and waits until tofu is creating. Returns the run and the runner.
async fn apply_through(
    rig: &rig::Rig,
    proxy: &FaultProxy,
    prefix: &str,
    resource_delay: &str,
    grace: Duration,
) -> (String, Runner) {
    let instance = helpers::instance(prefix).to_string();
    let env = format!("TOFU_SIM_RESOURCE_DELAY={resource_delay}");
    let runner = runner_via(rig, proxy, &instance, &env, grace).await;
    let run_id = rig.register(pb::RunKind::Apply, "staging", 5, None).await;
    rig.request(&run_id).await;
    rig.wait_for_log(&run_id, "Creating...", WITHIN).await;
    (run_id, runner)
}

/// Starts an apply of ten 2-s resources through a runner whose coordinator link is
/// `proxy` (tofu's grace 3 s: the lease is given up with 4 s of its 8 s left), waits until
/// tofu is creating, then holds every byte to the coordinator (renewals neither succeed nor
/// fail) and waits until the runner stopped tofu: the lease is still live then. Returns the
/// run, the runner and the generations written before the stop.
async fn apply_until_the_lease_is_given_up(
    rig: &rig::Rig,
    proxy: &FaultProxy,
    lease: Duration,
    prefix: &str,
) -> (String, Runner, Vec<pb::GenerationInfo>) {
    let (run_id, runner) = apply_through(rig, proxy, prefix, "2s", Duration::from_secs(3)).await;
    assert_eq!(
        container_attempts(&run_id).await,
        ["1"],
        "containers carry their attempt"
    );

    proxy.set(Fault::Delay(Duration::from_secs(3600)));
    let cut = Instant::now();
    rig.wait_until("the tofu container stopped", lease * 2, || async {
        containers_of(&run_id).await == 0
    })
    .await;
    let run = rig.get_run(&run_id).await;
    assert!(
        run.lease_live,
        "tofu ran until the lease ended ({:?} after the cut): {run:?}",
        cut.elapsed()
    );
    assert_eq!(run.attempt, 1);
    // tofu got SIGINT (and said so) before anything else.
    let lines = rig.log_lines(&run_id).await;
    assert!(
        lines.iter().any(|l| l.text.contains("Interrupt received.")),
        "tofu was not interrupted: {:?}",
        lines.iter().map(|l| &l.text).collect::<Vec<_>>()
    );
    let written = rig.generation_infos().await;
    (run_id, runner, written)
}

/// The coordinator goes silent mid-apply: the runner stops tofu (SIGINT first) while the
/// lease is still live, and once the coordinator answers again the attempt finishes as
/// LEASE_LOST ("state may be incomplete"), which is final: no attempt 2 follows.
#[tokio::test]
async fn a_lost_lease_stops_tofu_before_the_lease_ends() {
    let lease = Duration::from_secs(8);
    let rig = rig::rig(lease).await;
    let proxy = FaultProxy::start(rig.coord.server.grpc_addr())
        .await
        .unwrap();
    let (run_id, runner, written) =
        apply_until_the_lease_is_given_up(&rig, &proxy, lease, "lease").await;
    proxy.heal();
    let result = rig.result(&run_id, WITHIN).await;
    assert_eq!(result.attempt, 1, "{result:#?}");
    assert_eq!(outcome(&result), pb::RunOutcome::Failed, "{result:#?}");
    assert_eq!(class(&result), rpb::ErrorClass::LeaseLost, "{result:#?}");
    assert!(
        result
            .message
            .contains("lease lost — state may be incomplete"),
        "{}",
        result.message
    );
    let run = rig.get_run(&run_id).await;
    assert!(run.finished, "the lost attempt finished the run: {run:?}");
    assert_eq!(run.attempt, 1, "no attempt 2 after a lost lease: {run:?}");
    assert_eq!(
        rig.generation_infos().await,
        written,
        "attempt 1 wrote after it was stopped"
    );
    assert_eq!(rig.results(&run_id).await.len(), 1);
    runner.shutdown().await;
}

/// The runner's connection to the coordinator goes dead without a word mid-apply (no FIN,
/// no RST: a host gone, a NAT entry dropped) while the coordinator itself is fine: the
/// keepalive closes the connection, the renewal that hung on it fails and the next one
/// connects anew before the stop, so the apply finishes on its first attempt. Without the
/// keepalive every renewal would wait on the dead connection (the first until its deadline)
/// and tofu would be stopped 27 s after admission (30 s lease, grace 2 s + 1 s), 13 s before
/// the apply ends.
#[tokio::test]
async fn a_connection_gone_silent_is_replaced_and_the_lease_kept() {
    let lease = Duration::from_secs(30);
    let rig = rig::rig(lease).await;
    let proxy = FaultProxy::start(rig.coord.server.grpc_addr())
        .await
        .unwrap();
    // Ten resources of 4 s each: 40 s of apply.
    let (run_id, runner) =
        apply_through(&rig, &proxy, "silent", "4s", Duration::from_secs(2)).await;
    proxy.stall_open_connections();

    let result = rig.result(&run_id, lease * 3).await;
    assert_eq!(outcome(&result), pb::RunOutcome::Succeeded, "{result:#?}");
    assert_eq!(result.attempt, 1, "{result:#?}");
    let lines = rig.log_lines(&run_id).await;
    assert!(
        !lines.iter().any(|l| l.text.contains("Interrupt received.")),
        "tofu was interrupted: {:?}",
        lines.iter().map(|l| &l.text).collect::<Vec<_>>()
    );
    assert_eq!(rig.results(&run_id).await.len(), 1, "one result of the run");
    let run = rig.get_run(&run_id).await;
    assert!(run.finished, "{run:?}");
    assert_eq!(run.attempt, 1, "{run:?}");
    runner.shutdown().await;
}

/// As above, but the lease expires before the coordinator answers again and a newer attempt
/// is admitted meanwhile (what a redelivery to another runner does): attempt 1 writes
/// nothing more, its `FinishRun` is refused as `superseded`, and the runner publishes no
/// result for it (the first result of a run wins downstream) and does not retry the finish:
/// the only result is the newer attempt's, published again from what the coordinator knows
/// once the request comes back.
#[tokio::test]
async fn a_superseded_attempt_publishes_no_result_of_its_own() {
    let lease = Duration::from_secs(8);
    let rig = rig::rig(lease).await;
    let proxy = FaultProxy::start(rig.coord.server.grpc_addr())
        .await
        .unwrap();
    let (run_id, runner, written) =
        apply_until_the_lease_is_given_up(&rig, &proxy, lease, "superseded").await;

    // Once the lease expired, the coordinator admits attempt 2; attempt 1 writes nothing more.
    rig.wait_until("the lease expired", lease * 2, || async {
        !rig.get_run(&run_id).await.lease_live
    })
    .await;
    let second = rig.coord.fx.admit(&run_id).await.unwrap();
    assert_eq!(second.attempt, 2);
    // Attempt 2's runner (stood in for by the test) finishes the run.
    rig.coord
        .fx
        .finish(&run_id, 2, pb::RunOutcome::Failed, "attempt 2 finished")
        .await;
    proxy.heal();
    let result = rig.result(&run_id, WITHIN).await;
    assert_eq!(
        result.attempt, 2,
        "attempt 1's result was published: {result:#?}"
    );
    assert_eq!(outcome(&result), pb::RunOutcome::Failed, "{result:#?}");
    assert!(
        result.message.contains("published again"),
        "{}",
        result.message
    );
    let results = rig.results(&run_id).await;
    assert!(
        results.iter().all(|r| r.attempt == 2),
        "a result of the superseded attempt: {results:#?}"
    );
    assert_eq!(
        rig.generation_infos().await,
        written,
        "attempt 1 wrote after it was stopped"
    );
    let run = rig.get_run(&run_id).await;
    assert_eq!(run.attempt, 2, "{run:?}");
    runner.shutdown().await;
}

/// tofu cannot write its final state (the state was fenced meanwhile) and leaves
/// `errored.tfstate`: the runner hands it to the coordinator's quarantine, once, and the
/// result names it.
#[tokio::test]
async fn an_errored_state_reaches_the_quarantine_through_the_runner() {
    let rig = rig::rig(Duration::from_secs(30)).await;
    let runner = rig
        .start_runner("errored", "TOFU_SIM_RESOURCE_DELAY=1s")
        .await;
    let run_id = rig.register(pb::RunKind::Apply, "staging", 2, None).await;
    rig.request(&run_id).await;
    rig.wait_for_log(&run_id, "Creating...", WITHIN).await;
    rig.fence().await;
    let result = rig.result(&run_id, WITHIN).await;
    assert_eq!(outcome(&result), pb::RunOutcome::Failed, "{result:#?}");
    assert!(!result.quarantine_id.is_empty(), "{result:#?}");
    let (rows, objects) = rig.quarantined(&run_id).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].0, 1);
    assert_eq!(objects, 1);
    assert!(rig.spooled().is_empty(), "{:?}", rig.spooled());
    runner.shutdown().await;
}

/// The coordinator is unreachable when tofu leaves `errored.tfstate`, and the runner is
/// stopped before it comes back: the file waits in the spool (0600, in a 0700 directory),
/// and the restarted runner hands it in before it takes work: quarantined once, spool empty.
#[tokio::test]
async fn an_errored_state_survives_an_unreachable_coordinator_and_a_restart() {
    use std::os::unix::fs::PermissionsExt;
    let rig = rig::rig(Duration::from_secs(30)).await;
    let proxy = FaultProxy::start(rig.coord.server.grpc_addr())
        .await
        .unwrap();
    let instance = helpers::instance("spool").to_string();
    let runner = runner_via(
        &rig,
        &proxy,
        &instance,
        "TOFU_SIM_RESOURCE_DELAY=1s",
        Duration::from_secs(5),
    )
    .await;
    let run_id = rig.register(pb::RunKind::Apply, "staging", 2, None).await;
    rig.request(&run_id).await;
    rig.wait_for_log(&run_id, "Creating...", WITHIN).await;
    rig.fence().await;
    proxy.set(Fault::Cut);
    rig.wait_until("errored.tfstate spooled", WITHIN, || async {
        !rig.spooled().is_empty()
    })
    .await;
    let spooled = rig.spooled();
    assert_eq!(spooled.len(), 1, "{spooled:?}");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&spooled[0]), 0o600);
    assert_eq!(mode(rig.spool.path()), 0o700);
    assert_eq!(rig.quarantined(&run_id).await, (Vec::new(), 0));
    runner.shutdown().await;
    assert_eq!(rig.spooled(), spooled, "the spool kept the file");

    proxy.heal();
    let restarted = runner_via(&rig, &proxy, &instance, "", Duration::from_secs(5)).await;
    // Handed in during the start, before any work was taken.
    assert!(rig.spooled().is_empty(), "{:?}", rig.spooled());
    let (rows, objects) = rig.quarantined(&run_id).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].0, 1);
    assert_eq!(objects, 1);
    restarted.shutdown().await;
}
