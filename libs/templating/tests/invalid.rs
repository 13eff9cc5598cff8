//! Every kind of invalid document gives its precise error, with a path and a line/column,
//! and every problem of a document is reported at once.
#![allow(clippy::unwrap_used)]
mod common;

use cairn_templating::{Limits, Problem, ProblemKind, Problems, validate};
use common::*;

fn problems(text: &str) -> Problems {
    let p = cairn_templating::check(text, &Limits::default(), &library())
        .expect_err("document should be invalid");
    // `parse` then `validate` finds the same problems when the document is well formed.
    if let Ok(t) = cairn_templating::parse(text, &Limits::default()) {
        assert_eq!(validate(&t, &library()).unwrap_err(), p);
    }
    p
}

fn only(text: &str) -> Problem {
    let p = problems(text);
    assert_eq!(p.len(), 1, "expected one problem, got {p}");
    p.0.into_iter().next().unwrap()
}

fn at(p: &Problem) -> (ProblemKind, &str, u32, u32) {
    (p.kind, p.path.as_str(), p.loc.line, p.loc.column)
}

const NET: &str = "  net:\n    module: local/network\n";

#[test]
fn unknown_module() {
    let p = only("name: t\nresources:\n  x:\n    module: local/nope\n");
    assert_eq!(
        at(&p),
        (ProblemKind::UnknownModule, "resources.x.module", 4, 13)
    );
    assert!(p.message.contains("local/database"), "{}", p.message);
}

#[test]
fn unknown_input() {
    let p = only(&format!(
        "name: t\nresources:\n{NET}    inputs:\n      colour: red\n"
    ));
    assert_eq!(
        at(&p),
        (
            ProblemKind::UnknownInput,
            "resources.net.inputs.colour",
            6,
            7
        )
    );
    assert!(p.message.contains("cidr"), "{}", p.message);
}

#[test]
fn missing_input() {
    let p = only("name: t\nresources:\n  svc:\n    module: local/audit\n");
    assert_eq!(
        at(&p),
        (ProblemKind::MissingInput, "resources.svc.inputs", 3, 3)
    );
    assert!(p.message.contains("\"database\""), "{}", p.message);
}

#[test]
fn type_mismatch() {
    let p = only(&format!(
        "name: t\nresources:\n{NET}  db:\n    module: local/database\n    inputs:\n      network: ${{resources.net}}\n      password_ref: x\n      size_gb: [1]\n"
    ));
    assert_eq!(
        at(&p),
        (
            ProblemKind::TypeMismatch,
            "resources.db.inputs.size_gb",
            10,
            16
        )
    );
    assert!(
        p.message.contains("expected number, found list"),
        "{}",
        p.message
    );
}

#[test]
fn wrong_upstream_kind() {
    let p = only(&format!(
        "name: t\nresources:\n{NET}  db:\n    module: local/database\n    inputs:\n      network: ${{resources.net}}\n      password_ref: x\n  app:\n    module: local/service\n    inputs:\n      network: ${{resources.db}}\n      database: ${{resources.db}}\n      image: i\n"
    ));
    assert_eq!(
        at(&p),
        (
            ProblemKind::WrongUpstreamKind,
            "resources.app.inputs.network",
            13,
            16
        )
    );
    assert!(p.message.contains("expects a network"), "{}", p.message);
}

#[test]
fn sensitive_output_wired() {
    let doc = format!(
        "name: t\nresources:\n{NET}  db:\n    module: local/database\n    inputs:\n      network: ${{resources.net}}\n      password_ref: x\n  audit:\n    module: local/audit\n    inputs:\n      database: ${{resources.db}}\n  app:\n    module: local/service\n    inputs:\n      network: ${{resources.net}}\n      database: ${{resources.db}}\n      image: i\n      db_host: ${{resources.db.password}}\n"
    );
    let p = problems(&doc);
    assert_eq!(p.len(), 2, "{p}");
    assert_eq!(
        at(&p.0[0]),
        (
            ProblemKind::SensitiveOutputWired,
            "resources.audit.inputs.database",
            13,
            17
        )
    );
    assert_eq!(
        at(&p.0[1]),
        (
            ProblemKind::SensitiveOutputWired,
            "resources.app.inputs.db_host",
            20,
            16
        )
    );
}

#[test]
fn unknown_parameter() {
    let p = only(&format!(
        "name: t\nresources:\n{NET}    inputs:\n      cidr: \"${{params.cidr}}\"\n"
    ));
    assert_eq!(
        at(&p),
        (
            ProblemKind::UnknownParameter,
            "resources.net.inputs.cidr",
            6,
            13
        )
    );
}

#[test]
fn dependency_cycle_is_named() {
    let p = only(
        "name: t\nresources:\n  a:\n    module: local/network\n    depends_on: [c]\n  b:\n    module: local/network\n    depends_on: [a]\n  c:\n    module: local/network\n    depends_on: [b]\n",
    );
    assert_eq!(p.kind, ProblemKind::DependencyCycle);
    assert_eq!(p.message, "dependency cycle: a -> c -> b -> a");
    assert!(p.loc.line >= 5, "{p}");
}

#[test]
fn invalid_names() {
    let p = problems(
        "name: Bad Name\nparameters:\n  Bad-Param: {type: string}\nresources:\n  9net:\n    module: local/network\n",
    );
    let got: Vec<_> = p.iter().map(at).collect();
    assert_eq!(
        got,
        [
            (ProblemKind::InvalidName, "name", 1, 7),
            (ProblemKind::InvalidName, "parameters.Bad-Param", 3, 3),
            (ProblemKind::InvalidName, "resources.9net", 5, 3),
        ]
    );
}

#[test]
fn oversized_document() {
    let limits = Limits {
        max_document_bytes: 64,
        ..Limits::default()
    };
    let text = format!(
        "name: t\ndescription: {}\nresources:\n{NET}",
        "x".repeat(100)
    );
    let p = cairn_templating::parse(&text, &limits).unwrap_err();
    assert_eq!(p.len(), 1);
    assert_eq!(p.0[0].kind, ProblemKind::TooLarge);
    assert!(p.0[0].message.contains("the limit is 64"), "{}", p.0[0]);
    let many: String = (0..5)
        .map(|i| format!("  r{i}:\n    module: local/network\n"))
        .collect();
    let limits = Limits {
        max_resources: 4,
        ..Limits::default()
    };
    let p = cairn_templating::parse(&format!("name: t\nresources:\n{many}"), &limits).unwrap_err();
    assert_eq!(at(&p.0[0]), (ProblemKind::TooLarge, "resources", 3, 3));
}

#[test]
fn syntax_error_has_a_location() {
    let p = only("name: t\nresources: [a, b\n");
    assert_eq!(p.kind, ProblemKind::Syntax);
    assert!(p.loc.line >= 2, "{p}");
}

#[test]
fn unsupported_expressions() {
    let p = problems(&format!(
        "name: t\nresources:\n{NET}    inputs:\n      cidr: '${{file(\"/etc/passwd\")}}'\n      name: 'x-${{resources.net}}'\n"
    ));
    let got: Vec<_> = p.iter().map(at).collect();
    assert_eq!(
        got,
        [
            (
                ProblemKind::InvalidExpression,
                "resources.net.inputs.cidr",
                6,
                13
            ),
            (
                ProblemKind::InvalidExpression,
                "resources.net.inputs.name",
                7,
                13
            ),
        ]
    );
}

#[test]
fn every_problem_at_once() {
    let doc = "name: t\nparameters:\n  n: {type: number, default: x}\nresources:\n  a:\n    module: local/nope\n  b:\n    module: local/network\n    inputs:\n      colour: 1\n      cidr: ${params.missing}\n  c:\n    module: local/network\n    bogus: 1\n";
    let p = problems(doc);
    let got: Vec<_> = p.iter().map(at).collect();
    assert_eq!(
        got,
        [
            (ProblemKind::InvalidParameter, "parameters.n.default", 3, 30),
            (ProblemKind::UnknownModule, "resources.a.module", 6, 13),
            (
                ProblemKind::UnknownInput,
                "resources.b.inputs.colour",
                10,
                7
            ),
            (
                ProblemKind::UnknownParameter,
                "resources.b.inputs.cidr",
                11,
                13
            ),
            (ProblemKind::Shape, "resources.c.bogus", 14, 5),
        ]
    );
    let doc = "name: t\nresources:\n  a:\n    module: local/nope\n  b:\n    module: local/network\n    inputs:\n      colour: 1\n      cidr: ${params.missing}\n";
    let p = problems(doc);
    let got: Vec<_> = p.iter().map(at).collect();
    assert_eq!(
        got,
        [
            (ProblemKind::UnknownModule, "resources.a.module", 4, 13),
            (ProblemKind::UnknownInput, "resources.b.inputs.colour", 8, 7),
            (
                ProblemKind::UnknownParameter,
                "resources.b.inputs.cidr",
                9,
                13
            ),
        ]
    );
}

#[test]
fn an_environment_declared_twice_under_aliases() {
    // `prod` and `production` are one environment: which overrides a request got would
    // depend on which one was found first.
    let doc = format!(
        "name: t\nenvironments:\n  prod:\n    resources: {{}}\n  production:\n    resources: {{}}\nresources:\n{NET}"
    );
    let p = only(&doc);
    assert_eq!(
        at(&p),
        (ProblemKind::InvalidName, "environments.production", 5, 3)
    );
    assert!(p.message.contains("duplicate environment"), "{}", p.message);
    assert!(p.message.contains("\"prod\""), "{}", p.message);
    // Case is ignored as well.
    let doc = format!(
        "name: t\nenvironments:\n  staging:\n    resources: {{}}\n  Staging:\n    resources: {{}}\nresources:\n{NET}"
    );
    assert_eq!(
        at(&only(&doc)),
        (ProblemKind::InvalidName, "environments.Staging", 5, 3)
    );
}

#[test]
fn an_environment_that_is_not_one() {
    let doc =
        format!("name: t\nenvironments:\n  pre.prod:\n    resources: {{}}\nresources:\n{NET}");
    let p = only(&doc);
    assert_eq!(
        at(&p),
        (ProblemKind::InvalidName, "environments.pre.prod", 3, 3)
    );
    assert!(p.message.contains("[a-z0-9_-]"), "{}", p.message);
}
