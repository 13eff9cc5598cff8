//! The runner's domain metrics, scraped from the `/metrics` listener of a `cairn-runner
//! serve` process (`CAIRN_METRICS_ADDR=127.0.0.1:0`, the address from its log): runs by
//! kind and outcome, each tofu command's duration by command and result, run queue
//! redeliveries and the queue's depth.
use std::net::SocketAddr;
use std::process::Stdio;

use cairn_proto::state as pb;
use cairn_runner::metrics::{QUEUE_PENDING, QUEUE_REDELIVERIES, RUNS, TOFU_COMMAND_DURATION};
use cairn_testkit::metrics::{sample, scrape, scrape_until};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::rig::{self, TARGET};
use crate::{WITHIN, helpers, outcome};

/// `cairn-runner serve` serving metrics on a free port; the process and that address.
async fn runner_with_metrics(rig: &rig::Rig) -> (Child, SocketAddr) {
    let instance = helpers::instance("metrics").to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn-runner"))
        .arg("serve")
        .envs(rig.env(&instance, ""))
        .env("CAIRN_METRICS_ADDR", "127.0.0.1:0")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = tokio::time::timeout(WITHIN, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let Ok(json) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if let Some(addr) = json
                .pointer("/fields/metrics_addr")
                .or_else(|| json.get("metrics_addr"))
            {
                return addr.as_str().unwrap().parse::<SocketAddr>().unwrap();
            }
        }
        panic!("the runner exited before serving metrics");
    })
    .await
    .expect("the runner did not report its metrics address");
    // Keep reading: a full pipe would block the runner's logging.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

fn runs(text: &str, kind: &str, outcome: &str) -> f64 {
    sample(text, RUNS, &[("kind", kind), ("outcome", outcome)])
}

fn commands(text: &str, labels: &[(&str, &str)]) -> f64 {
    sample(text, &format!("{TOFU_COMMAND_DURATION}_count"), labels)
}

/// A root config whose module is not there: `tofu init` fails.
fn missing_module() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "terraform": {"backend": {"http": {}}},
        "module": {"net1": {"source": "./modules/local/no-such-module"}}
    }))
    .unwrap()
}

#[tokio::test]
async fn runs_tofu_commands_and_redeliveries_are_measured() {
    let rig = rig::rig(std::time::Duration::from_secs(30)).await;
    let (mut runner, metrics) = runner_with_metrics(&rig).await;
    let before = scrape(metrics).await.unwrap();
    let delta =
        |after: &str, kind, outcome| runs(after, kind, outcome) - runs(&before, kind, outcome);

    // A plan requested twice: it runs once. The other request meets it running (handed back
    // to the queue, delivered again) or finished (its result published again).
    let plan_id = rig.register(pb::RunKind::Plan, "staging", 1, None).await;
    rig.request(&plan_id).await;
    rig.request(&plan_id).await;
    let planned = rig.result(&plan_id, WITHIN).await;
    assert_eq!(outcome(&planned), pb::RunOutcome::Succeeded, "{planned:#?}");
    let redelivered = scrape_until(metrics, WITHIN, |t| {
        sample(t, QUEUE_REDELIVERIES, &[]) > sample(&before, QUEUE_REDELIVERIES, &[])
    })
    .await
    .unwrap();

    // Its apply, and a plan whose module is missing.
    let (_, applied) = rig
        .run(pb::RunKind::Apply, "staging", 1, Some(&plan_id))
        .await;
    assert_eq!(outcome(&applied), pb::RunOutcome::Succeeded, "{applied:#?}");
    let (_, broken) = rig
        .run_root(pb::RunKind::Plan, "staging", missing_module(), None)
        .await;
    assert_eq!(outcome(&broken), pb::RunOutcome::Failed, "{broken:#?}");

    let after = scrape_until(metrics, WITHIN, |t| {
        delta(t, "apply", "succeeded") >= 1.0 && delta(t, "plan", "failed") >= 1.0
    })
    .await
    .unwrap();
    assert_eq!(delta(&after, "plan", "succeeded"), 1.0, "{after}");
    assert_eq!(delta(&after, "apply", "succeeded"), 1.0, "{after}");
    assert_eq!(delta(&after, "plan", "failed"), 1.0, "{after}");
    for outcome in [
        "error",
        "superseded",
        "cancelled",
        "timed_out",
        "interrupted",
    ] {
        assert_eq!(
            sample(&after, RUNS, &[("outcome", outcome)]),
            sample(&before, RUNS, &[("outcome", outcome)]),
            "{outcome}: {after}"
        );
    }
    assert!(
        sample(&redelivered, QUEUE_REDELIVERIES, &[]) >= 1.0,
        "{redelivered}"
    );

    // tofu: every command timed by command and result. The plan with changes (exit code 2
    // under -detailed-exitcode) is ok; the one failure is the broken run's init.
    let moved = |labels: &[(&str, &str)]| commands(&after, labels) - commands(&before, labels);
    assert_eq!(
        moved(&[("command", "init"), ("result", "ok")]),
        2.0,
        "{after}"
    );
    assert_eq!(
        moved(&[("command", "plan"), ("result", "ok")]),
        1.0,
        "{after}"
    );
    assert_eq!(
        moved(&[("command", "apply"), ("result", "ok")]),
        1.0,
        "{after}"
    );
    assert_eq!(
        moved(&[("command", "init"), ("result", "failed")]),
        1.0,
        "{after}"
    );
    assert_eq!(moved(&[("result", "failed")]), 1.0, "{after}");
    assert!(after.contains(&format!("{TOFU_COMMAND_DURATION}_bucket{{")));
    assert!(after.contains(&format!("# HELP {RUNS}")), "described");

    // The queue's depth as the last delivery reported it: drained.
    assert!(
        after
            .lines()
            .any(|l| l.starts_with(&format!("{QUEUE_PENDING}{{target=\"{TARGET}\"}} "))),
        "{after}"
    );
    assert_eq!(sample(&after, QUEUE_PENDING, &[("target", TARGET)]), 0.0);
    runner.start_kill().unwrap();
    runner.wait().await.unwrap();
}
