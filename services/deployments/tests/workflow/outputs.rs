//! Instance outputs: after deploying web-stack, GetInstance shows the outputs its template
//! declares, with the values of the resources' states at the coordinator (and of the files
//! on disk), the sensitive one withheld; none before the first deployment or once
//! destroyed.
use std::collections::BTreeMap;

use cairn_proto::deployments as pb;
use cairn_proto::state as spb;
use pb::DeploymentStatus as S;

use crate::helpers::{PARAMS, authed};
use crate::rig::*;

/// The outputs of a resource's state, as the coordinator answers a service.
async fn state_outputs(rig: &Rig, state_id: &str) -> BTreeMap<String, spb::Output> {
    let channel = tonic::transport::Channel::from_shared(rig.config.peers.coordinator_url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut runs = spb::runs_client::RunsClient::new(authed(&channel, rig.keys.service_token()));
    runs.get_outputs(spb::GetOutputsRequest {
        state_id: state_id.to_owned(),
    })
    .await
    .unwrap()
    .into_inner()
    .outputs
    .into_iter()
    .map(|o| (o.name.clone(), o))
    .collect()
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON: {text:?}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployed_instance_shows_its_outputs_with_the_sensitive_one_withheld() {
    let rig = rig(Opts::default()).await;
    let created = rig.create_instance("shop", "staging", PARAMS).await;
    assert!(created.outputs.is_empty(), "{:?}", created.outputs);
    assert!(rig.instance("shop").await.outputs.is_empty());

    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");

    let shop = rig.instance("shop").await;
    let names: Vec<&str> = shop.outputs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "url",
            "database_endpoint",
            "database_port",
            "queue_url",
            "database_admin_username",
            "service_config_path",
            "database_config_path",
        ]
    );
    let out: BTreeMap<&str, &pb::InstanceOutput> =
        shop.outputs.iter().map(|o| (o.name.as_str(), o)).collect();
    let state_of = |resource: &str| {
        shop.resources
            .iter()
            .find(|r| r.name == resource)
            .unwrap_or_else(|| panic!("no resource {resource}: {:?}", shop.resources))
            .state_id
            .clone()
    };

    // Every value is the one in the state of the resource it names.
    let mut states = BTreeMap::new();
    for resource in ["web", "database", "queue"] {
        states.insert(resource, state_outputs(&rig, &state_of(resource)).await);
    }
    for (name, resource, output) in [
        ("url", "web", "url"),
        ("database_endpoint", "database", "endpoint"),
        ("database_port", "database", "port"),
        ("queue_url", "queue", "url"),
        ("service_config_path", "web", "config_path"),
        ("database_config_path", "database", "config_path"),
    ] {
        let o = out[name];
        assert!(!o.sensitive, "{o:?}");
        assert!(o.unavailable_reason.is_empty(), "{o:?}");
        assert!(!o.description.is_empty(), "{o:?}");
        let state = &states[resource][output];
        assert!(!state.sensitive, "{state:?}");
        assert_eq!(json(&o.value_json), json(&state.value_json), "{name}");
    }
    // The values are what the stack's parameters make them.
    assert_eq!(
        json(&out["url"].value_json),
        "http://shop.service.internal:8080"
    );
    assert_eq!(
        json(&out["database_endpoint"].value_json),
        "shop.database.internal"
    );
    assert_eq!(json(&out["database_port"].value_json), 5432);

    // The sensitive one is withheld: marked, without a value, though the state has it.
    let user = out["database_admin_username"];
    assert!(user.sensitive, "{user:?}");
    assert!(user.value_json.is_empty(), "{user:?}");
    assert!(user.unavailable_reason.is_empty(), "{user:?}");
    let in_state = &states["database"]["admin_username"];
    assert_eq!(json(&in_state.value_json), "cairn_admin");

    // The files on disk agree: the config paths are the files the modules wrote, and the
    // web service's environment file names the same endpoints.
    let base = rig.base_dir.path();
    for (name, file) in [
        ("service_config_path", "shop/service.json"),
        ("database_config_path", "shop/database.json"),
    ] {
        let path = json(&out[name].value_json);
        let path = std::path::PathBuf::from(path.as_str().unwrap());
        assert_eq!(
            std::fs::canonicalize(&path).unwrap(),
            std::fs::canonicalize(base.join(file)).unwrap(),
            "{name}"
        );
    }
    let env = std::fs::read_to_string(base.join("shop/service.env")).unwrap();
    for (key, name) in [
        ("SERVICE_URL", "url"),
        ("DATABASE_HOST", "database_endpoint"),
        ("DATABASE_PORT", "database_port"),
    ] {
        let value = json(&out[name].value_json);
        let value = value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
        assert!(env.contains(&format!("{key}={value}\n")), "{key}: {env}");
    }
    let queue = std::fs::read_to_string(base.join("shop/queue.json")).unwrap();
    assert!(
        queue.contains(json(&out["queue_url"].value_json).as_str().unwrap()),
        "{queue}"
    );

    // ListInstances leaves them out (GetInstance reads them).
    let (mut i, _) = rig.clients();
    let listed = i
        .list_instances(pb::ListInstancesRequest {
            tenant_id: rig.tenant.to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .instances;
    assert_eq!(listed.len(), 1);
    assert!(listed[0].outputs.is_empty());

    // Destroyed: no snapshot is applied any more, so no outputs.
    let id = rig.request("shop", pb::DeploymentKind::Destroy, "").await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    let shop = rig.instance("shop").await;
    assert_eq!(shop.status, pb::InstanceStatus::Destroyed as i32);
    assert!(shop.outputs.is_empty(), "{:?}", shop.outputs);
}
