//! What the deployments workflow reads back from the coordinator: the masked plan of a plan
//! run (stored sealed next to the plan, kept after the plan was applied or expired) and
//! the stored root config of any registered run.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::Duration;

use cairn_auth::Role;
use cairn_proto::state as pb;
use cairn_state_coordinator::background::sweeper::{SweepSettings, sweep_once};
use common::*;
use tonic::Code;
use uuid::Uuid;

fn uuid(s: &str) -> Uuid {
    Uuid::parse_str(s).unwrap()
}

fn code<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> Code {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(s) => s.code(),
    }
}

const PLAN: &[u8] = b"PK\x03\x04tfplan\x00\xffsaved plan bytes";

/// A masked plan JSON (what the runner's masking of `tofu show -json` gives) with `marker`.
fn masked_json(marker: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "format_version": "1.2",
        "resource_changes": [{
            "address": "local_file.web",
            "change": {"actions": ["create"], "after": {"content": marker, "password": "(sensitive)"}}
        }]
    }))
    .unwrap()
}

/// A registered and admitted plan run of a new state.
async fn admitted_plan(app: &TestApp, name: &str) -> (String, Admitted, String) {
    let state = app.create_state(name).await;
    let req = app.registration(&state, pb::RunKind::Plan, "production");
    let config_hash = req.config_hash.clone();
    let run = app.fx.register_run(req).await;
    let a = app.admit(&run).await.unwrap();
    (state, a, config_hash)
}

fn put_req(a: &Admitted, config_hash: &str, masked: Vec<u8>) -> pb::PutPlanRequest {
    pb::PutPlanRequest {
        run_id: a.run_id.clone(),
        attempt: a.attempt,
        plan: PLAN.to_vec(),
        tags: Some(pb::PlanTags {
            config_hash: config_hash.to_owned(),
            base_generation: a.base_generation,
            tofu_version: "1.12.6".to_owned(),
            provider_lock_hash: String::new(),
            module_library_hash: String::new(),
        }),
        provider_lock_file: Vec::new(),
        masked_plan_json: masked,
    }
}

async fn put(app: &TestApp, req: pb::PutPlanRequest) -> Result<pb::PutPlanResponse, tonic::Status> {
    app.runs(&app.service_token())
        .put_plan(req)
        .await
        .map(tonic::Response::into_inner)
}

async fn masked_plan(
    app: &TestApp,
    token: &str,
    run_id: &str,
) -> Result<pb::GetMaskedPlanResponse, tonic::Status> {
    app.runs(token)
        .get_masked_plan(pb::GetMaskedPlanRequest {
            run_id: run_id.to_owned(),
        })
        .await
        .map(tonic::Response::into_inner)
}

async fn count(app: &TestApp, sql: &str, run_id: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(uuid(run_id))
        .fetch_one(&app.admin_pool().await)
        .await
        .unwrap()
}

/// `(schema.table, row as JSON)` of every row of the coordinator's schema.
async fn all_rows(app: &TestApp) -> Vec<(String, String)> {
    let pool = app.admin_pool().await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_type = 'BASE TABLE' AND table_schema = 'state'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut out = Vec::new();
    for table in tables {
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT row_to_json(t)::text FROM state.\"{table}\" t"
        )))
        .fetch_all(&pool)
        .await
        .unwrap();
        out.extend(rows.into_iter().map(|r| (table.clone(), r)));
    }
    out
}

fn assert_absent(marker: &str, haystack: &[u8], what: &str) {
    assert!(
        !haystack
            .windows(marker.len())
            .any(|w| w == marker.as_bytes()),
        "{what} holds the masked plan in clear"
    );
}

#[tokio::test]
async fn the_masked_plan_round_trips_sealed_and_outlives_the_applied_plan_on_s3() {
    masked_plan_lifecycle(Store::S3).await;
}

#[tokio::test]
async fn the_masked_plan_round_trips_sealed_and_outlives_the_applied_plan_on_the_file_store() {
    masked_plan_lifecycle(Store::File).await;
}

async fn masked_plan_lifecycle(store: Store) {
    let app = spawn_app_with(on(store)).await;
    let (state, p, config_hash) = admitted_plan(&app, "review").await;
    let marker = format!("masked-canary-{}", Uuid::new_v4());
    let json = masked_json(&marker);
    let stored = put(&app, put_req(&p, &config_hash, json.clone()))
        .await
        .unwrap();
    assert_eq!(stored.plan_sha256, cairn_storage::sha256_hex(PLAN));

    let review = masked_plan(&app, &app.service_token(), &p.run_id)
        .await
        .unwrap();
    assert_eq!(review.plan_id, stored.plan_id);
    assert_eq!(review.plan_sha256, stored.plan_sha256);
    assert_eq!(review.base_generation, 0);
    assert_eq!(review.masked_plan_json, json, "the exact bytes");
    let created = review.created_at.expect("created_at");
    assert!(created.seconds > 0);

    // Sealed: not in clear in any row or object; stored under its own key, next to the plan.
    let (key, version): (String, String) =
        sqlx::query_as("SELECT object_key, object_version FROM masked_plans WHERE run_id = $1")
            .bind(uuid(&p.run_id))
            .fetch_one(&app.admin_pool().await)
            .await
            .unwrap();
    assert_eq!(key, format!("masked-plans/{state}/{}", stored.plan_id));
    // row_to_json shows bytea as hex: look for both spellings.
    let marker_hex = hex::encode(&marker);
    let rows = all_rows(&app).await;
    assert!(rows.iter().any(|(t, _)| t == "masked_plans"), "{rows:?}");
    for (table, row) in &rows {
        assert_absent(&marker, row.as_bytes(), &format!("table {table}"));
        assert_absent(&marker_hex, row.as_bytes(), &format!("table {table} (hex)"));
    }
    let raw = app.raw_objects().await;
    assert!(raw.len() >= 2, "the plan and its masked JSON: {raw:?}");
    for (path, bytes) in &raw {
        assert_absent(&marker, bytes, path);
    }
    app.finish(&p, pb::RunOutcome::Succeeded).await;

    // An apply takes the plan and finishes: the plan goes, the review stays.
    let mut req = app.registration(&state, pb::RunKind::Apply, "production");
    req.plan_run_id = p.run_id.clone();
    let apply = app.fx.register_run(req).await;
    let a = app.admit(&apply).await.unwrap();
    let taken = app
        .runs(&app.service_token())
        .take_plan(pb::TakePlanRequest {
            run_id: a.run_id.clone(),
            attempt: a.attempt,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(taken.plan, PLAN);
    app.finish(&a, pb::RunOutcome::Succeeded).await;
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM plans WHERE run_id = $1",
            &p.run_id
        )
        .await,
        0,
        "the plan was deleted with the apply"
    );
    let after = masked_plan(&app, &app.service_token(), &p.run_id)
        .await
        .unwrap();
    assert_eq!(after, review, "the review history keeps the masked plan");
    assert_eq!(app.versions_of(&key).await, vec![version]);

    // VerifyAll knows the masked plan's object (it is not reported as unknown).
    let mut stream = app
        .recovery(&app.platform_admin_token())
        .verify_all(pb::VerifyAllRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut items = Vec::new();
    while let Some(item) = stream.message().await.unwrap() {
        items.push(item);
    }
    assert!(
        items.iter().all(|i| i.unknown_object_key.is_empty()),
        "{items:?}"
    );
    assert!(items.last().unwrap().ok, "{items:?}");
}

#[tokio::test]
async fn the_masked_plan_outlives_an_expired_plan() {
    let app = spawn_app().await;
    let (_, p, config_hash) = admitted_plan(&app, "review-ttl").await;
    let json = masked_json("expiring");
    let stored = put(&app, put_req(&p, &config_hash, json.clone()))
        .await
        .unwrap();
    app.finish(&p, pb::RunOutcome::Succeeded).await;
    sqlx::query("UPDATE plans SET expires_at = now() - interval '1 second' WHERE run_id = $1")
        .bind(uuid(&p.run_id))
        .execute(&app.admin_pool().await)
        .await
        .unwrap();
    let settings = SweepSettings {
        interval: Duration::from_secs(3600),
        pending_ttl: Duration::from_secs(3600),
        intermediate_retention: Duration::from_secs(3600),
        time_limit: cairn_db::BACKGROUND_LIMIT,
    };
    let report = sweep_once(app.server().app(), &settings).await.unwrap();
    assert_eq!(report.plans, 1, "{report:?}");
    let review = masked_plan(&app, &app.service_token(), &p.run_id)
        .await
        .unwrap();
    assert_eq!(review.plan_id, stored.plan_id);
    assert_eq!(review.masked_plan_json, json);
}

#[tokio::test]
async fn a_masked_plan_that_is_not_a_json_object_or_too_large_is_refused_and_changes_nothing() {
    let app = spawn_app_with(Options {
        max_plan_bytes: 4096,
        ..Options::default()
    })
    .await;
    let (_, p, config_hash) = admitted_plan(&app, "review-bad").await;
    let mut too_large = br#"{"pad":""#.to_vec();
    too_large.extend(std::iter::repeat_n(b'x', 4096));
    too_large.extend_from_slice(br#""}"#);
    for (what, bad) in [
        ("an array", b"[1, 2]".to_vec()),
        ("a string", br#""plan""#.to_vec()),
        ("not JSON", b"{not json".to_vec()),
        ("trailing bytes", br#"{"a":1} {"b":2}"#.to_vec()),
        ("over the limit", too_large),
    ] {
        let err = put(&app, put_req(&p, &config_hash, bad)).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{what}: {err:?}");
        assert!(
            err.message().contains("masked_plan_json"),
            "{what}: {err:?}"
        );
    }
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM plans WHERE run_id = $1",
            &p.run_id
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM masked_plans WHERE run_id = $1",
            &p.run_id
        )
        .await,
        0
    );
    assert!(app.object_versions().await.is_empty(), "no object was put");
    assert_eq!(
        code(masked_plan(&app, &app.service_token(), &p.run_id).await),
        Code::NotFound
    );
    // The run can still store its plan, once.
    let json = masked_json("fine");
    assert!(
        put(&app, put_req(&p, &config_hash, json.clone()))
            .await
            .is_ok()
    );
    let again = put(&app, put_req(&p, &config_hash, json))
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::FailedPrecondition, "{again:?}");
    assert_eq!(
        app.object_versions().await.len(),
        2,
        "the refused copy's objects are gone"
    );
}

#[tokio::test]
async fn get_masked_plan_is_service_only_and_not_found_without_a_plan() {
    let app = spawn_app().await;
    let (_, p, config_hash) = admitted_plan(&app, "review-access").await;
    let service = app.service_token();
    assert_eq!(
        code(masked_plan(&app, &service, &p.run_id).await),
        Code::NotFound,
        "a plan run that stored no plan yet"
    );
    assert_eq!(
        code(masked_plan(&app, &service, &Uuid::now_v7().to_string()).await),
        Code::NotFound,
        "an unknown run"
    );
    assert_eq!(
        code(masked_plan(&app, &service, "not-a-uuid").await),
        Code::InvalidArgument
    );
    // Without masked JSON: the record with an empty document.
    let stored = put(&app, put_req(&p, &config_hash, Vec::new()))
        .await
        .unwrap();
    let review = masked_plan(&app, &service, &p.run_id).await.unwrap();
    assert_eq!(review.plan_id, stored.plan_id);
    assert_eq!(review.plan_sha256, cairn_storage::sha256_hex(PLAN));
    assert!(review.masked_plan_json.is_empty());
    for role in [Role::Viewer, Role::Approver, Role::Admin, Role::Owner] {
        let err = masked_plan(&app, &app.user_token(role), &p.run_id)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::PermissionDenied, "{role:?}");
    }
}

async fn registered_config(
    app: &TestApp,
    token: &str,
    run_id: &str,
) -> Result<pb::GetRunConfigResponse, tonic::Status> {
    app.runs(token)
        .get_registered_run_config(pb::GetRegisteredRunConfigRequest {
            run_id: run_id.to_owned(),
        })
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn the_registered_config_of_any_run_is_served_to_services() {
    let app = spawn_app().await;
    let state = app.create_state("registered").await;
    let marker = format!("config-canary-{}", Uuid::new_v4());
    let config =
        format!(r#"{{"terraform":{{"backend":{{"http":{{}}}}}},"locals":{{"m":"{marker}"}}}}"#);
    let spec = cairn_state_coordinator::testing::RunSpec {
        root_config: config.clone().into_bytes(),
        ..Default::default()
    };
    let plan = app
        .fx
        .register_of(&state, pb::RunKind::Plan, "Prod", &spec)
        .await;
    let mut req = app
        .fx
        .registration_of(&state, pb::RunKind::Apply, "Prod", &spec);
    req.plan_run_id = plan.clone();
    let apply = app.fx.register_run(req.clone()).await;
    let service = app.service_token();

    // Before admission: everything as registered (the environment normalised).
    let before = registered_config(&app, &service, &apply).await.unwrap();
    assert_eq!(before.run_id, apply);
    assert_eq!(before.state_id, state);
    assert_eq!(before.kind, pb::RunKind::Apply as i32);
    assert_eq!(before.environment, "production");
    assert_eq!(before.root_config, config.as_bytes(), "the exact bytes");
    assert_eq!(before.config_hash, req.config_hash);
    assert_eq!(before.context, req.context);
    assert_eq!(before.plan_run_id, plan);

    // Admitted: the same answer as the attempt's GetRunConfig.
    let a = app.admit(&apply).await.unwrap();
    let live = app
        .runs(&service)
        .get_run_config(pb::GetRunConfigRequest {
            run_id: apply.clone(),
            attempt: a.attempt,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(live, before);

    // Finished: the attempt's copy is refused, the registered one is still served.
    app.finish(&a, pb::RunOutcome::Succeeded).await;
    let refused = app
        .runs(&service)
        .get_run_config(pb::GetRunConfigRequest {
            run_id: apply.clone(),
            attempt: a.attempt,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert_eq!(
        registered_config(&app, &service, &apply).await.unwrap(),
        before
    );

    // A fenced state: the run's stored config does not depend on the state's fence.
    sqlx::query(
        "UPDATE states SET status = 'recovery_required', fence_reason = 'test', fenced_at = now()
         WHERE state_id = $1",
    )
    .bind(uuid(&state))
    .execute(&app.admin_pool().await)
    .await
    .unwrap();
    assert_eq!(
        app.state_info(&state).await.status,
        pb::StateStatus::RecoveryRequired as i32
    );
    assert_eq!(
        registered_config(&app, &service, &apply).await.unwrap(),
        before
    );

    // Users never get it; an unknown run is NOT_FOUND, a malformed id INVALID_ARGUMENT.
    for role in [Role::Viewer, Role::Operator, Role::Admin, Role::Owner] {
        let err = registered_config(&app, &app.user_token(role), &apply)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::PermissionDenied, "{role:?}");
    }
    assert_eq!(
        code(registered_config(&app, &service, &Uuid::now_v7().to_string()).await),
        Code::NotFound
    );
    assert_eq!(
        code(registered_config(&app, &service, "nope").await),
        Code::InvalidArgument
    );
}
