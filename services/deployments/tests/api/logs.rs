//! Log lines of the steps' runs: published on `cairn.runlog.<run_id>` as the runner does,
//! stored for the step whose run it is (idempotent on run, attempt and seq, bounded per
//! step by CAIRN_STEP_LOG_LINES, 1000 in these tests), returned by GetLogs in order and
//! streamed by WatchDeployment.
use std::time::Duration;

use cairn_auth::Role;
use cairn_proto::deployments as pb;
use cairn_proto::runner::RunLogLine;
use pb::deployment_event::Event;
use prost::Message;
use tonic::Code;
use uuid::Uuid;

use crate::helpers::*;
use crate::watch::{next, queued, sql, take, watch_from};

/// Publishes a line on the run's log subject (waits for the stream's acknowledgement).
async fn publish(app: &TestApp, run_id: Uuid, attempt: u32, seq: u64, text: &str) {
    let ns = cairn_bus::Namespace::with_prefix(&app.nats.prefix).unwrap();
    let line = RunLogLine {
        run_id: run_id.to_string(),
        attempt,
        seq,
        stream: if seq.is_multiple_of(2) {
            "stderr"
        } else {
            "stdout"
        }
        .into(),
        text: text.into(),
    };
    app.nats
        .jetstream
        .publish(
            ns.runlog(&run_id.to_string()).unwrap(),
            line.encode_to_vec().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
}

fn logs_request(app: &TestApp, dep: &pb::Deployment, step_id: &str) -> pb::GetLogsRequest {
    pb::GetLogsRequest {
        tenant_id: app.tenant.to_string(),
        deployment_id: dep.deployment_id.clone(),
        step_id: step_id.into(),
    }
}

/// GetLogs once it holds `n` lines (panics after 30 s).
async fn logs_when(
    app: &TestApp,
    dep: &pb::Deployment,
    step_id: &str,
    n: usize,
) -> pb::GetLogsResponse {
    let (_, mut d) = app.clients_for(app.tenant, Role::Viewer);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = d
            .get_logs(logs_request(app, dep, step_id))
            .await
            .unwrap()
            .into_inner();
        if got.lines.len() >= n {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {n} lines stored",
            got.lines.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The apply step of `resource`, given run `run_id` (as the worker records it).
async fn step_with_run(
    app: &TestApp,
    dep: &pb::Deployment,
    resource: &str,
    run_id: Uuid,
) -> String {
    let step = dep
        .steps
        .iter()
        .find(|s| s.kind == pb::StepKind::Apply as i32 && s.resource == resource)
        .unwrap()
        .step_id
        .clone();
    sql(app, &format!(
        "UPDATE steps SET status = 'running', run_id = '{run_id}', tries = 1 WHERE step_id = '{step}'"
    ))
    .await;
    step
}

#[tokio::test]
async fn lines_land_in_get_logs_in_order_once_and_in_the_watch() {
    let app = spawn_app().await;
    let dep = queued(&app).await;
    let run = Uuid::now_v7();
    let step = step_with_run(&app, &dep, "network", run).await;
    let (_, mut d) = app.clients_for(app.tenant, Role::Viewer);
    let mut stream = watch_from(&mut d, &app, &dep, 0).await;
    // Up to the step's new run: the request's events and the change above.
    let before = take(&mut stream, 2 + dep.steps.len()).await;

    // A line of a run no step has comes first: acknowledged and dropped.
    publish(&app, Uuid::now_v7(), 1, 1, "nobody's line").await;
    for seq in 1..=5 {
        publish(&app, run, 1, seq, &format!("line {seq}")).await;
    }
    // Line 3 again (a redelivery, or the runner publishing twice): stored once.
    publish(&app, run, 1, 3, "line 3").await;
    // The run's second attempt (the runner was replaced): after the first one's lines.
    publish(&app, run, 2, 1, "attempt 2 line 1").await;

    let got = logs_when(&app, &dep, &step, 6).await;
    let lines: Vec<(u32, u64, &str, &str)> = got
        .lines
        .iter()
        .map(|l| (l.attempt, l.seq, l.stream.as_str(), l.text.as_str()))
        .collect();
    assert_eq!(
        lines,
        [
            (1, 1, "stdout", "line 1"),
            (1, 2, "stderr", "line 2"),
            (1, 3, "stdout", "line 3"),
            (1, 4, "stderr", "line 4"),
            (1, 5, "stdout", "line 5"),
            (2, 1, "stdout", "attempt 2 line 1"),
        ]
    );
    assert!(got.lines.iter().all(|l| l.step_id == step));
    assert!(!got.truncated);

    // Each stored line is an event, at the next positions.
    let logs = take(&mut stream, 6).await;
    let texts: Vec<String> = logs
        .iter()
        .map(|e| match e.event.as_ref().unwrap() {
            Event::Log(l) => {
                assert_eq!(l.step_id, step);
                l.text.clone()
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        texts,
        [
            "line 1",
            "line 2",
            "line 3",
            "line 4",
            "line 5",
            "attempt 2 line 1"
        ]
    );
    let first = before.last().unwrap().position + 1;
    assert_eq!(
        logs.iter().map(|e| e.position).collect::<Vec<_>>(),
        (first..first + 6).collect::<Vec<_>>()
    );
    // The duplicate and the unknown run's line are nowhere, and nothing else arrives.
    assert!(
        tokio::time::timeout(Duration::from_millis(500), stream.message())
            .await
            .is_err()
    );
    assert_eq!(app.count("step_logs").await, 6);
    assert_eq!(
        app.count_of("SELECT count(*) FROM deployments.deployment_events WHERE kind = 'log'")
            .await,
        6
    );
    drop(stream);

    // Another step's lines are not this step's.
    let (_, mut operator) = app.clients();
    let other_step = dep.steps.iter().find(|s| s.step_id != step).unwrap();
    let theirs = operator
        .get_logs(logs_request(&app, &dep, &other_step.step_id))
        .await
        .unwrap()
        .into_inner();
    assert!(theirs.lines.is_empty() && !theirs.truncated);
}

#[tokio::test]
async fn the_bound_keeps_the_first_and_the_last_lines_and_says_so() {
    let app = spawn_app().await;
    let dep = queued(&app).await;
    let run = Uuid::now_v7();
    let step = step_with_run(&app, &dep, "database", run).await;
    // 1000 lines kept of 1010: the first 500 and the last 500.
    for seq in 1..=1010u64 {
        publish(&app, run, 1, seq, &format!("line {seq}")).await;
    }
    // The last line stored means all were handled (one consumer handles them in order).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let got = loop {
        let got = logs_when(&app, &dep, &step, 1000).await;
        if got.lines.last().map(|l| l.seq) == Some(1010) {
            break got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "line 1010 never stored"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(got.truncated);
    let seqs: Vec<u64> = got.lines.iter().map(|l| l.seq).collect();
    let expected: Vec<u64> = (1..=500).chain(511..=1010).collect();
    assert_eq!(seqs, expected);

    // A watcher from the start still sees 1010 line events at gapless positions; the
    // dropped ones say so.
    let (_, mut d) = app.clients();
    let mut stream = watch_from(&mut d, &app, &dep, 0).await;
    let all = take(&mut stream, 2 + dep.steps.len() + 1010).await;
    assert_eq!(
        all.iter().map(|e| e.position).collect::<Vec<_>>(),
        (1..=all.len() as u64).collect::<Vec<_>>()
    );
    let dropped: Vec<u64> = all
        .iter()
        .filter_map(|e| match e.event.as_ref().unwrap() {
            Event::Log(l) if l.text.starts_with("(line dropped") => {
                assert_eq!(l.stream, "runner");
                Some(l.seq)
            }
            _ => None,
        })
        .collect();
    assert_eq!(dropped, (501..=510).collect::<Vec<_>>());
    assert!(
        tokio::time::timeout(Duration::from_millis(300), next(&mut stream))
            .await
            .is_err()
    );
}

/// Lines that wait while a transaction holds the deployment's event counter (a status
/// change holds it from its UPDATE of the deployment to its commit; a step transition's
/// event takes it at its commit) are then taken together: each is stored once (a
/// redelivered copy among them too), in the order they were published, at gapless
/// positions after the transition's event.
#[tokio::test]
async fn lines_held_up_by_a_step_transition_are_stored_once_in_order() {
    use sqlx::Connection;
    let app = spawn_app().await;
    let dep = queued(&app).await;
    let run = Uuid::now_v7();
    let step = step_with_run(&app, &dep, "queue", run).await;
    let deployment_id = Uuid::parse_str(&dep.deployment_id).unwrap();

    // A transaction with a step transition that holds the deployment's row (and so its
    // counter) until it commits.
    let mut holder = app.admin_conn().await;
    let mut tx = holder.begin().await.unwrap();
    sqlx::query("UPDATE deployments.steps SET reason = 'held' WHERE step_id = $1::uuid")
        .bind(&step)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("SELECT 1 FROM deployments.deployments WHERE deployment_id = $1 FOR UPDATE")
        .bind(deployment_id)
        .execute(&mut *tx)
        .await
        .unwrap();
    publish(&app, run, 1, 1, "line 1").await;
    // The consumer's transaction for line 1 now waits for the counter.
    let waiting = "SELECT count(*) FROM pg_stat_activity
                    WHERE wait_event_type = 'Lock' AND query LIKE '%deployment_events_reserve%'";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while app.count_of(waiting).await == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the log consumer never waited for the counter"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for seq in 2..=6 {
        publish(&app, run, 1, seq, &format!("line {seq}")).await;
    }
    // A copy of line 1 (still uncommitted) and of line 4, among the waiting ones.
    publish(&app, run, 1, 1, "line 1").await;
    publish(&app, run, 1, 4, "line 4").await;
    publish(&app, run, 1, 7, "line 7").await;
    tx.commit().await.unwrap();

    let got = logs_when(&app, &dep, &step, 7).await;
    let seqs: Vec<u64> = got.lines.iter().map(|l| l.seq).collect();
    assert_eq!(seqs, (1..=7).collect::<Vec<_>>());
    assert_eq!(
        app.count_of(&format!(
            "SELECT count(*) FROM deployments.deployment_events
                  WHERE kind = 'log' AND deployment_id = '{deployment_id}'"
        ))
        .await,
        7
    );
    // Gapless positions, the transition's event before the lines, the lines in order.
    let (_, mut d) = app.clients();
    let mut stream = watch_from(&mut d, &app, &dep, 0).await;
    let all = take(&mut stream, 2 + dep.steps.len() + 1 + 7).await;
    assert_eq!(
        all.iter().map(|e| e.position).collect::<Vec<_>>(),
        (1..=all.len() as u64).collect::<Vec<_>>()
    );
    let texts: Vec<String> = all
        .iter()
        .filter_map(|e| match e.event.as_ref().unwrap() {
            Event::Log(l) => Some(l.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        (1..=7).map(|i| format!("line {i}")).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn logs_of_another_tenant_or_an_unknown_step_are_not_found() {
    let app = spawn_app().await;
    let dep = queued(&app).await;
    let step = dep.steps[0].step_id.clone();
    let other = Uuid::new_v4();
    let (_, mut theirs) = app.clients_for(other, Role::Admin);
    let err = theirs
        .get_logs(pb::GetLogsRequest {
            tenant_id: other.to_string(),
            deployment_id: dep.deployment_id.clone(),
            step_id: step.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let (_, mut d) = app.clients_for(app.tenant, Role::Viewer);
    let err = d
        .get_logs(logs_request(&app, &dep, &Uuid::now_v7().to_string()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = d
        .get_logs(logs_request(&app, &dep, "not-an-id"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}
