//! Another tenant's templates, versions and snapshots are NOT_FOUND; unauthenticated calls
//! are refused; health answers without a token.
use cairn_auth::Role;
use cairn_proto::templates as pb;
use tonic::Code;
use uuid::Uuid;

use crate::helpers::*;

#[tokio::test]
async fn another_tenant_gets_not_found() {
    let app = spawn_app().await;
    let (template_id, _) = app.published_webapp().await;
    let (_, mut r) = app.clients();
    let snapshot = r
        .resolve(resolve_request(&template_id, "staging"))
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();

    let other = Uuid::new_v4();
    let (mut t, mut r) = app.clients_for(other, Role::Owner);
    let codes = [
        t.get_template(pb::GetTemplateRequest {
            template_id: template_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err()
        .code(),
        t.get_version(pb::GetVersionRequest {
            template_id: template_id.clone(),
            version: "1".into(),
        })
        .await
        .unwrap_err()
        .code(),
        t.list_versions(pb::ListVersionsRequest {
            template_id: template_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err()
        .code(),
        t.publish_version(pb::PublishVersionRequest {
            template_id: template_id.clone(),
            document: webapp(),
        })
        .await
        .unwrap_err()
        .code(),
        r.resolve(resolve_request(&template_id, "staging"))
            .await
            .unwrap_err()
            .code(),
        r.get_snapshot(pb::GetSnapshotRequest {
            snapshot_id: snapshot.snapshot_id.clone(),
        })
        .await
        .unwrap_err()
        .code(),
        r.diff(pb::DiffRequest {
            previous_snapshot_id: String::new(),
            snapshot_id: snapshot.snapshot_id.clone(),
        })
        .await
        .unwrap_err()
        .code(),
        t.list_templates(pb::ListTemplatesRequest {
            tenant_id: app.tenant.to_string(),
            ..Default::default()
        })
        .await
        .unwrap_err()
        .code(),
    ];
    assert!(codes.iter().all(|c| *c == Code::NotFound), "{codes:?}");
    // The other tenant's own listing is empty.
    let own = t
        .list_templates(pb::ListTemplatesRequest {
            tenant_id: other.to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(own.templates.is_empty());
}

#[tokio::test]
async fn unauthenticated_calls_are_refused_and_health_is_open() {
    let app = spawn_app().await;
    let mut anon = pb::templates_client::TemplatesClient::new(app.channel.clone());
    let err = anon
        .list_templates(pb::ListTemplatesRequest {
            tenant_id: app.tenant.to_string(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let mut health = tonic_health::pb::health_client::HealthClient::new(app.channel.clone());
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "cairn.templates.v1.Resolver".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(
        status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    app.server.shutdown().await;
}

#[tokio::test]
async fn a_template_is_found_by_name_in_its_own_tenant_only() {
    let app = spawn_app().await;
    let (template_id, _) = app.published_webapp().await;
    let by_name = |tenant: Uuid| pb::GetTemplateRequest {
        tenant_id: tenant.to_string(),
        name: "webapp".into(),
        ..Default::default()
    };
    let (mut t, _) = app.clients_for(app.tenant, Role::Viewer);
    let found = t
        .get_template(by_name(app.tenant))
        .await
        .unwrap()
        .into_inner()
        .template
        .unwrap();
    assert_eq!(found.template_id, template_id);
    assert_eq!(found.latest_version, 1);

    // A service (the workflow) finds it too.
    let mut service = Templates::new(tonic::service::interceptor::InterceptedService::new(
        app.channel.clone(),
        Bearer(app.keys.service_token().into()),
    ));
    let found = service
        .get_template(by_name(app.tenant))
        .await
        .unwrap()
        .into_inner()
        .template
        .unwrap();
    assert_eq!(found.template_id, template_id);

    // Another tenant neither has one of that name nor may ask in this tenant.
    let other = Uuid::new_v4();
    let (mut t, _) = app.clients_for(other, Role::Owner);
    for tenant in [other, app.tenant] {
        let err = t.get_template(by_name(tenant)).await.unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{err:?}");
    }
}
