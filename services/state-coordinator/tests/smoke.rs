//! The basic life of a state through the HTTP backend and gRPC.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use cairn_proto::state as pb;
use common::*;

#[tokio::test]
async fn apply_then_read_back_through_a_new_run() {
    let app = spawn_app().await;
    let state_id = app.create_state("db-main").await;
    let doc = state_doc(1, "lineage-a", "hello");
    app.apply_doc(&state_id, &doc).await;

    let info = app.state_info(&state_id).await;
    assert_eq!(info.current_generation, 1);

    let plan = app.start_run(&state_id, pb::RunKind::Plan).await;
    assert_eq!(plan.base_generation, 1);
    let got = app.get(&plan).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, doc);

    let outputs = app
        .runs(&app.service_token())
        .get_outputs(pb::GetOutputsRequest {
            state_id: state_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outputs.generation, 1);
    let pw = outputs
        .outputs
        .iter()
        .find(|o| o.name == "password")
        .unwrap();
    assert!(pw.sensitive && pw.value_json.is_empty());
    let name = outputs.outputs.iter().find(|o| o.name == "name").unwrap();
    assert_eq!(name.value_json, "\"hello\"");
}
