//! Templates and versions: create, publish (validated, idempotent, immutable), get, list.
use cairn_proto::templates as pb;
use tonic::Code;

use crate::helpers::*;

#[tokio::test]
async fn publish_is_idempotent_and_versions_are_numbered() {
    let app = spawn_app().await;
    let (template_id, v1) = app.published_webapp().await;
    assert_eq!(v1.number, 1);
    assert_eq!(v1.content_hash, cairn_templating::content_hash(&webapp()));
    let (mut t, _) = app.clients();
    // Same content again: the same version, not a new one.
    let again = t
        .publish_version(pb::PublishVersionRequest {
            template_id: template_id.clone(),
            document: webapp(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!again.created);
    assert_eq!(again.version.unwrap().number, 1);
    // New content: version 2.
    let changed = webapp().replace("default: shop", "default: shop2");
    let v2 = t
        .publish_version(pb::PublishVersionRequest {
            template_id: template_id.clone(),
            document: changed.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(v2.created);
    assert_eq!(v2.version.unwrap().number, 2);
    // Get by number and by hash.
    let by_hash = t
        .get_version(pb::GetVersionRequest {
            template_id: template_id.clone(),
            version: cairn_templating::content_hash(&changed),
        })
        .await
        .unwrap()
        .into_inner()
        .version
        .unwrap();
    assert_eq!(by_hash.number, 2);
    assert_eq!(by_hash.document, changed);
    let list = t
        .list_versions(pb::ListVersionsRequest {
            template_id: template_id.clone(),
            page_size: 1,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.versions.len(), 1);
    assert_eq!(list.next_page_token, "1");
    let template = t
        .get_template(pb::GetTemplateRequest {
            template_id: template_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .template
        .unwrap();
    assert_eq!(template.latest_version, 2);
    // Creating the same template again is idempotent.
    let again = t
        .create_template(pb::CreateTemplateRequest {
            tenant_id: app.tenant.to_string(),
            name: "webapp".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!again.created);
    assert_eq!(again.template.unwrap().template_id, template_id);
}

#[tokio::test]
async fn invalid_documents_report_every_problem_and_store_nothing() {
    let app = spawn_app().await;
    let (mut t, mut r) = app.clients();
    let template = t
        .create_template(pb::CreateTemplateRequest {
            tenant_id: app.tenant.to_string(),
            name: "broken".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .template
        .unwrap();
    let doc = "name: broken\nresources:\n  a:\n    module: local/nope\n  b:\n    module: local/network\n    inputs:\n      colour: 1\n";
    let err = t
        .publish_version(pb::PublishVersionRequest {
            template_id: template.template_id.clone(),
            document: doc.into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("2 problem(s)"), "{}", err.message());
    assert!(
        err.message()
            .contains("resources.a.module at 4:13 (unknown_module)"),
        "{}",
        err.message()
    );
    assert!(
        err.message()
            .contains("resources.b.inputs.colour at 8:7 (unknown_input)"),
        "{}",
        err.message()
    );
    let id = uuid::Uuid::parse_str(&template.template_id).unwrap();
    assert_eq!(app.server.app().version_count(id.into()).await.unwrap(), 0);

    // A document for another template's name is refused too.
    let err = t
        .publish_version(pb::PublishVersionRequest {
            template_id: template.template_id.clone(),
            document: webapp(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(app.server.app().version_count(id.into()).await.unwrap(), 0);

    // Validate returns the same problems, structured.
    let v = r
        .validate(pb::ValidateRequest {
            document: doc.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!v.valid);
    let got: Vec<(&str, &str, u32, u32)> = v
        .problems
        .iter()
        .map(|p| (p.kind.as_str(), p.path.as_str(), p.line, p.column))
        .collect();
    assert_eq!(
        got,
        [
            ("unknown_module", "resources.a.module", 4, 13),
            ("unknown_input", "resources.b.inputs.colour", 8, 7)
        ]
    );
    let ok = r
        .validate(pb::ValidateRequest { document: webapp() })
        .await
        .unwrap()
        .into_inner();
    assert!(ok.valid, "{:?}", ok.problems);
    assert_eq!(ok.content_hash, cairn_templating::content_hash(&webapp()));

    // Oversized documents are refused (the test server allows 256 KiB).
    let big = format!(
        "name: broken\ndescription: {}\nresources: {{}}\n",
        "x".repeat(300 * 1024)
    );
    let err = t
        .publish_version(pb::PublishVersionRequest {
            template_id: template.template_id.clone(),
            document: big,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("too_large"), "{}", err.message());
    assert_eq!(app.server.app().version_count(id.into()).await.unwrap(), 0);
}

#[tokio::test]
async fn versions_and_snapshots_are_immutable_in_the_database() {
    let app = spawn_app().await;
    let (template_id, _) = app.published_webapp().await;
    let (_, mut r) = app.clients();
    r.resolve(resolve_request(&template_id, "staging"))
        .await
        .unwrap();
    let pool = &app.server.app().pool;
    let err = sqlx::query("UPDATE template_versions SET document = 'x' WHERE template_id = $1")
        .bind(uuid::Uuid::parse_str(&template_id).unwrap())
        .execute(pool)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("denied") || err.to_string().contains("immutable"),
        "{err}"
    );
    let err = sqlx::query("DELETE FROM template_versions")
        .execute(pool)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("denied") || err.to_string().contains("immutable"),
        "{err}"
    );
    // Even the migrator role, which owns the tables, cannot change them: the triggers refuse.
    let owner = cairn_db::connect(&cairn_db::PoolSettings::new(
        app.db.migrate_url.clone(),
        "templates".to_owned(),
    ))
    .unwrap();
    for stmt in [
        "UPDATE template_versions SET document = 'x'",
        "DELETE FROM template_versions",
        "TRUNCATE template_versions CASCADE",
        "UPDATE snapshots SET document = 'x'",
        "DELETE FROM snapshots",
    ] {
        let err = sqlx::query(stmt).execute(&owner).await.unwrap_err();
        assert!(err.to_string().contains("is immutable"), "{stmt}: {err}");
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM template_versions")
        .fetch_one(&owner)
        .await
        .unwrap();
    assert_eq!(count, 1);
}

#[tokio::test]
async fn viewers_cannot_publish() {
    let app = spawn_app().await;
    let (template_id, _) = app.published_webapp().await;
    let (mut t, _) = app.clients_for(app.tenant, cairn_auth::Role::Viewer);
    let err = t
        .publish_version(pb::PublishVersionRequest {
            template_id: template_id.clone(),
            document: webapp().replace("default: shop", "default: other"),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    // Reading is fine.
    t.get_version(pb::GetVersionRequest {
        template_id,
        version: "1".into(),
    })
    .await
    .unwrap();
}
