//! WatchDeployment: the events of a deployment (its status, its steps' views, its log
//! lines) at gapless positions written by database triggers, so a client that reconnects
//! from its last position misses nothing and sees nothing twice. Step changes are made
//! here with plain SQL, as the workflow worker makes them: the triggers fire on every
//! UPDATE, whoever writes.
use std::time::Duration;

use cairn_auth::Role;
use cairn_proto::deployments as pb;
use pb::deployment_event::Event;
use tonic::Code;
use uuid::Uuid;

use crate::helpers::*;

/// Runs `sql` (one or more statements) in the deployments schema as the superuser, as the
/// workflow worker would change its rows.
pub async fn sql(app: &TestApp, sql: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SET search_path = deployments; {sql}"
    )))
    .execute(&mut app.admin_conn().await)
    .await
    .unwrap();
}

/// A connection as the runtime role the service uses, in the deployments schema.
pub async fn runtime_conn(url: &str) -> sqlx::PgConnection {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql("SET search_path = deployments")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

/// A queued deployment of a fresh `shop` instance with web-stack's steps, written with SQL
/// as the request phase writes it but without its job: the workflow worker (in the same
/// binary) never picks it up, so only this test moves it.
pub async fn queued(app: &TestApp) -> pb::Deployment {
    let shop = app.create_instance("shop", "staging").await;
    let id = Uuid::now_v7();
    sql(
        app,
        &format!(
            "INSERT INTO deployments (deployment_id, tenant_id, instance_id, kind, status,
             requested_by, instance_name, target_id, environment, template_id, template_version,
             parameters, instance_status_before)
         SELECT '{id}', tenant_id, instance_id, 'deploy', 'queued', 'test-user', name, target_id,
                environment, template_id, template_version, parameters, status
           FROM instances WHERE instance_id = '{}';
         INSERT INTO steps (step_id, deployment_id, position, kind, resource, depends_on, status)
         SELECT gen_random_uuid(), '{id}', p, k, r, d, s
           FROM (VALUES (1, 'resolve', '', '{{}}'::text[], 'succeeded'),
                        (2, 'approval', '', '{{}}', 'pending'),
                        (3, 'apply', 'network', '{{}}', 'pending'),
                        (4, 'apply', 'database', '{{network}}', 'pending'),
                        (5, 'apply', 'queue', '{{network}}', 'pending'),
                        (6, 'apply', 'web', '{{network,database,queue}}', 'pending'),
                        (7, 'verify', 'network', '{{}}', 'pending'),
                        (8, 'verify', 'database', '{{}}', 'pending')) AS v(p, k, r, d, s)",
            shop.instance_id
        ),
    )
    .await;
    let (_, mut d) = app.clients();
    d.get_deployment(pb::GetDeploymentRequest {
        tenant_id: app.tenant.to_string(),
        deployment_id: id.to_string(),
    })
    .await
    .unwrap()
    .into_inner()
    .deployment
    .unwrap()
}

pub fn watch_request(
    app: &TestApp,
    dep: &pb::Deployment,
    after: u64,
) -> pb::WatchDeploymentRequest {
    pb::WatchDeploymentRequest {
        tenant_id: app.tenant.to_string(),
        deployment_id: dep.deployment_id.clone(),
        after,
    }
}

/// Opens a watch of `dep` after position `after` with `client`'s token.
pub async fn watch_from(
    client: &mut Deployments,
    app: &TestApp,
    dep: &pb::Deployment,
    after: u64,
) -> tonic::Streaming<pb::DeploymentEvent> {
    client
        .watch_deployment(watch_request(app, dep, after))
        .await
        .unwrap()
        .into_inner()
}

/// The next event of `stream` (panics after 10 s).
pub async fn next(
    stream: &mut tonic::Streaming<pb::DeploymentEvent>,
) -> Option<pb::DeploymentEvent> {
    tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("an event within 10 s")
        .unwrap()
}

/// `n` events of `stream`.
pub async fn take(
    stream: &mut tonic::Streaming<pb::DeploymentEvent>,
    n: usize,
) -> Vec<pb::DeploymentEvent> {
    let mut out = Vec::new();
    while out.len() < n {
        out.push(next(stream).await.expect("the stream ended early"));
    }
    out
}

/// Every event until the stream ends.
pub async fn to_end(
    stream: &mut tonic::Streaming<pb::DeploymentEvent>,
) -> Vec<pb::DeploymentEvent> {
    let mut out = Vec::new();
    while let Some(e) = next(stream).await {
        out.push(e);
    }
    out
}

fn step_of<'a>(dep: &'a pb::Deployment, kind: pb::StepKind, resource: &str) -> &'a pb::Step {
    dep.steps
        .iter()
        .find(|s| s.kind == kind as i32 && s.resource == resource)
        .unwrap()
}

fn summary(e: &pb::DeploymentEvent) -> String {
    match e.event.as_ref().unwrap() {
        Event::Status(s) => format!("status {:?}", pb::DeploymentStatus::try_from(*s).unwrap()),
        Event::Step(s) => format!(
            "step {} {:?} {:?}",
            s.resource,
            pb::StepStatus::try_from(s.status).unwrap(),
            s.reason
        ),
        Event::Log(l) => format!("log {} {}", l.seq, l.text),
    }
}

#[tokio::test]
async fn a_watcher_that_reconnects_from_its_last_position_gets_every_event_once() {
    let app = spawn_app().await;
    let dep = queued(&app).await;
    let network = step_of(&dep, pb::StepKind::Apply, "network")
        .step_id
        .clone();
    let database = step_of(&dep, pb::StepKind::Apply, "database")
        .step_id
        .clone();
    let id = &dep.deployment_id;
    // A viewer may watch.
    let (_, mut viewer) = app.clients_for(app.tenant, Role::Viewer);

    // From the start: the request's status and every step's first view.
    let mut stream = watch_from(&mut viewer, &app, &dep, 0).await;
    let first = take(&mut stream, 1 + dep.steps.len()).await;
    assert_eq!(summary(&first[0]), "status Queued");
    assert_eq!(first[0].position, 1);
    let Some(Event::Step(s)) = &first[1].event else {
        panic!("{:?}", first[1])
    };
    assert_eq!(s.kind, pb::StepKind::Resolve as i32);
    // Every step's first view once, in the steps' order (taken together at their INSERT,
    // migration 0017), at the positions after the status.
    let viewed: Vec<&str> = first[1..]
        .iter()
        .map(|e| match &e.event {
            Some(Event::Step(s)) => s.step_id.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    let in_order: Vec<&str> = dep.steps.iter().map(|s| s.step_id.as_str()).collect();
    assert_eq!(viewed, in_order);

    // Live: the worker starts the deployment and the network's apply.
    sql(
        &app,
        &format!("UPDATE deployments SET status = 'running' WHERE deployment_id = '{id}'"),
    )
    .await;
    sql(&app, &format!(
        "UPDATE steps SET status = 'running', tries = 1, started_at = now(), run_id = '{}' WHERE step_id = '{network}'",
        Uuid::now_v7()
    ))
    .await;
    let live = take(&mut stream, 2).await;
    assert_eq!(summary(&live[0]), "status Running");
    let Some(Event::Step(s)) = &live[1].event else {
        panic!("{:?}", live[1])
    };
    assert_eq!(
        (s.step_id.as_str(), s.tries, s.resource.as_str()),
        (network.as_str(), 1, "network")
    );
    assert_eq!(s.status, pb::StepStatus::Running as i32);
    assert!(s.started_at.is_some() && !s.run_id.is_empty());
    assert_eq!(s.kind, pb::StepKind::Apply as i32);
    let last_seen = live[1].position;
    // The client goes away.
    drop(stream);

    // While no one watches: an update that changes no part of a step's view is no event;
    // these are.
    sql(
        &app,
        &format!("UPDATE steps SET position = position WHERE step_id = '{network}'"),
    )
    .await;
    sql(&app, &format!(
        "UPDATE steps SET status = 'succeeded', finished_at = now() WHERE step_id = '{network}';
         UPDATE steps SET status = 'running' WHERE step_id = '{database}';
         UPDATE steps SET plan_add = 1, plan_change = 0, plan_destroy = 0, plan_risk = 'low' WHERE step_id = '{database}'"
    ))
    .await;

    // Reconnect after the last position seen: the missed events, once, in order.
    let mut stream = watch_from(&mut viewer, &app, &dep, last_seen).await;
    let missed = take(&mut stream, 3).await;
    assert_eq!(
        missed.iter().map(summary).collect::<Vec<_>>(),
        [
            "step network Succeeded \"\"",
            "step database Running \"\"",
            "step database Running \"\"",
        ]
    );
    let Some(Event::Step(s)) = &missed[2].event else {
        panic!()
    };
    assert_eq!(s.plan.as_ref().unwrap().risk, "low");

    // Live again, up to the end: the stream ends after the terminal status and what the
    // same transaction wrote.
    sql(
        &app,
        &format!(
            "UPDATE steps SET status = 'failed', reason = 'boom' WHERE step_id = '{database}';
         UPDATE deployments SET status = 'failed', finished_at = now() WHERE deployment_id = '{id}';
         UPDATE steps SET status = 'skipped', reason = 'upstream database failed'
          WHERE deployment_id = '{id}' AND status = 'pending'"
        ),
    )
    .await;
    let rest = to_end(&mut stream).await;
    assert_eq!(summary(&rest[0]), "step database Failed \"boom\"");
    assert_eq!(summary(&rest[1]), "status Failed");
    assert!(rest.len() > 2);
    assert!(
        rest[2..]
            .iter()
            .all(|e| summary(e).contains("Skipped \"upstream database failed\""))
    );

    // Everything seen across both connections: positions 1, 2, … without a gap or a repeat,
    // the same as one watch from the start of the finished deployment.
    let mut all: Vec<pb::DeploymentEvent> = first;
    all.extend(live);
    all.extend(missed);
    all.extend(rest);
    let positions: Vec<u64> = all.iter().map(|e| e.position).collect();
    let expected: Vec<u64> = (1..=all.len() as u64).collect();
    assert_eq!(positions, expected);
    let mut replay = watch_from(&mut viewer, &app, &dep, 0).await;
    let replayed = to_end(&mut replay).await;
    assert_eq!(replayed, all);
    // From the last position of a finished deployment: nothing, and the stream ends.
    let mut after_end = watch_from(&mut viewer, &app, &dep, all.len() as u64).await;
    assert!(next(&mut after_end).await.is_none());
}

#[tokio::test]
async fn the_stream_ends_at_a_terminal_status_and_waits_until_then() {
    let app = spawn_app().await;
    let dep = queued(&app).await;
    let (_, mut d) = app.clients();
    let mut stream = watch_from(&mut d, &app, &dep, 0).await;
    let first = take(&mut stream, 1 + dep.steps.len()).await;
    // Caught up and nothing happens: the stream stays open.
    assert!(
        tokio::time::timeout(Duration::from_millis(700), stream.message())
            .await
            .is_err(),
        "the stream of an active deployment must stay open"
    );
    // Cancelling ends the deployment (its status, then its pending steps, in one
    // transaction, as Cancel does); the watcher sees all of it, then the end.
    let id = &dep.deployment_id;
    sql(&app, &format!(
        "UPDATE deployments SET status = 'cancelled', finished_at = now() WHERE deployment_id = '{id}';
         UPDATE steps SET status = 'cancelled', reason = 'cancelled by test-user'
          WHERE deployment_id = '{id}' AND status = 'pending'"
    ))
    .await;
    let rest = to_end(&mut stream).await;
    assert_eq!(summary(&rest[0]), "status Cancelled");
    let pending = dep
        .steps
        .iter()
        .filter(|s| s.status == pb::StepStatus::Pending as i32)
        .count();
    assert_eq!(
        rest.len(),
        1 + pending,
        "{:?}",
        rest.iter().map(summary).collect::<Vec<_>>()
    );
    assert_eq!(
        rest.last().unwrap().position,
        (first.len() + rest.len()) as u64
    );
}

#[tokio::test]
async fn another_tenants_deployment_is_not_found_and_a_bad_position_is_refused() {
    let app = spawn_app().await;
    let dep = queued(&app).await;
    let other = Uuid::new_v4();
    let (_, mut theirs) = app.clients_for(other, Role::Admin);
    let err = theirs
        .watch_deployment(pb::WatchDeploymentRequest {
            tenant_id: other.to_string(),
            deployment_id: dep.deployment_id.clone(),
            after: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    // Their token, our tenant: not theirs to see either.
    let err = theirs
        .watch_deployment(watch_request(&app, &dep, 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let (_, mut d) = app.clients();
    let err = d
        .watch_deployment(watch_request(&app, &dep, u64::MAX))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn concurrent_writers_commit_their_positions_in_order() {
    let app = spawn_app().await;
    let dep = queued(&app).await;
    let (_, mut d) = app.clients_for(app.tenant, Role::Viewer);
    let mut stream = watch_from(&mut d, &app, &dep, 0).await;
    let first = take(&mut stream, 1 + dep.steps.len()).await;

    // Eight writers, each changing its own step 25 times in small transactions, at once,
    // as the runtime role the service uses. A position committed before a lower one would
    // let the watcher skip the lower one for good.
    const WRITERS: usize = 8;
    const CHANGES: usize = 25;
    let mut writers = tokio::task::JoinSet::new();
    for step in dep.steps.iter().take(WRITERS) {
        let url = app.db.runtime_url.clone();
        let step_id = step.step_id.clone();
        writers.spawn(async move {
            let mut conn = runtime_conn(&url).await;
            for i in 1..=CHANGES {
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "UPDATE steps SET tries = {i} WHERE step_id = '{step_id}'"
                )))
                .execute(&mut conn)
                .await
                .unwrap();
            }
        });
    }
    let changes = take(&mut stream, WRITERS * CHANGES).await;
    while let Some(done) = writers.join_next().await {
        done.unwrap();
    }
    let positions: Vec<u64> = changes.iter().map(|e| e.position).collect();
    let start = first.len() as u64 + 1;
    assert_eq!(
        positions,
        (start..start + (WRITERS * CHANGES) as u64).collect::<Vec<_>>()
    );
    // Each step's changes arrive in the order they were made.
    for step in dep.steps.iter().take(WRITERS) {
        let tries: Vec<u32> = changes
            .iter()
            .filter_map(|e| match e.event.as_ref().unwrap() {
                Event::Step(s) if s.step_id == step.step_id => Some(s.tries),
                _ => None,
            })
            .collect();
        assert_eq!(tries, (1..=CHANGES as u32).collect::<Vec<_>>());
    }
}

#[tokio::test]
async fn the_service_role_cannot_skip_the_triggers() {
    let app = spawn_app().await;
    let dep = queued(&app).await;
    let mut conn = runtime_conn(&app.db.runtime_url).await;
    // Neither switching triggers off for the session nor for the table is allowed to the
    // role the service runs as (only the owner or a superuser may).
    for refused in [
        "SET session_replication_role = replica",
        "ALTER TABLE steps DISABLE TRIGGER USER",
        "ALTER TABLE deployments DISABLE TRIGGER deployment_events_status",
        "DROP TRIGGER deployment_events_step_update ON steps",
    ] {
        let err = sqlx::raw_sql(sqlx::AssertSqlSafe(refused.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap_err();
        let code = err
            .as_database_error()
            .and_then(|e| e.code())
            .unwrap_or_default();
        assert!(code == "42501" || code == "42809", "{refused}: {err}");
    }
    // And its plain updates are events.
    let before: i64 =
        sqlx::query_scalar("SELECT event_seq FROM deployments WHERE deployment_id = $1::uuid")
            .bind(&dep.deployment_id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    sqlx::query(
        "UPDATE steps SET status = 'running' WHERE deployment_id = $1::uuid AND status = 'pending'",
    )
    .bind(&dep.deployment_id)
    .execute(&mut conn)
    .await
    .unwrap();
    let after: i64 =
        sqlx::query_scalar("SELECT count(*) FROM deployment_events WHERE deployment_id = $1::uuid")
            .bind(&dep.deployment_id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    let pending = dep
        .steps
        .iter()
        .filter(|s| s.status == pb::StepStatus::Pending as i32)
        .count() as i64;
    assert_eq!(after, before + pending);
}

/// A change takes its position when its transaction commits (migration 0016): an open
/// transaction that changed a step holds nothing another writer of the deployment waits
/// for, and the events of one transaction keep the order of its statements (a step's new
/// view before the deployment's status written after it).
#[tokio::test]
async fn a_change_takes_its_position_at_commit_in_statement_order() {
    use sqlx::Connection;
    let app = spawn_app().await;
    let dep = queued(&app).await;
    let (_, mut d) = app.clients_for(app.tenant, Role::Viewer);
    let mut stream = watch_from(&mut d, &app, &dep, 0).await;
    let first = take(&mut stream, 1 + dep.steps.len()).await;
    let (network, queue) = (
        step_of(&dep, pb::StepKind::Apply, "network"),
        step_of(&dep, pb::StepKind::Apply, "queue"),
    );
    let mut open = runtime_conn(&app.db.runtime_url).await;
    let mut tx = open.begin().await.unwrap();
    sqlx::query("UPDATE steps SET status = 'running' WHERE step_id = $1::uuid")
        .bind(&network.step_id)
        .execute(&mut *tx)
        .await
        .unwrap();
    // Another writer of the same deployment commits while that transaction is open. Had
    // the open one taken the deployment's counter at its UPDATE, this would wait for it and
    // fail at the lock timeout.
    let mut other = runtime_conn(&app.db.runtime_url).await;
    sqlx::raw_sql("SET lock_timeout = '20s'; SET statement_timeout = '20s'")
        .execute(&mut other)
        .await
        .unwrap();
    sqlx::query("UPDATE steps SET reason = 'meanwhile' WHERE step_id = $1::uuid")
        .bind(&queue.step_id)
        .execute(&mut other)
        .await
        .expect("a writer waited for another transaction's uncommitted step change");
    let meanwhile = take(&mut stream, 1).await;
    assert_eq!(summary(&meanwhile[0]), "step queue Pending \"meanwhile\"");
    assert_eq!(meanwhile[0].position, first.len() as u64 + 1);

    // The open transaction goes on: the step again, then the deployment's status.
    sqlx::query("UPDATE steps SET status = 'succeeded' WHERE step_id = $1::uuid")
        .bind(&network.step_id)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("UPDATE deployments SET status = 'running' WHERE deployment_id = $1::uuid")
        .bind(&dep.deployment_id)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let rest = take(&mut stream, 3).await;
    assert_eq!(
        rest.iter().map(summary).collect::<Vec<_>>(),
        [
            "step network Running \"\"",
            "step network Succeeded \"\"",
            "status Running",
        ]
    );
    assert_eq!(
        rest.iter().map(|e| e.position).collect::<Vec<_>>(),
        (first.len() as u64 + 2..first.len() as u64 + 5).collect::<Vec<_>>()
    );
}

/// Waits until `woken` carries `id`, sending the deployment events notification for it
/// through `direct` until then (a notification sent before the listener listens is lost,
/// as it would be in production: the nil wake-up after a (re)connection covers those).
async fn woken_for(
    woken: &mut tokio::sync::broadcast::Receiver<Uuid>,
    direct: &mut sqlx::PgConnection,
    id: Uuid,
    what: &str,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(cairn_deployments::store::events::EVENTS_CHANNEL)
            .bind(id.to_string())
            .execute(&mut *direct)
            .await
            .unwrap();
        let round = tokio::time::Instant::now() + Duration::from_millis(200);
        while let Ok(got) = tokio::time::timeout_at(round, woken.recv()).await {
            if got.ok() == Some(id) {
                return;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}");
    }
}

/// Waits for the hub's nil wake-up: its listener (re)connected.
async fn listening(woken: &mut tokio::sync::broadcast::Receiver<Uuid>, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match tokio::time::timeout_at(deadline, woken.recv()).await {
            Ok(Ok(id)) if id.is_nil() => return,
            Ok(_) => {}
            Err(_) => panic!("{what}"),
        }
    }
}

/// The watch hub's listening connection gone silent (PostgreSQL's host lost without a FIN or
/// RST: nothing arrives on it, not even an error) is found by the hub's heartbeat and
/// replaced: the watchers are woken, and a deployment's commits wake its watchers again,
/// without waiting for the kernel to give the connection up (~15 min, or never).
#[tokio::test]
async fn a_watch_listener_gone_silent_is_replaced_and_wakes_watchers_again() {
    use cairn_deployments::app::watch::{Liveness, WatchHub};
    use sqlx::Connection as _;

    let db = cairn_testkit::fresh_database().await;
    let proxy = cairn_testkit::FaultProxy::start_for_url(&db.runtime_url)
        .await
        .unwrap();
    let pool = cairn_db::connect(&cairn_db::PoolSettings::new(
        proxy.url_for(&db.runtime_url),
        "public",
    ))
    .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let liveness = Liveness {
        idle: Duration::from_millis(200),
        probe: Duration::from_millis(300),
    };
    let (hub, listener) = WatchHub::with_liveness(pool, cancel.clone(), liveness);
    let mut woken = hub.subscribe();
    let listener = tokio::spawn(listener);
    let mut direct = sqlx::PgConnection::connect(&db.runtime_url).await.unwrap();

    listening(&mut woken, "the hub never listened").await;
    woken_for(
        &mut woken,
        &mut direct,
        Uuid::new_v4(),
        "a commit did not wake its watchers",
    )
    .await;
    // Quiet for several heartbeats: the healthy connection is kept (a replacement would
    // wake everyone).
    let quiet = tokio::time::Instant::now() + (liveness.idle + liveness.probe) * 4;
    while let Ok(got) = tokio::time::timeout_at(quiet, woken.recv()).await {
        assert_ne!(
            got.ok(),
            Some(Uuid::nil()),
            "a healthy listening connection was given up"
        );
    }
    woken_for(
        &mut woken,
        &mut direct,
        Uuid::new_v4(),
        "a commit after a quiet while did not wake its watchers",
    )
    .await;

    proxy.stall_open_connections();
    listening(
        &mut woken,
        "the hub kept listening on a silent connection: nobody was woken",
    )
    .await;
    woken_for(
        &mut woken,
        &mut direct,
        Uuid::new_v4(),
        "after the silent connection was replaced, a commit did not wake its watchers",
    )
    .await;

    cancel.cancel();
    listener.await.unwrap();
}
