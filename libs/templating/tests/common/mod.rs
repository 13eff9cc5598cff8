//! Shared helpers: the fixture module library, the fixture template and a resolve input.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use cairn_templating::{Library, Limits, ResolveInput, Snapshot, Template};

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn library() -> Library {
    Library::load_dir(&fixtures().join("modules")).expect("load fixture modules")
}

pub fn webapp_text() -> String {
    std::fs::read_to_string(fixtures().join("templates/webapp.yaml")).unwrap()
}

pub fn parse(text: &str) -> Template {
    cairn_templating::parse(text, &Limits::default()).unwrap_or_else(|p| panic!("{p}"))
}

pub fn input(environment: &str) -> ResolveInput {
    ResolveInput {
        template_version: "v-test".to_owned(),
        tenant_id: "11111111-1111-1111-1111-111111111111".to_owned(),
        instance_id: "22222222-2222-2222-2222-222222222222".to_owned(),
        instance_name: "shop-prod".to_owned(),
        environment: environment.to_owned(),
        parameters: BTreeMap::from([(
            "db_password".to_owned(),
            serde_json::json!("arn:aws:secretsmanager:us-east-1:1:secret:db"),
        )]),
        target: BTreeMap::from([("base_dir".to_owned(), serde_json::json!("/srv/cairn"))]),
    }
}

pub fn resolve_webapp(environment: &str) -> Snapshot {
    let t = parse(&webapp_text());
    cairn_templating::resolve(&t, &library(), &input(environment)).unwrap_or_else(|p| panic!("{p}"))
}
