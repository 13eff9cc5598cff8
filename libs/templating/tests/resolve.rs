//! Resolution of a valid template: order, names, bindings, parameters, environments,
//! determinism.
#![allow(clippy::unwrap_used)]
mod common;

use cairn_templating::{Binding, ProblemKind, resolve};
use common::*;
use serde_json::json;

#[test]
fn resolves_in_dependency_order_with_bindings() {
    let s = resolve_webapp("staging");
    let names: Vec<&str> = s.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["net", "db", "app"]);
    let app = s.resource("app").unwrap();
    assert_eq!(app.depends_on, ["db", "net"]);
    assert_eq!(app.module, "local/service");
    assert_eq!(app.kind, "service");
    assert!(app.physical_name.starts_with("shop-prod-app-"));
    assert_eq!(
        app.state_key,
        format!("cairn/{}.tfstate", app.physical_name)
    );
    assert_eq!(
        app.inputs["database"],
        Binding::Outputs {
            resource: "db".into(),
            outputs: vec!["host".into(), "kind".into(), "port".into()],
        }
    );
    assert_eq!(
        app.inputs["db_host"],
        Binding::Output {
            resource: "db".into(),
            output: "host".into()
        }
    );
    assert_eq!(
        app.inputs["image"],
        Binding::Literal {
            value: json!("registry.local/shop:1.0")
        }
    );
    assert_eq!(app.inputs["replicas"], Binding::Literal { value: json!(1) });
    assert_eq!(
        app.inputs["base_dir"],
        Binding::Literal {
            value: json!("/srv/cairn")
        }
    );
    assert_eq!(
        app.inputs["name"],
        Binding::Literal {
            value: json!(app.physical_name)
        }
    );
    let db = s.resource("db").unwrap();
    assert_eq!(
        db.inputs["password_ref"],
        Binding::Sensitive {
            variable: "db_password".into()
        }
    );
    assert_eq!(
        db.sensitive_variables["db_password"],
        "arn:aws:secretsmanager:us-east-1:1:secret:db"
    );
    assert_eq!(
        db.inputs["tags"],
        Binding::Literal {
            value: json!({"tier": "small"})
        }
    );
    assert!(!db.inputs.contains_key("size_gb"), "module default applies");
    assert!(db.outputs["password"]);
}

#[test]
fn environment_overrides_apply() {
    let s = resolve_webapp("production");
    assert_eq!(
        s.resource("app").unwrap().inputs["replicas"],
        Binding::Literal { value: json!(3) }
    );
    assert_eq!(
        s.resource("db").unwrap().inputs["size_gb"],
        Binding::Literal { value: json!(100) }
    );
    // A request value beats the environment's.
    let t = parse(&webapp_text());
    let mut i = input("production");
    i.parameters.insert("replicas".into(), json!(4));
    let s = resolve(&t, &library(), &i).unwrap();
    assert_eq!(
        s.resource("app").unwrap().inputs["replicas"],
        Binding::Literal { value: json!(4) }
    );
}

#[test]
fn production_aliases_get_the_production_overrides() {
    // The one environment rule: `prod` and `Production` are production to the coordinator
    // and the runner, so they get the template's `production:` overrides too.
    let production = resolve_webapp("production");
    assert_eq!(production.environment, "production");
    for alias in ["prod", "Production", "PROD", " prod "] {
        let s = resolve_webapp(alias);
        assert_eq!(s.environment, "production", "{alias}");
        assert_eq!(
            s.resource("app").unwrap().inputs["replicas"],
            Binding::Literal { value: json!(3) },
            "{alias}"
        );
        assert_eq!(
            s.resource("db").unwrap().inputs["size_gb"],
            Binding::Literal { value: json!(100) },
            "{alias}"
        );
        assert_eq!(s.hash(), production.hash(), "{alias}");
    }
    // The overrides may be written under an alias too.
    let t = parse(&webapp_text().replace("\n  production:\n", "\n  Prod:\n"));
    let s = resolve(&t, &library(), &input("production")).unwrap();
    assert_eq!(s.hash(), production.hash());
    // Other names are lower-cased, nothing more.
    assert_eq!(
        resolve_webapp("Staging").hash(),
        resolve_webapp("staging").hash()
    );
    assert_eq!(resolve_webapp("Staging").environment, "staging");
}

#[test]
fn an_invalid_environment_in_a_request_is_a_problem() {
    let t = parse(&webapp_text());
    for bad in ["", "pre.prod", "a b", "1prod"] {
        let p = resolve(&t, &library(), &input(bad)).unwrap_err();
        assert_eq!(p.len(), 1, "{bad:?}: {p}");
        let p = &p.0[0];
        assert_eq!(
            (p.kind, p.path.as_str()),
            (ProblemKind::InvalidName, "environment"),
            "{bad:?}"
        );
        assert!(p.message.contains("environment"), "{}", p.message);
    }
}

#[test]
fn deterministic_hash() {
    let a = resolve_webapp("production");
    let b = resolve_webapp("production");
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.canonical_json(), b.canonical_json());
    assert_ne!(a.hash(), resolve_webapp("staging").hash());
    // Round trip through the stored JSON keeps the hash.
    let back = cairn_templating::Snapshot::from_json(&a.canonical_json()).unwrap();
    assert_eq!(back.hash(), a.hash());
}

#[test]
fn parameter_values_are_checked_all_at_once() {
    let t = parse(&webapp_text());
    let mut i = input("staging");
    i.parameters.insert("replicas".into(), json!(9));
    i.parameters.insert("tier".into(), json!("huge"));
    i.parameters.insert("app_name".into(), json!("Bad Name"));
    i.parameters.insert("nope".into(), json!(1));
    i.parameters
        .insert("db_password".into(), json!("has whitespace in it"));
    i.target.clear();
    let p = resolve(&t, &library(), &i).unwrap_err();
    let kinds: Vec<(ProblemKind, &str)> = p.iter().map(|p| (p.kind, p.path.as_str())).collect();
    for expected in [
        (ProblemKind::InvalidParameter, "parameters.replicas"),
        (ProblemKind::InvalidParameter, "parameters.tier"),
        (ProblemKind::InvalidParameter, "parameters.app_name"),
        (ProblemKind::InvalidParameter, "parameters.db_password"),
        (ProblemKind::UnknownParameter, "parameters.nope"),
    ] {
        assert!(kinds.contains(&expected), "{expected:?} missing from {p}");
    }
    let replicas = p.iter().find(|x| x.path == "parameters.replicas").unwrap();
    assert!(
        replicas.message.contains("above the maximum 5"),
        "{}",
        replicas.message
    );
    assert_eq!((replicas.loc.line, replicas.loc.column), (8, 3));
}

#[test]
fn missing_target_setting_is_reported() {
    let t = parse(&webapp_text());
    let mut i = input("staging");
    i.target.clear();
    let p = resolve(&t, &library(), &i).unwrap_err();
    assert_eq!(p.len(), 3, "{p}");
    assert!(
        p.iter()
            .all(|x| x.kind == ProblemKind::MissingTargetSetting)
    );
}
