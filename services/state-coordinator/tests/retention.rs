//! Retention: intermediate generations of finished runs are pruned with their objects;
//! final generations and the current one are kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::Duration;

use cairn_proto::state as pb;
use cairn_state_coordinator::background::sweeper::{SweepSettings, sweep_once};
use common::*;
use uuid::Uuid;

#[tokio::test]
async fn intermediate_generations_of_finished_runs_are_pruned_on_s3() {
    intermediate_generations_are_pruned(Store::S3).await;
}

#[tokio::test]
async fn intermediate_generations_of_finished_runs_are_pruned_on_the_file_store() {
    intermediate_generations_are_pruned(Store::File).await;
}

async fn intermediate_generations_are_pruned(store: Store) {
    let app = spawn_app_with(on(store)).await;
    let state_id = app.create_state("retained").await;
    // Run 1 writes three snapshots (1, 2 intermediate; 3 final at unlock).
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let lock = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &lock).await.status, 200);
    assert_eq!(app.get(&a).await.status, 404);
    for serial in 1..=3 {
        let r = app
            .post(&a, &lock, &state_doc(serial, "L", &format!("v{serial}")))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(app.unlock(&a, &lock).await.status, 200);
    // Run 2 is still running: its intermediate generation must survive.
    let b = app.start_run(&state_id, pb::RunKind::Apply).await;
    let lock_b = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&b, &lock_b).await.status, 200);
    assert_eq!(app.get(&b).await.status, 200);
    assert_eq!(
        app.post(&b, &lock_b, &state_doc(4, "L", "v4")).await.status,
        200
    );
    assert_eq!(
        app.post(&b, &lock_b, &state_doc(5, "L", "v5")).await.status,
        200
    );

    let settings = SweepSettings {
        interval: Duration::from_secs(3600),
        pending_ttl: Duration::from_secs(3600),
        intermediate_retention: Duration::ZERO,
        time_limit: cairn_db::BACKGROUND_LIMIT,
    };
    let pool = app.admin_pool().await;
    let objects_of = async |gens: &[i64]| -> Vec<(String, String)> {
        let mut out = Vec::new();
        for g in gens {
            let row: (String, String) = sqlx::query_as(
                "SELECT object_key, object_version FROM generations WHERE state_id = $1::uuid AND generation = $2",
            )
            .bind(&state_id)
            .bind(g)
            .fetch_one(&pool)
            .await
            .unwrap();
            out.push(row);
        }
        out
    };
    // Run 1 has not finished yet: nothing of it is pruned.
    let report = sweep_once(app.server().app(), &settings).await.unwrap();
    assert_eq!(report.intermediate, 0);
    let pruned_objects = objects_of(&[1, 2]).await;
    for (key, version) in &pruned_objects {
        assert!(
            object_exists(&app, key, version).await,
            "{key} should exist before pruning"
        );
    }

    app.finish(&a, pb::RunOutcome::Succeeded).await;
    let report = sweep_once(app.server().app(), &settings).await.unwrap();
    assert_eq!(report.intermediate, 2, "{report:?}");

    let left: Vec<(i64, bool)> =
        sqlx::query_as("SELECT generation, is_final FROM generations WHERE state_id = $1::uuid ORDER BY generation")
            .bind(&state_id)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(left, vec![(3, true), (4, false), (5, false)]);
    for (key, version) in &pruned_objects {
        assert!(
            !object_exists(&app, key, version).await,
            "pruned object {key} still readable"
        );
    }
    // The state still reads: run 2 sees its own last write.
    let got = app.get(&b).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, state_doc(5, "L", "v5"));
}

async fn object_exists(app: &TestApp, key: &str, version: &str) -> bool {
    app.object_bytes(key, version).await.is_some()
}
