//! The Grafana dashboard (deploy/grafana/cairn.json) cannot drift from the code: every
//! metric it queries is one a crate registers, every registered metric has a panel, and the
//! README's metric list names them all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use cairn_service::Metric;

/// Every crate's catalogue.
fn registered() -> Vec<Metric> {
    [
        cairn_service::metrics::METRICS,
        cairn_storage::metrics::METRICS,
        cairn_state_coordinator::metrics::METRICS,
        cairn_runner::metrics::METRICS,
        cairn_deployments::metrics::METRICS,
        cairn_drift::metrics::METRICS,
        cairn_tenancy::metrics::METRICS,
    ]
    .concat()
}

fn root(path: &str) -> String {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()))
}

/// The `expr` of every panel target, rows included.
fn exprs(panels: &[serde_json::Value], out: &mut Vec<String>) {
    for p in panels {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push(t["expr"].as_str().expect("a target has an expr").to_owned());
        }
        if let Some(inner) = p["panels"].as_array() {
            exprs(inner, out);
        }
    }
}

/// The `cairn_…` names in a PromQL expression.
fn names_in(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(at) = expr[i..].find("cairn_") {
        let start = i + at;
        let boundary =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let end = expr[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(expr.len(), |n| start + n);
        if boundary {
            names.insert(expr[start..end].to_owned());
        }
        i = end;
    }
    names
}

#[test]
fn the_dashboard_queries_only_registered_metrics_and_shows_them_all() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&root("deploy/grafana/cairn.json")).expect("the dashboard is JSON");
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 39);
    let datasource = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["type"] == "datasource" && v["query"] == "prometheus");
    assert!(datasource, "a Prometheus datasource variable");
    let mut queries = Vec::new();
    exprs(dashboard["panels"].as_array().unwrap(), &mut queries);
    assert!(!queries.is_empty());

    let metrics = registered();
    let series: BTreeSet<String> = metrics.iter().flat_map(Metric::series).collect();
    let mut queried = BTreeSet::new();
    for q in &queries {
        for name in names_in(q) {
            assert!(
                series.contains(&name),
                "the dashboard queries {name}, which no crate registers ({q})"
            );
            queried.insert(name);
        }
    }
    let readme = root("README.md");
    for m in &metrics {
        assert!(
            m.series().iter().any(|s| queried.contains(s)),
            "{} is registered but no panel shows it",
            m.name
        );
        assert!(
            readme.contains(m.name),
            "README's metric list lacks {}",
            m.name
        );
    }
    let names: BTreeSet<&str> = metrics.iter().map(|m| m.name).collect();
    assert_eq!(names.len(), metrics.len(), "a metric registered twice");
}

#[test]
fn names_are_found_in_promql() {
    let n = names_in(
        r#"histogram_quantile(0.99, sum by (le) (rate(cairn_grpc_request_duration_seconds_bucket{job=~"x"}[5m]))) / cairn_a_total"#,
    );
    assert_eq!(
        n.into_iter().collect::<Vec<_>>(),
        [
            "cairn_a_total",
            "cairn_grpc_request_duration_seconds_bucket"
        ]
    );
}
