//! Resolve, GetSnapshot and Diff over gRPC.
use cairn_proto::templates as pb;
use tonic::Code;

use crate::helpers::*;

#[tokio::test]
async fn resolve_stores_one_immutable_snapshot_per_content() {
    let app = spawn_app().await;
    let (template_id, v1) = app.published_webapp().await;
    let (_, mut r) = app.clients();
    let first = r
        .resolve(resolve_request(&template_id, "staging"))
        .await
        .unwrap()
        .into_inner();
    assert!(first.created);
    let s = first.snapshot.unwrap();
    assert_eq!(s.template_version, v1.content_hash);
    let names: Vec<&str> = s.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["net", "db", "app"]);
    assert_eq!(
        s.resources[1].sensitive_variable_refs["db_password"],
        "arn:aws:secretsmanager:us-east-1:1:secret:db"
    );
    assert!(s.resources[0].state_key.starts_with("cairn/shop-net-"));
    let parsed = cairn_templating::Snapshot::from_json(&s.snapshot_json).unwrap();
    assert_eq!(parsed.hash(), s.hash);
    assert_eq!(parsed.tenant_id, app.tenant.to_string());

    // The workflow (a service) resolving the same gets the same stored snapshot.
    let again = app
        .service_resolver()
        .resolve(resolve_request(&template_id, "staging"))
        .await
        .unwrap()
        .into_inner();
    assert!(!again.created);
    let again = again.snapshot.unwrap();
    assert_eq!(again.snapshot_id, s.snapshot_id);
    assert_eq!(again.hash, s.hash);

    let got = r
        .get_snapshot(pb::GetSnapshotRequest {
            snapshot_id: s.snapshot_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_eq!(got.snapshot_json, s.snapshot_json);

    // Production changes two resources' inputs.
    let prod = r
        .resolve(resolve_request(&template_id, "production"))
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_ne!(prod.hash, s.hash);
    let diff = r
        .diff(pb::DiffRequest {
            previous_snapshot_id: s.snapshot_id.clone(),
            snapshot_id: prod.snapshot_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .resources;
    let got: Vec<(String, i32, Vec<String>)> = diff
        .into_iter()
        .map(|d| (d.name, d.change, d.changed_inputs))
        .collect();
    assert_eq!(
        got,
        [
            ("net".into(), pb::ChangeKind::Unchanged as i32, vec![]),
            (
                "db".into(),
                pb::ChangeKind::Update as i32,
                vec!["size_gb".into()]
            ),
            (
                "app".into(),
                pb::ChangeKind::Update as i32,
                vec!["replicas".into()]
            ),
        ]
    );
    let fresh = r
        .diff(pb::DiffRequest {
            previous_snapshot_id: String::new(),
            snapshot_id: prod.snapshot_id,
        })
        .await
        .unwrap()
        .into_inner()
        .resources;
    assert!(fresh.iter().all(|d| d.change == pb::ChangeKind::Add as i32));
}

#[tokio::test]
async fn prod_and_production_resolve_to_the_same_production_snapshot() {
    let app = spawn_app().await;
    let (template_id, _) = app.published_webapp().await;
    let (_, mut r) = app.clients();
    let production = r
        .resolve(resolve_request(&template_id, "production"))
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_eq!(production.environment, "production");
    for alias in ["prod", "Production"] {
        let got = r
            .resolve(resolve_request(&template_id, alias))
            .await
            .unwrap()
            .into_inner();
        // The same overrides, so the same content: the stored snapshot is found again.
        assert!(!got.created, "{alias}");
        let s = got.snapshot.unwrap();
        assert_eq!(s.environment, "production", "{alias}");
        assert_eq!(
            (s.snapshot_id.as_str(), s.hash.as_str()),
            (production.snapshot_id.as_str(), production.hash.as_str()),
            "{alias}"
        );
    }
    for bad in ["pre.prod", "a b", ""] {
        let err = r
            .resolve(resolve_request(&template_id, bad))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
        assert!(err.message().contains("environment"), "{}", err.message());
    }
}

#[tokio::test]
async fn resolve_problems_are_invalid_argument() {
    let app = spawn_app().await;
    let (template_id, _) = app.published_webapp().await;
    let (_, mut r) = app.clients();
    let mut req = resolve_request(&template_id, "staging");
    req.parameters_json = r#"{"replicas": 99, "nope": 1}"#.into();
    req.target_settings.clear();
    let err = r.resolve(req).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    for needle in [
        "parameters.replicas",
        "parameters.nope",
        "parameters.db_password",
    ] {
        assert!(
            err.message().contains(needle),
            "{needle}: {}",
            err.message()
        );
    }
    let mut req = resolve_request(&template_id, "staging");
    req.version = "7".into();
    assert_eq!(r.resolve(req).await.unwrap_err().code(), Code::NotFound);
    let mut req = resolve_request(&template_id, "staging");
    req.parameters_json = "[1]".into();
    assert_eq!(
        r.resolve(req).await.unwrap_err().code(),
        Code::InvalidArgument
    );
}

#[tokio::test]
async fn a_version_the_current_library_rejects_fails_its_precondition() {
    let app = spawn_app().await;
    let (template_id, _) = app.published_webapp().await;
    // A second server on the same database whose library lacks local/service.
    let dir = cairn_testkit::temp_dir();
    let local = dir.path().join("local");
    for kind in ["network", "database"] {
        let to = local.join(kind);
        std::fs::create_dir_all(&to).unwrap();
        for f in ["main.tf", "module.cairn.json"] {
            std::fs::copy(
                fixture_modules().join("local").join(kind).join(f),
                to.join(f),
            )
            .unwrap();
        }
    }
    let second =
        cairn_templates::Server::start(config_for(&app.db, &app.keys, dir.path().to_owned()))
            .await
            .unwrap();
    let channel = cairn_testkit::connect_grpc(second.grpc_addr()).await;
    let token = app.keys.user_token(app.tenant, cairn_auth::Role::Operator);
    let mut r = pb::resolver_client::ResolverClient::new(
        tonic::service::interceptor::InterceptedService::new(channel, Bearer(token.into())),
    );
    let err = r
        .resolve(resolve_request(&template_id, "staging"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("unknown module \"local/service\""),
        "{}",
        err.message()
    );
    second.shutdown().await;
}
