//! Instance outputs: the `outputs:` section parsed, validated against the module library
//! with a path and line/column for every problem, and resolved into the snapshot's
//! declarations with sensitivity propagated from the module outputs.
#![allow(clippy::unwrap_used)]
mod common;

use cairn_templating::{InstanceOutput, Limits, Problem, ProblemKind, Problems, Snapshot};
use common::*;

/// The fixture template with `section` appended; returns the text and the line the
/// section starts on.
fn with_outputs(section: &str) -> (String, u32) {
    let base = webapp_text();
    assert!(base.ends_with('\n'));
    let first = u32::try_from(base.lines().count()).unwrap() + 1;
    (format!("{base}{section}"), first)
}

fn problems(text: &str) -> Problems {
    cairn_templating::check(text, &Limits::default(), &library())
        .expect_err("document should be invalid")
}

fn only(text: &str) -> Problem {
    let p = problems(text);
    assert_eq!(p.len(), 1, "expected one problem, got {p}");
    p.0.into_iter().next().unwrap()
}

fn at(p: &Problem) -> (ProblemKind, &str, u32, u32) {
    (p.kind, p.path.as_str(), p.loc.line, p.loc.column)
}

fn output(
    name: &str,
    resource: &str,
    out: &str,
    description: &str,
    sensitive: bool,
) -> InstanceOutput {
    InstanceOutput {
        name: name.into(),
        description: description.into(),
        resource: resource.into(),
        output: out.into(),
        sensitive,
    }
}

const GOOD: &str = "\
outputs:
  app_url:
    value: ${resources.app.url}
    description: Where the app answers
  db_password:
    value: ${resources.db.password}
    description: The database password reference
  db_host:
    value: ${ resources.db.host }
    sensitive: true
  network_id:
    value: ${resources.net.id}
    sensitive: false
";

#[test]
fn good_outputs_resolve_in_document_order_with_sensitivity() {
    let (text, _) = with_outputs(GOOD);
    let t = cairn_templating::check(&text, &Limits::default(), &library())
        .unwrap_or_else(|p| panic!("{p}"));
    assert_eq!(t.outputs.len(), 4);
    let s = cairn_templating::resolve(&t, &library(), &input("staging")).unwrap();
    assert_eq!(
        s.outputs,
        vec![
            output("app_url", "app", "url", "Where the app answers", false),
            // The module's `password` output is sensitive: so is the instance output.
            output(
                "db_password",
                "db",
                "password",
                "The database password reference",
                true
            ),
            // Declared sensitive.
            output("db_host", "db", "host", "", true),
            output("network_id", "net", "id", "", false),
        ]
    );
    // The declarations are part of the snapshot (and its hash) and read back from JSON.
    let back = Snapshot::from_json(&s.canonical_json()).unwrap();
    assert_eq!(back, s);
    assert_ne!(s.hash(), resolve_webapp("staging").hash());
}

#[test]
fn a_template_without_outputs_keeps_its_snapshot_json() {
    let s = resolve_webapp("staging");
    assert!(s.outputs.is_empty());
    let json = s.canonical_json();
    let top: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(top.get("outputs").is_none(), "{json}");
    // A snapshot stored before outputs existed reads back with none.
    assert_eq!(Snapshot::from_json(&json).unwrap(), s);
}

#[test]
fn unknown_resource() {
    let (text, first) = with_outputs("outputs:\n  url:\n    value: ${resources.web.url}\n");
    let p = only(&text);
    assert_eq!(
        at(&p),
        (
            ProblemKind::UnknownResource,
            "outputs.url.value",
            first + 2,
            12
        )
    );
    assert!(p.message.contains("\"web\""), "{}", p.message);
}

#[test]
fn unknown_output() {
    let (text, first) = with_outputs(
        "outputs:\n  url:\n    value: ${resources.app.url}\n  host:\n    value: ${resources.db.endpoint}\n",
    );
    let p = only(&text);
    assert_eq!(
        at(&p),
        (
            ProblemKind::UnknownOutput,
            "outputs.host.value",
            first + 4,
            12
        )
    );
    // The message names the module and what it does output.
    assert!(p.message.contains("local/database"), "{}", p.message);
    assert!(
        p.message.contains("host, kind, password, port"),
        "{}",
        p.message
    );
}

#[test]
fn duplicate_output_name() {
    let (text, first) = with_outputs(
        "outputs:\n  url:\n    value: ${resources.app.url}\n  url:\n    value: ${resources.db.host}\n",
    );
    let p = only(&text);
    assert_eq!(p.kind, ProblemKind::Syntax);
    assert!(
        p.message.contains("duplicate") && p.message.contains("url"),
        "{}",
        p.message
    );
    assert_eq!(p.loc.line, first + 3, "{p}");
}

#[test]
fn a_value_must_be_one_module_output() {
    for (value, column) in [
        ("${resources.net}", 12),
        ("${params.app_name}", 12),
        ("https://example.com", 12),
        ("\"x-${resources.net.id}\"", 12),
        ("[\"${resources.net.id}\"]", 12),
        ("{url: \"${resources.app.url}\"}", 12),
        ("${var.x}", 12),
    ] {
        let (text, first) = with_outputs(&format!("outputs:\n  o:\n    value: {value}\n"));
        let p = only(&text);
        assert_eq!(
            at(&p),
            (
                ProblemKind::InvalidExpression,
                "outputs.o.value",
                first + 2,
                column
            ),
            "{value}: {p}"
        );
        assert!(
            p.message.contains("${resources.<name>.<output>}"),
            "{value}: {p}"
        );
    }
}

#[test]
fn shape_problems_are_reported_together_with_validation_problems() {
    let (text, first) = with_outputs(
        "\
outputs:
  Bad-Name:
    value: ${resources.app.url}
  no_value:
    description: nothing
  extra:
    value: ${resources.app.url}
    colour: red
    sensitive: maybe
  missing:
    value: ${resources.nope.url}
",
    );
    let p = problems(&text);
    let got: Vec<_> = p.iter().map(at).collect();
    assert_eq!(
        got,
        vec![
            (ProblemKind::InvalidName, "outputs.Bad-Name", first + 1, 3),
            (ProblemKind::Shape, "outputs.no_value", first + 4, 5),
            (ProblemKind::Shape, "outputs.extra.colour", first + 7, 5),
            (ProblemKind::Shape, "outputs.extra.sensitive", first + 8, 16),
            (
                ProblemKind::UnknownResource,
                "outputs.missing.value",
                first + 10,
                12
            ),
        ],
        "{p}"
    );
}

#[test]
fn outputs_are_bounded() {
    let (text, first) = with_outputs(
        "outputs:\n  a:\n    value: ${resources.app.url}\n  b:\n    value: ${resources.app.url}\n",
    );
    let limits = Limits {
        max_outputs: 1,
        ..Limits::default()
    };
    let p = cairn_templating::parse(&text, &limits).unwrap_err();
    assert_eq!(
        at(&p.0[0]),
        (ProblemKind::TooLarge, "outputs", first + 1, 3)
    );
}
