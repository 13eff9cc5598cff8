//! The run model: registration, admission, leases, finishing, the root config, saved plans,
//! quarantine and the domain events a run leaves behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
use cairn_auth::Role;
use cairn_contract::RefusalReason;
use cairn_proto::events::{Event, event::Payload};
use cairn_proto::state as pb;
use common::*;
use futures::StreamExt;
use prost::Message;
use tokio::time::Instant;
use tonic::Code;
use uuid::Uuid;

fn short_lease(secs: u64) -> Options {
    Options {
        lease: Duration::from_secs(secs),
        ..Options::default()
    }
}

fn uuid(s: &str) -> Uuid {
    Uuid::parse_str(s).unwrap()
}

fn code<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> Code {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(s) => s.code(),
    }
}

async fn register_req(app: &TestApp, req: pb::RegisterRunRequest) -> Result<bool, tonic::Status> {
    app.runs(&app.service_token())
        .register_run(req)
        .await
        .map(|r| r.into_inner().created)
}

fn with_config(mut req: pb::RegisterRunRequest, config: &[u8]) -> pb::RegisterRunRequest {
    req.root_config = config.to_vec();
    req.config_hash = cairn_storage::sha256_hex(config);
    req
}

async fn inspect(app: &TestApp, state_id: &str) -> pb::InspectStateResponse {
    app.recovery(&app.user_token(Role::Admin))
        .inspect_state(pb::InspectStateRequest {
            state_id: state_id.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
}

async fn admit_raw(app: &TestApp, run: &str) -> pb::AdmitRunResponse {
    app.runs(&app.service_token())
        .admit_run(pb::AdmitRunRequest {
            run_id: run.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
}

/// The test harness's view of an admission.
fn admitted_from(a: &pb::AdmitRunResponse, state_id: &str) -> Admitted {
    let backend = a.backend.clone().unwrap();
    Admitted {
        run_id: a.run_id.clone(),
        attempt: a.attempt,
        state_id: state_id.to_owned(),
        token: a.run_token.clone(),
        address: backend.address,
        lock_address: backend.lock_address,
        base_generation: a.base_generation,
        read_only: a.read_only,
        interrupted: a.interrupted,
        plan_current: a.plan_current,
    }
}

fn to_chrono(t: &prost_types::Timestamp) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap()).unwrap()
}

#[tokio::test]
async fn register_run_is_idempotent_and_checks_what_it_is_given() {
    let app = spawn_app().await;
    let state = app.create_state("register").await;
    let req = app.registration(&state, pb::RunKind::Apply, "dev");

    assert!(register_req(&app, req.clone()).await.unwrap(), "created");
    assert!(
        !register_req(&app, req.clone()).await.unwrap(),
        "the same registration again is a no-op"
    );

    // The same run id with different content.
    let mut changes: Vec<(&str, pb::RegisterRunRequest)> = Vec::new();
    let mut r = req.clone();
    r.environment = "production".to_owned();
    changes.push(("environment", r));
    let mut r = req.clone();
    r.kind = pb::RunKind::Destroy as i32;
    changes.push(("kind", r));
    changes.push((
        "root config",
        with_config(
            req.clone(),
            br#"{"terraform":{"backend":{"http":{}}},"locals":{}}"#,
        ),
    ));
    let mut r = req.clone();
    r.context.as_mut().unwrap().credential_ref = "someone-elses-credential".to_owned();
    changes.push(("credential reference", r));
    let mut r = req.clone();
    r.context
        .as_mut()
        .unwrap()
        .sensitive_variable_refs
        .insert("db_password".to_owned(), "vault:db".to_owned());
    changes.push(("sensitive variable references", r));
    let mut r = req.clone();
    r.context
        .as_mut()
        .unwrap()
        .target_settings
        .insert("base_dir".to_owned(), "/elsewhere".to_owned());
    changes.push(("target settings", r));
    for (what, r) in changes {
        assert_eq!(
            code(register_req(&app, r).await),
            Code::FailedPrecondition,
            "same run id with a different {what}"
        );
    }

    // Wrong config hash.
    let mut r = app.registration(&state, pb::RunKind::Apply, "dev");
    r.config_hash = cairn_storage::sha256_hex(b"something else");
    assert_eq!(code(register_req(&app, r).await), Code::InvalidArgument);

    // Unknown state.
    let r = app.registration(&Uuid::new_v4().to_string(), pb::RunKind::Apply, "dev");
    assert_eq!(code(register_req(&app, r).await), Code::NotFound);

    // A context tenant that does not own the state.
    let mut r = app.registration(&state, pb::RunKind::Apply, "dev");
    r.context.as_mut().unwrap().tenant_id = Uuid::new_v4().to_string();
    assert_eq!(code(register_req(&app, r).await), Code::InvalidArgument);

    // An apply naming a plan run of another state, or a run that is not a plan.
    let other_state = app.create_state("register-other").await;
    let foreign_plan = app.register(&other_state, pb::RunKind::Plan, "dev").await;
    let mut r = app.registration(&state, pb::RunKind::Apply, "dev");
    r.plan_run_id = foreign_plan;
    assert_eq!(code(register_req(&app, r).await), Code::InvalidArgument);
    let mut r = app.registration(&state, pb::RunKind::Apply, "dev");
    r.plan_run_id = req.run_id.clone();
    assert_eq!(code(register_req(&app, r).await), Code::InvalidArgument);

    // Only services register runs.
    let r = app.registration(&state, pb::RunKind::Apply, "dev");
    let as_owner = app.runs(&app.user_token(Role::Owner)).register_run(r).await;
    assert_eq!(code(as_owner), Code::PermissionDenied);

    // None of the refused registrations left a run behind.
    let pool = app.admin_pool().await;
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM runs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(runs, 2, "the first registration and the foreign plan run");
}

#[tokio::test]
async fn create_state_is_idempotent_on_its_key() {
    let app = spawn_app().await;
    let states = app.states(&app.service_token());
    let req = pb::CreateStateRequest {
        tenant_id: app.tenant.to_string(),
        instance_id: app.instance.to_string(),
        physical_name: "db-primary".to_owned(),
    };
    let first = states.clone().create_state(req.clone()).await.unwrap();
    let first = first.into_inner();
    assert!(first.created);
    let s = first.state.unwrap();
    assert_eq!(s.key, "cairn/db-primary.tfstate");
    assert_eq!(s.current_generation, 0);

    let again = states.clone().create_state(req.clone()).await.unwrap();
    let again = again.into_inner();
    assert!(!again.created);
    assert_eq!(again.state.unwrap().state_id, s.state_id);

    let mut other_instance = req.clone();
    other_instance.instance_id = Uuid::new_v4().to_string();
    let r = states.clone().create_state(other_instance).await;
    assert_eq!(code(r), Code::FailedPrecondition);
    let mut other_tenant = req.clone();
    other_tenant.tenant_id = Uuid::new_v4().to_string();
    let r = states.clone().create_state(other_tenant).await;
    assert_eq!(code(r), Code::FailedPrecondition);

    for bad in ["", "Db", "../etc", "a/b", "-x", "a.b", "a b"] {
        let mut r = req.clone();
        r.physical_name = bad.to_owned();
        let got = states.clone().create_state(r).await;
        assert_eq!(code(got), Code::InvalidArgument, "{bad:?}");
    }

    let pool = app.admin_pool().await;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM states")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 1, "one state for the key");
}

#[tokio::test]
async fn admission_hands_out_backend_addresses_base_and_token_scope() {
    let app = spawn_app().await;
    let state = app.create_state("admit").await;
    let doc = state_doc(1, "lineage-admit", "one");
    app.apply_doc(&state, &doc).await;

    let address = format!("{}/v1/states/{state}", app.http_base);
    for kind in [
        pb::RunKind::Plan,
        pb::RunKind::Apply,
        pb::RunKind::Destroy,
        pb::RunKind::Preview,
        pb::RunKind::Drift,
    ] {
        let run = app.register(&state, kind, "dev").await;
        let a = admit_raw(&app, &run).await;
        assert_eq!(a.run_id, run);
        assert_eq!(a.attempt, 1);
        let backend = a.backend.as_ref().unwrap();
        assert_eq!(backend.address, address);
        assert_eq!(backend.lock_address, format!("{address}/lock"));
        assert_eq!(backend.unlock_address, format!("{address}/lock"));
        assert_eq!(a.base_generation, 1, "{kind:?}");
        let read_only = matches!(kind, pb::RunKind::Preview | pb::RunKind::Drift);
        assert_eq!(a.read_only, read_only, "{kind:?}");
        assert!(!a.interrupted);
        assert!(!a.plan_current && a.plan_stale_reason.is_empty());
        assert!(a.run_token.len() >= 32, "an opaque random token");
        let expires = to_chrono(a.lease_expires_at.as_ref().unwrap());
        assert!(expires > chrono::Utc::now() + chrono::Duration::seconds(30));

        let admitted = app.admit(&run).await;
        assert_eq!(code(admitted), Code::Aborted, "attempt 1 is live");

        // The token reads its state; a read-only token may not lock.
        let me = admitted_from(&a, &state);
        let got = app.get(&me).await;
        assert_eq!(got.status, 200);
        assert_eq!(got.body, doc);
        if read_only {
            assert_eq!(app.lock(&me, "ro-lock").await.status, 403, "{kind:?}");
        }
        app.finish(&me, pb::RunOutcome::Succeeded).await;
    }
}

#[tokio::test]
async fn a_new_attempt_waits_for_the_lease_and_production_retries_are_interrupted() {
    let app = spawn_app_with(short_lease(2)).await;
    let state = app.create_state("attempts").await;
    let cases = [
        (pb::RunKind::Apply, "production", true),
        (pb::RunKind::Destroy, "dev", true),
        (pb::RunKind::Plan, "dev", false),
        (pb::RunKind::Apply, "dev", false),
        // The one production rule (cairn_contract): case and the `prod` alias do not matter.
        (pb::RunKind::Apply, "Production", true),
        (pb::RunKind::Apply, "prod", true),
        (pb::RunKind::Apply, "PRODUCTION", true),
        (pb::RunKind::Apply, "Staging", false),
    ];
    let mut runs = Vec::new();
    for (kind, env, _) in cases {
        let run = app.register(&state, kind, env).await;
        let first = app.admit(&run).await.unwrap();
        assert_eq!(first.attempt, 1);
        assert!(!first.interrupted, "attempt 1 always runs");
        runs.push(run);
    }
    let live = app.admit(&runs[0]).await;
    assert_eq!(code(live), Code::Aborted, "attempt 1's lease is live");

    for run in &runs {
        app.wait_lease_expired(run, 1).await;
    }
    let mut seconds = Vec::new();
    for ((kind, env, interrupted), run) in cases.iter().zip(&runs) {
        let second = app.admit(run).await.unwrap();
        assert_eq!(second.attempt, 2, "{kind:?} {env}");
        assert_eq!(second.interrupted, *interrupted, "{kind:?} {env}");
        seconds.push(second);
    }
    // The run stores the canonical name it was judged by.
    for ((kind, env, _), run) in cases.iter().zip(&runs) {
        let stored = app
            .runs(&app.service_token())
            .get_run(pb::GetRunRequest {
                run_id: run.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .environment;
        let canonical = match env.to_ascii_lowercase().as_str() {
            "prod" | "production" => "production".to_owned(),
            other => other.to_owned(),
        };
        assert_eq!(stored, canonical, "{kind:?} {env}");
    }

    // A finished run is never admitted again.
    let plan = app.admit(&runs[2]).await;
    assert_eq!(code(plan), Code::Aborted, "attempt 2 is live");
    app.finish(&seconds[2], pb::RunOutcome::Succeeded).await;
    let again = app.admit(&runs[2]).await;
    assert_eq!(code(again), Code::FailedPrecondition);
    let pool = app.admin_pool().await;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM attempts WHERE run_id = $1")
        .bind(uuid(&runs[2]))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 2);
}

/// The environment is normalised once, at RegisterRun: `Prod` is stored as `production`
/// (so a retry naming it `PROD` is the same registration), a name that cannot be is
/// INVALID_ARGUMENT and registers nothing.
#[tokio::test]
async fn register_run_normalises_the_environment() {
    let app = spawn_app().await;
    let state = app.create_state("environments").await;
    let req = app.registration(&state, pb::RunKind::Apply, "Prod");
    assert!(register_req(&app, req.clone()).await.unwrap(), "created");
    let mut again = req.clone();
    again.environment = "PROD".to_owned();
    assert!(
        !register_req(&app, again).await.unwrap(),
        "the same environment by another spelling is the same registration"
    );
    let mut staging = req.clone();
    staging.environment = "staging".to_owned();
    assert_eq!(
        code(register_req(&app, staging).await),
        Code::FailedPrecondition,
        "another environment is different content"
    );
    let run = app
        .runs(&app.service_token())
        .get_run(pb::GetRunRequest {
            run_id: req.run_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(run.environment, "production");

    for bad in ["", "  ", "prod env", "1prod", "prod/eu"] {
        let r = app.registration(&state, pb::RunKind::Apply, bad);
        let refused = register_req(&app, r).await;
        assert_eq!(code(refused), Code::InvalidArgument, "{bad:?}");
    }
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM runs")
        .fetch_one(&app.admin_pool().await)
        .await
        .unwrap();
    assert_eq!(runs, 1, "only the valid registration left a run");
}

/// Renews attempt `attempt` of `run`.
async fn renew(app: &TestApp, run: &str, attempt: u32) -> Result<prost_types::Timestamp, Code> {
    app.runs(&app.service_token())
        .renew_run(pb::RenewRunRequest {
            run_id: run.to_owned(),
            attempt,
        })
        .await
        .map(|r| r.into_inner().lease_expires_at.unwrap())
        .map_err(|s| s.code())
}

#[tokio::test]
async fn renew_extends_a_live_lease_and_refuses_dead_attempts() {
    let app = spawn_app_with(short_lease(3)).await;
    let state = app.create_state("renew").await;
    let run = app.register(&state, pb::RunKind::Apply, "dev").await;
    let admitted = admit_raw(&app, &run).await;
    let a = admitted_from(&admitted, &state);
    let original = to_chrono(admitted.lease_expires_at.as_ref().unwrap());

    // Renew once half the lease has passed, then outlive the original lease.
    let pool = app.admin_pool().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let half: bool =
            sqlx::query_scalar("SELECT now() > $1::timestamptz - interval '1.5 seconds'")
                .bind(original)
                .fetch_one(&pool)
                .await
                .unwrap();
        if half {
            break;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let renewed = to_chrono(&renew(&app, &run, 1).await.unwrap());
    assert!(
        renewed > original,
        "renewal extends the lease: {renewed} > {original}"
    );
    loop {
        let past: bool = sqlx::query_scalar("SELECT now() > $1::timestamptz")
            .bind(original)
            .fetch_one(&pool)
            .await
            .unwrap();
        if past {
            break;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        app.get(&a).await.status,
        404,
        "the token still works past the original lease"
    );
    let renewed_again = to_chrono(&renew(&app, &run, 1).await.unwrap());
    assert!(renewed_again > renewed);

    // Finished: refused.
    app.finish(&a, pb::RunOutcome::Succeeded).await;
    assert_eq!(renew(&app, &run, 1).await, Err(Code::FailedPrecondition));

    // Expired: refused, and it stays expired.
    let other = app.register(&state, pb::RunKind::Plan, "dev").await;
    let b = app.admit(&other).await.unwrap();
    app.wait_lease_expired(&other, 1).await;
    assert_eq!(renew(&app, &other, 1).await, Err(Code::FailedPrecondition));
    assert_eq!(app.get(&b).await.status, 401);
    // Revoked by attempt 2: refused.
    let b2 = app.admit(&other).await.unwrap();
    assert_eq!(b2.attempt, 2);
    assert_eq!(renew(&app, &other, 1).await, Err(Code::FailedPrecondition));
    assert!(renew(&app, &other, 2).await.is_ok());
    assert_eq!(renew(&app, &other, 3).await, Err(Code::NotFound));
}

#[tokio::test]
async fn finish_is_idempotent_and_makes_the_last_write_final() {
    let app = spawn_app().await;
    let state = app.create_state("finish").await;
    let a = app.start_run(&state, pb::RunKind::Apply).await;
    assert_eq!(app.lock(&a, "lock-a").await.status, 200);
    assert_eq!(app.get(&a).await.status, 404);
    for serial in 1..=3 {
        let doc = state_doc(serial, "lineage-finish", &format!("v{serial}"));
        let r = app.post(&a, "lock-a", &doc).await;
        assert_eq!(r.status, 200, "serial {serial}: {}", r.text());
    }
    let flags = |r: &pb::InspectStateResponse| {
        r.generations
            .iter()
            .map(|g| (g.generation, g.r#final))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        flags(&inspect(&app, &state).await),
        vec![(1, false), (2, false), (3, false)],
        "nothing is final while the attempt runs"
    );

    let first = app.finish(&a, pb::RunOutcome::Succeeded).await;
    assert_eq!(first.final_generation, 3);
    assert!(first.refusal_reason.is_empty());
    let second = app.finish(&a, pb::RunOutcome::Succeeded).await;
    assert_eq!(second, first, "finishing twice gives the same answer");
    let third = app.finish(&a, pb::RunOutcome::Failed).await;
    assert_eq!(third, first, "a late different outcome changes nothing");
    assert_eq!(
        flags(&inspect(&app, &state).await),
        vec![(1, false), (2, false), (3, true)],
        "the last write became final; the earlier ones are intermediate"
    );
    let pool = app.admin_pool().await;
    let (status, outcome): (String, Option<String>) = sqlx::query_as(
        "SELECT r.status, a.outcome FROM runs r JOIN attempts a USING (run_id)
         WHERE r.run_id = $1",
    )
    .bind(uuid(&a.run_id))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (status.as_str(), outcome.as_deref()),
        ("succeeded", Some("succeeded"))
    );

    // Finishing freed the lock; a failed run's write stays intermediate.
    let b = app.start_run(&state, pb::RunKind::Apply).await;
    assert_eq!(app.lock(&b, "lock-b").await.status, 200);
    assert_eq!(app.get(&b).await.status, 200);
    let doc = state_doc(4, "lineage-finish", "v4");
    assert_eq!(app.post(&b, "lock-b", &doc).await.status, 200);
    let failed = app.finish(&b, pb::RunOutcome::Failed).await;
    assert_eq!(failed.final_generation, 4);
    assert_eq!(
        flags(&inspect(&app, &state).await),
        vec![(1, false), (2, false), (3, true), (4, false)]
    );

    // A retried finish still answers what the finish did, even after the state moved on.
    assert_eq!(app.finish(&a, pb::RunOutcome::Succeeded).await, first);
    assert_eq!(app.finish(&b, pb::RunOutcome::Failed).await, failed);
}

/// Only the latest attempt finishes a run: a superseded one is refused (its outcome would
/// overwrite what the newer attempt did). The latest attempt may finish after its lease
/// expired, recorded as "state may be incomplete"; a repeat stays idempotent.
#[tokio::test]
async fn finish_refuses_a_superseded_attempt_and_records_a_late_one_as_incomplete() {
    let app = spawn_app_with(short_lease(1)).await;
    let state = app.create_state("finish-superseded").await;
    let first = app.start_run(&state, pb::RunKind::Apply).await;
    app.wait_lease_expired(&first.run_id, 1).await;
    let second = app.admit(&first.run_id).await.unwrap();
    assert_eq!(second.attempt, 2);

    let finish = |a: &Admitted, outcome: pb::RunOutcome| {
        let req = pb::FinishRunRequest {
            run_id: a.run_id.clone(),
            attempt: a.attempt,
            outcome: outcome as i32,
            message: String::new(),
        };
        let runs = app.runs(&app.service_token());
        async move {
            let mut runs = runs;
            runs.finish_run(req).await.map(tonic::Response::into_inner)
        }
    };
    let err = finish(&first, pb::RunOutcome::Succeeded).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("superseded by attempt 2"),
        "{}",
        err.message()
    );
    assert_eq!(
        cairn_service::reason_of(&err),
        Some(RefusalReason::Superseded),
        "a typed reason, not only a message"
    );

    // Attempt 2's lease expires too, with no newer attempt: it still finishes the run.
    app.wait_lease_expired(&first.run_id, 2).await;
    let done = finish(&second, pb::RunOutcome::Failed).await.unwrap();
    assert_eq!(
        finish(&second, pb::RunOutcome::Failed).await.unwrap(),
        done,
        "a repeat gives the same answer"
    );
    // The superseded attempt stays refused after the run finished.
    let err = finish(&first, pb::RunOutcome::Failed).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(
        cairn_service::reason_of(&err),
        Some(RefusalReason::Superseded)
    );
    let rows: Vec<(i32, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT attempt, outcome, incomplete_reason FROM attempts WHERE run_id = $1 ORDER BY attempt",
    )
    .bind(uuid(&first.run_id))
    .fetch_all(&app.admin_pool().await)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].0, rows[0].1.as_deref()),
        (1, None),
        "attempt 1 never finished"
    );
    assert_eq!(rows[1].1.as_deref(), Some("failed"));
    assert!(
        rows[1]
            .2
            .as_deref()
            .is_some_and(|m| m.contains("lease expired") && m.contains("state may be incomplete")),
        "{rows:?}"
    );

    // A finish within the lease is complete.
    let fresh = app.start_run(&state, pb::RunKind::Apply).await;
    app.finish(&fresh, pb::RunOutcome::Succeeded).await;
    let incomplete: Option<String> =
        sqlx::query_scalar("SELECT incomplete_reason FROM attempts WHERE run_id = $1")
            .bind(uuid(&fresh.run_id))
            .fetch_one(&app.admin_pool().await)
            .await
            .unwrap();
    assert_eq!(incomplete, None);
}

#[tokio::test]
async fn the_root_config_goes_only_to_a_live_attempt_and_is_stored_sealed() {
    let app = spawn_app_with(short_lease(2)).await;
    let state = app.create_state("config").await;
    let marker = format!("config-canary-{}", Uuid::new_v4().simple());
    let config = format!(
        r#"{{"terraform":{{"backend":{{"http":{{}}}}}},"locals":{{"marker":"{marker}"}}}}"#
    );
    let mut req = with_config(
        app.registration(&state, pb::RunKind::Apply, "staging"),
        config.as_bytes(),
    );
    let ctx = req.context.as_mut().unwrap();
    ctx.sensitive_variable_refs
        .insert("db_password".to_owned(), "secretsmanager:db".to_owned());
    ctx.target_settings
        .insert("region".to_owned(), "eu-west-1".to_owned());
    let run = req.run_id.clone();
    assert!(register_req(&app, req.clone()).await.unwrap());
    let first = app.admit(&run).await.unwrap();

    let get = |attempt: u32| {
        let mut client = app.runs(&app.service_token());
        let run = run.clone();
        async move {
            client
                .get_run_config(pb::GetRunConfigRequest {
                    run_id: run,
                    attempt,
                })
                .await
                .map(tonic::Response::into_inner)
        }
    };
    let c = get(1).await.unwrap();
    assert_eq!(c.root_config, config.as_bytes(), "the exact bytes");
    assert_eq!(c.config_hash, req.config_hash);
    assert_eq!(c.context, req.context);
    assert_eq!(c.run_id, run);
    assert_eq!(c.state_id, state);
    assert_eq!(c.kind, pb::RunKind::Apply as i32);
    assert_eq!(c.environment, "staging");
    assert!(c.plan_run_id.is_empty());

    // Not in clear in the database.
    let pool = app.admin_pool().await;
    let (ciphertext, clear_hits): (Vec<u8>, i64) = sqlx::query_as(
        "SELECT config_ciphertext,
                (SELECT count(*) FROM runs r2 WHERE strpos(r2::text, $2) > 0
                   OR position(convert_to($2, 'UTF8') IN r2.config_ciphertext) > 0)
         FROM runs WHERE run_id = $1",
    )
    .bind(uuid(&run))
    .bind(&marker)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(!ciphertext.is_empty());
    assert!(
        !ciphertext
            .windows(marker.len())
            .any(|w| w == marker.as_bytes()),
        "config_ciphertext holds the config in clear"
    );
    assert_eq!(
        clear_hits, 0,
        "no column of the run holds the config in clear"
    );

    // Expired, then revoked: refused. Unknown attempt: not found.
    app.wait_lease_expired(&run, 1).await;
    assert_eq!(code(get(1).await), Code::FailedPrecondition, "expired");
    let second = app.admit(&run).await.unwrap();
    assert_eq!(code(get(1).await), Code::FailedPrecondition, "revoked");
    assert_eq!(get(2).await.unwrap().root_config, config.as_bytes());
    assert_eq!(code(get(7).await), Code::NotFound);
    app.finish(&second, pb::RunOutcome::Succeeded).await;
    assert_eq!(code(get(2).await), Code::FailedPrecondition, "finished");
    let _ = first;
}

fn plan_tags(config_hash: &str, base: u64, lock_file: &[u8]) -> pb::PlanTags {
    pb::PlanTags {
        config_hash: config_hash.to_owned(),
        base_generation: base,
        tofu_version: "1.12.6".to_owned(),
        provider_lock_hash: cairn_storage::sha256_hex(lock_file),
        module_library_hash: "modules-v3".to_owned(),
    }
}

async fn take(app: &TestApp, a: &Admitted) -> Result<pb::TakePlanResponse, tonic::Status> {
    app.runs(&app.service_token())
        .take_plan(pb::TakePlanRequest {
            run_id: a.run_id.clone(),
            attempt: a.attempt,
        })
        .await
        .map(tonic::Response::into_inner)
}

/// Registers an apply of `plan_run`'s saved plan; returns its run id.
async fn register_apply_of(app: &TestApp, state: &str, plan_run: &str) -> String {
    let mut req = app.registration(state, pb::RunKind::Apply, "dev");
    req.plan_run_id = plan_run.to_owned();
    let run = req.run_id.clone();
    assert!(register_req(app, req).await.unwrap());
    run
}

async fn apply_with_plan(app: &TestApp, state: &str, plan_run: &str) -> Admitted {
    let run = register_apply_of(app, state, plan_run).await;
    app.admit(&run).await.unwrap()
}

// On both object stores: the file store refused the old key scheme (`plans/<state>/<32
// hex digits>`), so a saved plan could not be stored on the embedded default.
#[tokio::test]
async fn a_saved_plan_is_checked_leased_to_one_apply_and_deleted_after_it_on_s3() {
    saved_plan_lifecycle(Store::S3).await;
}

#[tokio::test]
async fn a_saved_plan_is_checked_leased_to_one_apply_and_deleted_after_it_on_the_file_store() {
    saved_plan_lifecycle(Store::File).await;
}

async fn saved_plan_lifecycle(store: Store) {
    let app = spawn_app_with(on(store)).await;
    let state = app.create_state("plans").await;
    let plan_req = app.registration(&state, pb::RunKind::Plan, "dev");
    let config_hash = plan_req.config_hash.clone();
    let plan_run = plan_req.run_id.clone();
    assert!(register_req(&app, plan_req).await.unwrap());
    let p = app.admit(&plan_run).await.unwrap();
    assert_eq!(p.base_generation, 0);

    let marker = format!("plan-canary-{}", Uuid::new_v4().simple());
    let mut plan = b"PK\x03\x04tfplan\x00\xff".to_vec();
    plan.extend_from_slice(marker.as_bytes());
    let lock_file =
        b"provider \"registry.opentofu.org/hashicorp/null\" {\n  version = \"3.2.3\"\n}\n".to_vec();
    let put = |tags: pb::PlanTags| {
        let mut client = app.runs(&app.service_token());
        let req = pb::PutPlanRequest {
            run_id: plan_run.clone(),
            attempt: 1,
            plan: plan.clone(),
            tags: Some(tags),
            provider_lock_file: lock_file.clone(),
            masked_plan_json: Vec::new(),
        };
        async move { client.put_plan(req).await.map(tonic::Response::into_inner) }
    };
    let wrong_hash = plan_tags(&cairn_storage::sha256_hex(b"other config"), 0, &lock_file);
    assert_eq!(code(put(wrong_hash).await), Code::InvalidArgument);
    assert_eq!(
        code(put(plan_tags(&config_hash, 5, &lock_file)).await),
        Code::InvalidArgument,
        "base generation must be the attempt's"
    );
    let tags = plan_tags(&config_hash, 0, &lock_file);
    let stored = put(tags.clone()).await.unwrap();
    let plan_id = stored.plan_id;
    assert!(!plan_id.is_empty());
    assert_eq!(stored.plan_sha256, cairn_storage::sha256_hex(&plan));
    assert_eq!(
        code(put(tags.clone()).await),
        Code::FailedPrecondition,
        "one plan per plan run"
    );
    app.finish(&p, pb::RunOutcome::Succeeded).await;

    // Stored sealed.
    let pool = app.admin_pool().await;
    let (object_key, object_version): (String, String) =
        sqlx::query_as("SELECT object_key, object_version FROM plans WHERE run_id = $1")
            .bind(uuid(&plan_run))
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        object_key,
        format!("plans/{state}/{plan_id}"),
        "hyphenated ids"
    );
    let stored = app
        .object_bytes(&object_key, &object_version)
        .await
        .unwrap();
    assert!(
        !stored.windows(marker.len()).any(|w| w == marker.as_bytes()),
        "the plan object is encrypted"
    );
    assert_eq!(app.versions_of(&object_key).await, vec![object_version]);
    for (path, raw) in app.raw_objects().await {
        assert!(
            !raw.windows(marker.len()).any(|w| w == marker.as_bytes()),
            "{path} holds the plan in clear"
        );
    }

    // The first apply takes it.
    let a1 = apply_with_plan(&app, &state, &plan_run).await;
    assert!(a1.plan_current);
    let taken = take(&app, &a1).await.unwrap();
    assert_eq!(taken.plan, plan, "the exact plan bytes");
    assert_eq!(taken.tags, Some(tags.clone()));
    assert_eq!(taken.provider_lock_file, lock_file);
    assert!(taken.current && taken.stale_reason.is_empty());
    assert!(take(&app, &a1).await.is_ok(), "taking again is idempotent");

    // A second apply of the same plan cannot take it while the first holds it.
    let a2 = apply_with_plan(&app, &state, &plan_run).await;
    assert_eq!(code(take(&app, &a2).await), Code::FailedPrecondition);

    // The state moves: a new apply learns the plan is stale, and why.
    app.apply_doc(&state, &state_doc(1, "lineage-plans", "moved"))
        .await;
    let a3 = admit_raw(&app, &register_apply_of(&app, &state, &plan_run).await).await;
    assert!(!a3.plan_current);
    let reason = a3.plan_stale_reason.clone();
    let a3 = admitted_from(&a3, &state);
    assert!(
        reason.contains("generation 0") && reason.contains("to 1"),
        "the reason names the generations: {reason:?}"
    );
    let retaken = take(&app, &a1).await.unwrap();
    assert!(!retaken.current);
    assert!(retaken.stale_reason.contains("generation 0"));

    // Finishing the taking attempt deletes the plan, row and object.
    app.finish(&a1, pb::RunOutcome::Failed).await;
    assert_eq!(code(take(&app, &a3).await), Code::FailedPrecondition);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM plans WHERE run_id = $1")
        .bind(uuid(&plan_run))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 0);
    assert!(
        app.versions_of(&object_key).await.is_empty(),
        "the plan object is gone from the store"
    );
    let late = apply_with_plan(&app, &state, &plan_run).await;
    assert!(!late.plan_current);
}

#[tokio::test]
async fn quarantine_keeps_the_errored_state_sealed_on_s3() {
    quarantine_seals(Store::S3).await;
}

#[tokio::test]
async fn quarantine_keeps_the_errored_state_sealed_on_the_file_store() {
    quarantine_seals(Store::File).await;
}

async fn quarantine_seals(store: Store) {
    let app = spawn_app_with(on(store)).await;
    let state = app.create_state("quarantine").await;
    let a = app.start_run(&state, pb::RunKind::Apply).await;
    let marker = format!("errored-canary-{}", Uuid::new_v4().simple());
    let errored = state_doc(7, "lineage-q", &marker);
    let id = app
        .runs(&app.service_token())
        .quarantine(pb::QuarantineRequest {
            run_id: a.run_id.clone(),
            attempt: 1,
            state: errored.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .quarantine_id;

    let pool = app.admin_pool().await;
    let (key, attempt, sha): (String, i32, String) = sqlx::query_as(
        "SELECT object_key, attempt, plaintext_sha256 FROM quarantine
         WHERE quarantine_id = $1 AND run_id = $2 AND state_id = $3",
    )
    .bind(uuid(&id))
    .bind(uuid(&a.run_id))
    .bind(uuid(&state))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(attempt, 1);
    assert_eq!(sha, cairn_storage::sha256_hex(&errored));
    assert_eq!(key, format!("quarantine/{state}/{id}"), "hyphenated ids");

    let quarantined: Vec<_> = app
        .object_versions()
        .await
        .into_iter()
        .filter(|o| o.key.starts_with("quarantine/"))
        .collect();
    assert_eq!(
        quarantined.len(),
        1,
        "one quarantined object: {quarantined:?}"
    );
    assert_eq!(quarantined[0].key, key);
    let body = app
        .object_bytes(&key, &quarantined[0].version_id)
        .await
        .unwrap();
    assert!(!body.is_empty());
    for (path, raw) in app.raw_objects().await {
        for clear in [marker.as_bytes(), b"s3cr3t-canary".as_slice(), b"lineage-q"] {
            assert!(
                !raw.windows(clear.len()).any(|w| w == clear),
                "{path} holds {:?} in clear",
                String::from_utf8_lossy(clear)
            );
        }
    }
    // Nothing became state.
    assert_eq!(app.state_info(&state).await.current_generation, 0);
}

/// The runner re-sends an errored.tfstate until the coordinator confirmed it, possibly
/// from a restarted runner after a newer attempt superseded its own: any attempt of the run
/// is accepted, and the same file of the same attempt is stored once, under one id.
#[tokio::test]
async fn quarantine_accepts_any_attempt_and_stores_a_resent_file_once() {
    let app = spawn_app_with(Options {
        store: Store::File,
        ..short_lease(1)
    })
    .await;
    let state = app.create_state("quarantine-resend").await;
    let first = app.start_run(&state, pb::RunKind::Apply).await;
    let run = first.run_id.clone();
    let errored = state_doc(3, "lineage-resend", "errored");
    let quarantine = |attempt: u32, doc: Vec<u8>| {
        let (app, run) = (&app, run.clone());
        async move {
            app.runs(&app.service_token())
                .quarantine(pb::QuarantineRequest {
                    run_id: run,
                    attempt,
                    state: doc,
                })
                .await
                .map(|r| r.into_inner().quarantine_id)
        }
    };
    // Attempt 1 expires and attempt 2 supersedes (revokes) it; attempt 2 finishes.
    app.wait_lease_expired(&run, 1).await;
    let second = app.admit(&run).await.unwrap();
    assert_eq!(second.attempt, 2);
    app.finish(&second, pb::RunOutcome::Failed).await;

    // The revoked attempt's file is accepted, and a re-send (or two at once) is the same entry.
    let id = quarantine(1, errored.clone())
        .await
        .expect("a revoked attempt quarantines");
    let (again, concurrent) = tokio::join!(
        quarantine(1, errored.clone()),
        quarantine(1, errored.clone())
    );
    assert_eq!(again.unwrap(), id, "a re-send returns the same id");
    assert_eq!(concurrent.unwrap(), id);
    // The finished attempt's file is its own entry; another file of attempt 1 is a new one.
    let of_second = quarantine(2, errored.clone())
        .await
        .expect("a finished attempt quarantines");
    assert_ne!(of_second, id);
    let other = quarantine(1, state_doc(4, "lineage-resend", "errored-later"))
        .await
        .unwrap();
    assert_ne!(other, id);
    // An attempt that never existed is still refused.
    assert_eq!(code(quarantine(9, errored.clone()).await), Code::NotFound);

    let pool = app.admin_pool().await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM quarantine WHERE run_id = $1")
        .bind(uuid(&run))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 3, "attempt 1 twice (two files), attempt 2 once");
    let objects = app
        .object_versions()
        .await
        .into_iter()
        .filter(|o| o.key.starts_with("quarantine/"))
        .count();
    assert_eq!(objects, 3, "no object left behind by a re-send");
}

#[tokio::test]
async fn run_events_reach_the_stream_without_tokens_or_state() {
    let app = spawn_app().await;
    let state = app.create_state("events").await;
    let a = app.start_run(&state, pb::RunKind::Apply).await;
    let marker = format!("state-canary-{}", Uuid::new_v4().simple());
    let doc = state_doc(1, "lineage-events", &marker);
    assert_eq!(app.lock(&a, "lock-e").await.status, 200);
    assert_eq!(app.post(&a, "lock-e", &doc).await.status, 200);
    assert_eq!(app.unlock(&a, "lock-e").await.status, 200);
    app.finish(&a, pb::RunOutcome::Succeeded).await;

    let prefix = &app.nats.prefix;
    let stream_name = cairn_bus::Namespace::with_prefix(prefix)
        .unwrap()
        .events_stream();
    let stream = app.nats.jetstream.get_stream(&stream_name).await.unwrap();
    let consumer = stream
        .create_consumer(pull::Config {
            filter_subject: format!("{prefix}.cairn.events.>"),
            deliver_policy: DeliverPolicy::All,
            ack_policy: AckPolicy::None,
            ..Default::default()
        })
        .await
        .unwrap();

    let wanted = ["run_admitted", "generation_committed", "run_finished"];
    let mut seen: Vec<(String, Event)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !wanted
        .iter()
        .all(|w| seen.iter().any(|(_, e)| e.event_type == *w))
    {
        assert!(
            Instant::now() < deadline,
            "events did not arrive; saw {:?}",
            seen.iter().map(|(s, _)| s).collect::<Vec<_>>()
        );
        let mut batch = consumer
            .fetch()
            .max_messages(100)
            .expires(Duration::from_millis(500))
            .messages()
            .await
            .unwrap();
        while let Some(msg) = batch.next().await {
            let msg = msg.unwrap();
            let payload = msg.payload.to_vec();
            for (what, secret) in [
                ("the run token", a.token.as_bytes()),
                ("the state content", marker.as_bytes()),
                ("a sensitive output", b"s3cr3t-canary".as_slice()),
                ("the state document", doc.as_slice()),
            ] {
                assert!(
                    !payload.windows(secret.len()).any(|w| w == secret),
                    "an event on {} carries {what}",
                    msg.subject
                );
            }
            let event = Event::decode(payload.as_slice()).unwrap();
            seen.push((msg.subject.to_string(), event));
        }
    }

    let tenant = app.tenant.to_string();
    for (subject, e) in &seen {
        assert_eq!(e.tenant_id, tenant);
        assert_eq!(
            *subject,
            format!("{prefix}.cairn.events.{tenant}.state.{}", e.event_type)
        );
        assert_eq!(e.aggregate, "state");
        assert_eq!(e.aggregate_id, state);
        assert!(!e.event_id.is_empty());
    }
    let find = |t: &str| {
        seen.iter()
            .map(|(_, e)| e)
            .find(|e| e.event_type == t)
            .and_then(|e| e.payload.clone())
            .unwrap()
    };
    match find("run_admitted") {
        Payload::RunAdmitted(p) => {
            assert_eq!((p.run_id.as_str(), p.attempt), (a.run_id.as_str(), 1));
            assert_eq!((p.kind.as_str(), p.base_generation), ("apply", 0));
            assert_eq!(p.state_id, state);
        }
        other => panic!("{other:?}"),
    }
    match find("generation_committed") {
        Payload::GenerationCommitted(p) => {
            assert_eq!((p.generation, p.tofu_serial, p.attempt), (1, 1, 1));
            assert_eq!(p.run_id, a.run_id);
        }
        other => panic!("{other:?}"),
    }
    match find("run_finished") {
        Payload::RunFinished(p) => {
            assert_eq!(p.run_id, a.run_id);
            assert_eq!((p.outcome.as_str(), p.final_generation), ("succeeded", 1));
        }
        other => panic!("{other:?}"),
    }
    app.nats.delete_streams().await;
}
