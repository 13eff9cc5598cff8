//! The renderer: root config shape, sensitive variables, and hostile values that must stay
//! inert literals.
#![allow(clippy::unwrap_used)]
mod common;

use std::collections::BTreeMap;

use cairn_templating::{RenderError, UpstreamOutputs, render, resolve};
use common::*;
use serde_json::{Value, json};

fn upstream() -> UpstreamOutputs {
    BTreeMap::from([
        (
            "net".to_owned(),
            BTreeMap::from([
                ("kind".to_owned(), json!("network")),
                ("id".to_owned(), json!("net-1")),
                ("cidr".to_owned(), json!("10.1.0.0/16")),
            ]),
        ),
        (
            "db".to_owned(),
            BTreeMap::from([
                ("kind".to_owned(), json!("database")),
                ("host".to_owned(), json!("db.internal")),
                ("port".to_owned(), json!(5432)),
                ("password".to_owned(), json!("must-never-appear")),
            ]),
        ),
    ])
}

#[test]
fn root_config_shape() {
    let s = resolve_webapp("staging");
    let db = render(s.resource("db").unwrap(), &upstream()).unwrap();
    let v: Value = serde_json::from_str(&db.tf_json).unwrap();
    assert_eq!(v["terraform"], json!({"backend": {"http": {}}}));
    assert_eq!(
        v["module"]["this"]["source"],
        json!("./modules/local/database")
    );
    assert_eq!(
        v["module"]["this"]["network"],
        json!({"cidr": "10.1.0.0/16", "id": "net-1", "kind": "network"})
    );
    // The sensitive parameter is a sensitive root variable; its reference and value are not
    // in the file.
    assert_eq!(
        v["module"]["this"]["password_ref"],
        json!("${var.db_password}")
    );
    assert_eq!(
        v["variable"]["db_password"],
        json!({"type": "string", "sensitive": true})
    );
    assert!(!db.tf_json.contains("secretsmanager"));
    assert_eq!(
        v["output"]["password"],
        json!({"value": "${module.this.password}", "sensitive": true})
    );
    assert_eq!(v["output"]["host"]["sensitive"], json!(false));

    let app = render(s.resource("app").unwrap(), &upstream()).unwrap();
    let v: Value = serde_json::from_str(&app.tf_json).unwrap();
    // Whole-object wiring passes only non-sensitive outputs.
    assert_eq!(
        v["module"]["this"]["database"],
        json!({"host": "db.internal", "kind": "database", "port": 5432})
    );
    assert!(!app.tf_json.contains("must-never-appear"));
    assert!(v.get("variable").is_none());
}

#[test]
fn config_hash_is_deterministic_and_tracks_inputs() {
    let s = resolve_webapp("staging");
    let db = s.resource("db").unwrap();
    let a = render(db, &upstream()).unwrap();
    assert_eq!(a, render(db, &upstream()).unwrap());
    assert_eq!(
        a.config_hash,
        cairn_templating::hash::sha256_hex(a.tf_json.as_bytes())
    );
    let mut up = upstream();
    up.get_mut("net")
        .unwrap()
        .insert("id".into(), json!("net-2"));
    assert_ne!(a.config_hash, render(db, &up).unwrap().config_hash);
    // The sensitive reference is not part of the file, so not of the hash.
    let mut other = db.clone();
    other
        .sensitive_variables
        .insert("db_password".into(), "arn:other".into());
    assert_eq!(
        a.config_hash,
        render(&other, &upstream()).unwrap().config_hash
    );
}

#[test]
fn missing_upstream_is_an_error() {
    let s = resolve_webapp("staging");
    let e = render(s.resource("app").unwrap(), &BTreeMap::new()).unwrap_err();
    assert!(matches!(e, RenderError::MissingUpstream { .. }), "{e}");
    let mut up = upstream();
    up.get_mut("db").unwrap().remove("port");
    let e = render(s.resource("app").unwrap(), &up).unwrap_err();
    assert_eq!(
        e,
        RenderError::MissingOutput {
            resource: "app".into(),
            upstream: "db".into(),
            output: "port".into()
        }
    );
}

const HOSTILE: [&str; 4] = [
    "${file(\"/etc/passwd\")}",
    "%{ for x in y }${x}%{ endfor }",
    "evil\"}\n, \"injected\": {\"a\": \"b\"}\n",
    "$${already} %%{escaped}",
];

fn inert(s: &str) -> String {
    s.replace("${", "$${").replace("%{", "%%{")
}

/// Whether an OpenTofu string template holds a live interpolation or directive, scanned as
/// HCL does: `$${` and `%%{` are escapes, any other `${` or `%{` starts an expression.
fn has_live_template(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"$${") || rest.starts_with(b"%%{") {
            i += 3;
        } else if rest.starts_with(b"${") || rest.starts_with(b"%{") {
            return true;
        } else {
            i += 1;
        }
    }
    false
}

/// No rendered string or key holds a live template, except the renderer's own
/// `${var.*}` and `${module.this.*}`.
fn assert_no_live_template(v: &Value) {
    match v {
        Value::String(s) => {
            let own = (s.starts_with("${var.") || s.starts_with("${module.this."))
                && s.ends_with('}')
                && s.matches("${").count() == 1;
            assert!(own || !has_live_template(s), "live template in {s:?}");
        }
        Value::Array(items) => items.iter().for_each(assert_no_live_template),
        Value::Object(o) => {
            for (k, v) in o {
                assert!(!has_live_template(k), "live template in key {k:?}");
                assert_no_live_template(v);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[test]
fn the_checker_sees_live_templates() {
    for live in ["${x}", "a %{ if }", "$ ${x}", "x$${y}${z}"] {
        assert!(has_live_template(live), "{live}");
    }
    for (raw, _) in HOSTILE.iter().map(|h| (inert(h), h)) {
        assert!(!has_live_template(&raw), "{raw}");
    }
}

#[test]
fn hostile_parameter_values_render_inert() {
    let t = parse(&webapp_text());
    for hostile in HOSTILE {
        let mut i = input("staging");
        i.parameters.insert("motd".into(), json!(hostile));
        let s = resolve(&t, &library(), &i).unwrap();
        let app = render(s.resource("app").unwrap(), &upstream()).unwrap();
        let v: Value = serde_json::from_str(&app.tf_json).unwrap();
        assert_eq!(
            v["module"]["this"]["env"]["MOTD"],
            json!(inert(hostile)),
            "{hostile:?}"
        );
        assert_no_live_template(&v);
        // The structure is intact: the hostile text did not add keys.
        assert_eq!(v["module"]["this"]["env"].as_object().unwrap().len(), 1);
        assert!(v.get("injected").is_none());
    }
}

#[test]
fn hostile_upstream_outputs_and_literal_keys_render_inert() {
    let s = resolve_webapp("staging");
    let mut up = upstream();
    up.get_mut("db")
        .unwrap()
        .insert("host".into(), json!(HOSTILE[0]));
    up.get_mut("net")
        .unwrap()
        .insert("id".into(), json!(HOSTILE[1]));
    let app = render(s.resource("app").unwrap(), &up).unwrap();
    let v: Value = serde_json::from_str(&app.tf_json).unwrap();
    assert_eq!(v["module"]["this"]["db_host"], json!(inert(HOSTILE[0])));
    assert_eq!(
        v["module"]["this"]["network"]["id"],
        json!(inert(HOSTILE[1]))
    );
    assert_no_live_template(&v);

    let mut db = s.resource("db").unwrap().clone();
    db.inputs.insert(
        "tags".into(),
        cairn_templating::Binding::Literal {
            value: json!({"${key}": ["%{ if }", {"${deep}": "${x}"}]}),
        },
    );
    let r = render(&db, &upstream()).unwrap();
    let v: Value = serde_json::from_str(&r.tf_json).unwrap();
    assert_eq!(
        v["module"]["this"]["tags"],
        json!({"$${key}": ["%%{ if }", {"$${deep}": "$${x}"}]})
    );
    assert_no_live_template(&v);
}

#[test]
fn hostile_interpolated_parameters_and_target_settings_render_inert() {
    let doc = "name: t\nparameters:\n  p: {type: string}\nresources:\n  net:\n    module: local/network\n    inputs:\n      cidr: \"pre-${params.p}-post\"\n";
    let t = parse(doc);
    for hostile in HOSTILE {
        let mut i = input("staging");
        i.parameters = BTreeMap::from([("p".to_owned(), json!(hostile))]);
        i.target
            .insert("base_dir".into(), json!(format!("/srv/{hostile}")));
        i.instance_name = hostile.to_owned();
        let s = resolve(&t, &library(), &i).unwrap();
        let net = s.resource("net").unwrap();
        assert!(
            net.physical_name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{}",
            net.physical_name
        );
        let r = render(net, &BTreeMap::new()).unwrap();
        let v: Value = serde_json::from_str(&r.tf_json).unwrap();
        assert_eq!(
            v["module"]["this"]["cidr"],
            json!(inert(&format!("pre-{hostile}-post")))
        );
        assert_eq!(
            v["module"]["this"]["base_dir"],
            json!(inert(&format!("/srv/{hostile}")))
        );
        assert_no_live_template(&v);
    }
}
