//! Instance outputs through the service: a version with an `outputs:` section publishes,
//! its snapshot (Resolve and GetSnapshot) carries the declarations with sensitivity
//! propagated from the module outputs, and a document naming an unknown resource or module
//! output is refused with each problem's path and line/column.
use cairn_proto::templates as pb;
use tonic::Code;

use crate::helpers::*;

const OUTPUTS: &str = "\
outputs:
  app_url:
    value: ${resources.app.url}
    description: Where the app answers
  db_password:
    value: ${resources.db.password}
  db_host:
    value: ${resources.db.host}
    sensitive: true
";

fn declaration(
    name: &str,
    resource: &str,
    output: &str,
    description: &str,
    sensitive: bool,
) -> pb::OutputDeclaration {
    pb::OutputDeclaration {
        name: name.into(),
        description: description.into(),
        resource: resource.into(),
        output: output.into(),
        sensitive,
    }
}

#[tokio::test]
async fn a_resolved_snapshot_carries_the_output_declarations() {
    let app = spawn_app().await;
    let (template_id, _) = app.published_webapp().await;
    let (mut t, mut r) = app.clients();
    let v2 = t
        .publish_version(pb::PublishVersionRequest {
            template_id: template_id.clone(),
            document: format!("{}{OUTPUTS}", webapp()),
        })
        .await
        .unwrap()
        .into_inner()
        .version
        .unwrap();
    assert_eq!(v2.number, 2);

    let expected = vec![
        declaration("app_url", "app", "url", "Where the app answers", false),
        // The fixture database module's `password` output is sensitive.
        declaration("db_password", "db", "password", "", true),
        declaration("db_host", "db", "host", "", true),
    ];
    let mut request = resolve_request(&template_id, "staging");
    request.version = "2".into();
    let s = r
        .resolve(request)
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_eq!(s.outputs, expected);
    // The same declarations are in the snapshot document the workflow reads.
    let parsed = cairn_templating::Snapshot::from_json(&s.snapshot_json).unwrap();
    let from_json: Vec<pb::OutputDeclaration> = parsed
        .outputs
        .iter()
        .map(|o| declaration(&o.name, &o.resource, &o.output, &o.description, o.sensitive))
        .collect();
    assert_eq!(from_json, expected);

    let got = r
        .get_snapshot(pb::GetSnapshotRequest {
            snapshot_id: s.snapshot_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_eq!(got.outputs, expected);

    // Version 1 declares none.
    let v1 = r
        .resolve(resolve_request(&template_id, "staging"))
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert!(v1.outputs.is_empty());
}

#[tokio::test]
async fn outputs_naming_an_unknown_resource_or_output_are_refused() {
    let app = spawn_app().await;
    let (template_id, _) = app.published_webapp().await;
    let (mut t, mut r) = app.clients();
    let base = webapp();
    let first = u32::try_from(base.lines().count()).unwrap() + 1;
    let doc = format!(
        "{base}outputs:\n  url:\n    value: ${{resources.web.url}}\n  host:\n    value: ${{resources.db.endpoint}}\n"
    );
    let err = t
        .publish_version(pb::PublishVersionRequest {
            template_id: template_id.clone(),
            document: doc.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("2 problem(s)"), "{}", err.message());
    let v = r
        .validate(pb::ValidateRequest { document: doc })
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
            ("unknown_resource", "outputs.url.value", first + 2, 12),
            ("unknown_output", "outputs.host.value", first + 4, 12),
        ]
    );
    // Nothing was stored: the template still has only version 1.
    let id = uuid::Uuid::parse_str(&template_id).unwrap();
    assert_eq!(app.server.app().version_count(id.into()).await.unwrap(), 1);
}
