//! GetPlans: per resource with a plan, the summary from its step and the plan's hash, base
//! generation and masked JSON as the coordinator stored them (its service-only
//! GetMaskedPlan, asked with the service token). A real coordinator runs in-process; the
//! plan runs are registered, admitted and stored through its fixtures as the workflow and a
//! runner would, and the steps name them as the workflow worker records them.
use cairn_auth::Role;
use cairn_proto::deployments as pb;
use cairn_proto::state as spb;
use cairn_state_coordinator::testing::{self as coordinator, Fixtures};
use clap::Parser;
use tonic::Code;
use uuid::Uuid;

use crate::helpers::*;
use crate::watch::{queued, sql};

/// A second deployments process on the test's database, pointed at `coordinator_url` (the
/// first one of `spawn_app` has no coordinator).
async fn deployments_with(
    app: &TestApp,
    coordinator_url: &str,
    dir: &std::path::Path,
) -> cairn_deployments::Server {
    let token_file = dir.join("deployments.token");
    std::fs::write(&token_file, app.keys.service_token_as("deployments")).unwrap();
    let config = cairn_deployments::Config::try_parse_from([
        "cairn-deployments",
        "--grpc-addr",
        "127.0.0.1:0",
        "--database-url",
        &app.db.runtime_url,
        "--database-migrate-url",
        &app.db.migrate_url,
        "--database-schema",
        "deployments",
        "--nats-url",
        &app.nats.url,
        "--nats-prefix",
        &app.nats.prefix,
        "--jwt-public-keys-file",
        app.keys.jwks_path().to_str().unwrap(),
        "--service-token-file",
        token_file.to_str().unwrap(),
        "--coordinator-url",
        coordinator_url,
        // Not asked by GetPlans (and the service token is an access token, used as is).
        "--tenancy-url",
        "http://127.0.0.1:9",
        "--templates-url",
        "http://127.0.0.1:9",
    ])
    .unwrap();
    cairn_deployments::Server::start(config)
        .await
        .expect("start the second deployments process")
}

/// A plan run of a new state: registered, admitted and its plan stored with `masked`.
async fn stored_plan(fx: &Fixtures, name: &str, masked: &serde_json::Value) -> (Uuid, String, u64) {
    let state = fx.create_state(name).await;
    let req = fx.registration(&state, spb::RunKind::Plan, "staging");
    let config_hash = req.config_hash.clone();
    let run = fx.register_run(req).await;
    let admitted = fx.admit(&run).await.unwrap();
    let put = fx
        .runs()
        .put_plan(spb::PutPlanRequest {
            run_id: run.clone(),
            attempt: admitted.attempt,
            plan: format!("saved plan of {name}").into_bytes(),
            tags: Some(spb::PlanTags {
                config_hash,
                base_generation: admitted.base_generation,
                tofu_version: "1.12.6".into(),
                provider_lock_hash: String::new(),
                module_library_hash: String::new(),
            }),
            provider_lock_file: Vec::new(),
            masked_plan_json: serde_json::to_vec(masked).unwrap(),
        })
        .await
        .unwrap()
        .into_inner();
    (
        Uuid::parse_str(&run).unwrap(),
        put.plan_sha256,
        admitted.base_generation,
    )
}

#[tokio::test]
async fn get_plans_returns_the_masked_plans_the_coordinator_stored() {
    let app = spawn_app().await;
    let dep = queued(&app).await;
    let id = &dep.deployment_id;

    // The coordinator, on its own database, the test's NATS prefix and signing keys.
    let cdb = cairn_testkit::fresh_database().await;
    let aws = cairn_testkit::TestAws::create().await;
    let config = coordinator::test_config(&cdb, &app.nats, &aws, &app.keys);
    let edges = coordinator::aws_edges(&aws, &aws.endpoint, &aws.endpoint);
    let (coord, channel) = coordinator::start(config, edges).await;
    let fx = Fixtures::new(channel, app.keys.service_token());

    let network_json = serde_json::json!({
        "format_version": "1.2",
        "resource_changes": [{"address": "local_file.network",
            "change": {"actions": ["create"], "after": {"content": "net", "token": "(sensitive)"}}}]
    });
    let database_json = serde_json::json!({
        "format_version": "1.2",
        "resource_changes": [{"address": "local_file.database",
            "change": {"actions": ["delete", "create"], "after": {"password": "(sensitive)"}}}]
    });
    let (network_run, network_sha, network_base) = stored_plan(&fx, "network", &network_json).await;
    let (old_db_run, _, _) = stored_plan(&fx, "database-old", &database_json).await;
    let (db_run, db_sha, db_base) = stored_plan(&fx, "database", &database_json).await;
    // A registered plan run that stored no plan (it failed before PutPlan).
    let queue_state = fx.create_state("queue").await;
    let queue_run = fx
        .register(&queue_state, spb::RunKind::Plan, "staging")
        .await;

    // The steps as the worker records them: network planned (low risk); database planned
    // twice (the later plan replaces the earlier); queue's run has no plan; web not yet.
    sql(
        &app,
        &format!(
            "UPDATE steps SET run_id = '{network_run}', status = 'succeeded', plan_add = 1,
                plan_change = 0, plan_destroy = 0, plan_replaced = '{{}}', plan_risk = 'low'
          WHERE deployment_id = '{id}' AND kind = 'apply' AND resource = 'network';
         UPDATE steps SET run_id = '{old_db_run}', plan_add = 0, plan_change = 1,
                plan_destroy = 0, plan_replaced = '{{}}', plan_risk = 'low'
          WHERE deployment_id = '{id}' AND kind = 'apply' AND resource = 'database';
         UPDATE steps SET run_id = '{db_run}', plan_add = 1, plan_change = 0, plan_destroy = 1,
                plan_replaced = '{{local_file.database}}', plan_risk = 'high'
          WHERE deployment_id = '{id}' AND kind = 'verify' AND resource = 'database';
         UPDATE steps SET run_id = '{queue_run}', plan_add = 0, plan_change = 0, plan_destroy = 0,
                plan_replaced = '{{}}', plan_risk = 'unknown'
          WHERE deployment_id = '{id}' AND kind = 'apply' AND resource = 'queue';
         UPDATE deployments SET plan_set_hash = 'hash-of-the-plans' WHERE deployment_id = '{id}'"
        ),
    )
    .await;

    let dir = cairn_testkit::temp_dir();
    let second = deployments_with(&app, &format!("http://{}", coord.grpc_addr()), dir.path()).await;
    let channel = cairn_testkit::connect_grpc(second.grpc_addr()).await;
    let client = |tenant: Uuid, role: Role| {
        pb::deployments_client::DeploymentsClient::new(
            tonic::service::interceptor::InterceptedService::new(
                channel.clone(),
                cairn_testkit::Bearer(app.keys.user_token(tenant, role).into()),
            ),
        )
    };

    let got = client(app.tenant, Role::Viewer)
        .get_plans(pb::GetPlansRequest {
            tenant_id: app.tenant.to_string(),
            deployment_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.plan_set_hash, "hash-of-the-plans");
    // In step order, one per resource; queue's run stored no plan, web has none.
    let resources: Vec<&str> = got.plans.iter().map(|p| p.resource.as_str()).collect();
    assert_eq!(resources, ["network", "database"]);
    let network = got.plans.iter().find(|p| p.resource == "network").unwrap();
    assert_eq!(network.run_id, network_run.to_string());
    assert_eq!(network.plan_sha256, network_sha);
    assert_eq!(network.base_generation, network_base);
    let summary = network.summary.as_ref().unwrap();
    assert_eq!((summary.add, summary.change, summary.destroy), (1, 0, 0));
    assert_eq!(summary.risk, "low");
    let stored: serde_json::Value = serde_json::from_str(&network.masked_plan_json).unwrap();
    assert_eq!(stored, network_json);

    // The database was planned again by a later step: that plan replaced the first.
    let database = &got.plans[1];
    assert_eq!(database.run_id, db_run.to_string());
    assert_ne!(database.run_id, old_db_run.to_string());
    assert_eq!(database.plan_sha256, db_sha);
    assert_eq!(database.base_generation, db_base);
    let summary = database.summary.as_ref().unwrap();
    assert_eq!(summary.replaced, ["local_file.database"]);
    assert_eq!(summary.risk, "high");
    let stored: serde_json::Value = serde_json::from_str(&database.masked_plan_json).unwrap();
    assert_eq!(stored, database_json);

    // Another tenant: NOT_FOUND, with their tenant or ours.
    let other = Uuid::new_v4();
    for tenant in [other, app.tenant] {
        let err = client(other, Role::Admin)
            .get_plans(pb::GetPlansRequest {
                tenant_id: tenant.to_string(),
                deployment_id: id.clone(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{err:?}");
    }
}
