//! Instances over gRPC: create, get, list, update and delete by id and by name; tenant
//! isolation, roles, parameter and environment checks.
use cairn_auth::Role;
use cairn_proto::deployments as pb;
use tonic::Code;
use uuid::Uuid;

use crate::helpers::*;

#[tokio::test]
async fn create_get_list_update_delete_by_id_and_by_name() {
    let app = spawn_app().await;
    let created = app.create_instance("shop", "Prod").await;
    assert_eq!(created.name, "shop");
    assert_eq!(
        created.environment, "production",
        "the one environment rule"
    );
    assert_eq!(created.template_id, app.template_id);
    assert_eq!(created.template_version, 1, "0 asks for the latest");
    assert_eq!(created.target_id, app.target_id);
    assert_eq!(created.status, pb::InstanceStatus::Pending as i32);
    assert!(created.active_deployment_id.is_empty());
    assert!(created.last_applied_snapshot_id.is_empty());

    let (mut i, _) = app.clients_for(app.tenant, Role::Viewer);
    for r in [created.instance_id.clone(), "shop".to_owned()] {
        let got = i
            .get_instance(pb::GetInstanceRequest {
                tenant_id: app.tenant.to_string(),
                instance_ref: r,
            })
            .await
            .unwrap()
            .into_inner()
            .instance
            .unwrap();
        assert_eq!(got.instance_id, created.instance_id);
        assert_eq!(got.parameters_json, created.parameters_json);
    }

    // The same name again is ALREADY_EXISTS; a second instance by ids.
    let (mut op, _) = app.clients();
    let again = op
        .create_instance(app.create_request("shop", "staging"))
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists, "{again:?}");
    let by_ids = op
        .create_instance(pb::CreateInstanceRequest {
            template_ref: app.template_id.clone(),
            template_version: 1,
            target_ref: app.target_id.clone(),
            ..app.create_request("blog", "staging")
        })
        .await
        .unwrap()
        .into_inner()
        .instance
        .unwrap();
    assert_eq!(by_ids.environment, "staging");

    // Listing pages through both.
    let first = i
        .list_instances(pb::ListInstancesRequest {
            tenant_id: app.tenant.to_string(),
            page_size: 1,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.instances.len(), 1);
    assert!(!first.next_page_token.is_empty());
    let second = i
        .list_instances(pb::ListInstancesRequest {
            tenant_id: app.tenant.to_string(),
            page_size: 1,
            page_token: first.next_page_token,
        })
        .await
        .unwrap()
        .into_inner();
    let mut names: Vec<String> = first
        .instances
        .iter()
        .chain(&second.instances)
        .map(|x| x.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, ["blog", "shop"]);

    // Update by name: a merge patch (null removes), the version kept.
    let updated = op
        .update_instance(pb::UpdateInstanceRequest {
            tenant_id: app.tenant.to_string(),
            instance_ref: "shop".into(),
            template_version: 0,
            parameters_patch_json: r#"{"replicas": 3, "image": null}"#.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .instance
        .unwrap();
    let params: serde_json::Value = serde_json::from_str(&updated.parameters_json).unwrap();
    assert_eq!(params["replicas"], 3);
    assert!(params.get("db_admin_password").is_some());
    assert_eq!(updated.template_version, 1);

    // Delete by id and by name; then they are gone.
    for r in [by_ids.instance_id.clone(), "shop".to_owned()] {
        op.delete_instance(pb::DeleteInstanceRequest {
            tenant_id: app.tenant.to_string(),
            instance_ref: r.clone(),
        })
        .await
        .unwrap();
        let gone = i
            .get_instance(pb::GetInstanceRequest {
                tenant_id: app.tenant.to_string(),
                instance_ref: r,
            })
            .await
            .unwrap_err();
        assert_eq!(gone.code(), Code::NotFound, "{gone:?}");
    }
}

#[tokio::test]
async fn another_tenants_instance_is_not_found_and_viewers_cannot_write() {
    let app = spawn_app().await;
    let shop = app.create_instance("shop", "staging").await;
    let other = Uuid::new_v4();
    let (mut i, _) = app.clients_for(other, Role::Owner);
    for (tenant, r) in [
        (other, shop.instance_id.clone()),
        (other, "shop".to_owned()),
        (app.tenant, shop.instance_id.clone()),
    ] {
        let got = i
            .get_instance(pb::GetInstanceRequest {
                tenant_id: tenant.to_string(),
                instance_ref: r.clone(),
            })
            .await
            .unwrap_err();
        assert_eq!(got.code(), Code::NotFound, "{tenant} {r}: {got:?}");
        let del = i
            .delete_instance(pb::DeleteInstanceRequest {
                tenant_id: tenant.to_string(),
                instance_ref: r.clone(),
            })
            .await
            .unwrap_err();
        assert_eq!(del.code(), Code::NotFound, "{tenant} {r}: {del:?}");
    }
    // Another tenant cannot name this tenant's template or target either.
    let (mut mine, _) = app.clients_for(other, Role::Operator);
    let err = mine
        .create_instance(pb::CreateInstanceRequest {
            tenant_id: other.to_string(),
            template_ref: app.template_id.clone(),
            ..app.create_request("copy", "staging")
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");

    // A viewer reads but does not write.
    let (mut viewer, mut vd) = app.clients_for(app.tenant, Role::Viewer);
    let denied = viewer
        .create_instance(app.create_request("blog", "staging"))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let denied = viewer
        .update_instance(pb::UpdateInstanceRequest {
            tenant_id: app.tenant.to_string(),
            instance_ref: "shop".into(),
            template_version: 0,
            parameters_patch_json: r#"{"replicas": 3}"#.into(),
        })
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let denied = vd
        .create_deployment(app.deploy_request("shop", ""))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert_eq!(app.count("instances").await, 1);
    assert_eq!(app.count("deployments").await, 0);
}

#[tokio::test]
async fn malformed_parameters_are_refused_naming_the_parameter_and_nothing_is_created() {
    let app = spawn_app().await;
    let (mut i, _) = app.clients();
    let cases = [
        (r#"["not", "an", "object"]"#, "parameters_json"),
        ("{not json", "parameters_json"),
        // web-stack bounds replicas to 1..10.
        (
            r#"{"db_admin_password": "arn:x", "replicas": 50}"#,
            "replicas",
        ),
        (
            r#"{"db_admin_password": "arn:x", "db_engine_version": "9"}"#,
            "db_engine_version",
        ),
        // The one required parameter missing.
        (r#"{}"#, "db_admin_password"),
        (
            r#"{"db_admin_password": "arn:x", "no_such_parameter": 1}"#,
            "no_such_parameter",
        ),
    ];
    for (params, named) in cases {
        let err = i
            .create_instance(pb::CreateInstanceRequest {
                parameters_json: params.into(),
                ..app.create_request("shop", "staging")
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{params}: {err:?}");
        assert!(
            err.message().contains(named),
            "{params}: the message should name {named}: {}",
            err.message()
        );
    }
    // An unknown environment name and a bad instance name are refused too.
    for req in [
        app.create_request("shop", "not an environment!"),
        app.create_request("Shop", "staging"),
    ] {
        let err = i.create_instance(req).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    }
    assert_eq!(app.count("instances").await, 0);
    assert_eq!(app.count("outbox").await, 0);

    // An update with a bad patch changes nothing either.
    let shop = app.create_instance("shop", "staging").await;
    let err = i
        .update_instance(pb::UpdateInstanceRequest {
            tenant_id: app.tenant.to_string(),
            instance_ref: "shop".into(),
            template_version: 0,
            parameters_patch_json: r#"{"replicas": "many"}"#.into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("replicas"), "{}", err.message());
    let now = i
        .get_instance(pb::GetInstanceRequest {
            tenant_id: app.tenant.to_string(),
            instance_ref: "shop".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .instance
        .unwrap();
    assert_eq!(now.parameters_json, shop.parameters_json);
    // A version that does not exist is NOT_FOUND.
    let err = i
        .update_instance(pb::UpdateInstanceRequest {
            tenant_id: app.tenant.to_string(),
            instance_ref: "shop".into(),
            template_version: 7,
            parameters_patch_json: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
}
