//! OpenTofu's JSON representations: state (`show -json`), plan (`show -json PLANFILE`,
//! format 1.2) and the configuration block inside it.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json, json};

use crate::config::{Module, provider_of};
use crate::core::Change;
use crate::eval;
use crate::providers::{self, Action};
use crate::state::{State, TOFU_VERSION};
use crate::value::V;

fn obj_or_empty(j: Json) -> Json {
    match j {
        Json::Object(_) => j,
        _ => json!({}),
    }
}

/// `sensitive_values` / `*_sensitive` of a resource object.
pub fn resource_sensitive(rtype: &str, v: &V, with_schema: bool) -> Json {
    let mut j = obj_or_empty(v.sensitive_json());
    if with_schema {
        for s in providers::schema_sensitive(rtype) {
            j[*s] = json!(true);
        }
    }
    j
}

fn resource_entry(module: &str, rtype: &str, name: &str) -> Map<String, Json> {
    let mut m = Map::new();
    m.insert(
        "address".into(),
        json!(crate::core::addr(module, rtype, name)),
    );
    m.insert("mode".into(), json!("managed"));
    m.insert("type".into(), json!(rtype));
    m.insert("name".into(), json!(name));
    m.insert(
        "provider_name".into(),
        json!(provider_of(rtype).map(|p| p.1).unwrap_or_default()),
    );
    m
}

/// Groups resource entries into root_module/child_modules.
fn module_tree(entries: Vec<(String, Json)>, outputs: Option<Json>) -> Json {
    let mut by_module: BTreeMap<String, Vec<Json>> = BTreeMap::new();
    for (module, e) in entries {
        by_module.entry(module).or_default().push(e);
    }
    fn build(addr: &str, by: &BTreeMap<String, Vec<Json>>) -> Json {
        let mut m = Map::new();
        if !addr.is_empty() {
            m.insert("address".into(), json!(addr));
        }
        if let Some(rs) = by.get(addr) {
            m.insert("resources".into(), json!(rs));
        }
        let prefix = if addr.is_empty() {
            String::new()
        } else {
            format!("{addr}.")
        };
        let mut children: Vec<String> = by
            .keys()
            .filter(|k| k.starts_with(&prefix) && !k.is_empty() && *k != addr)
            .filter_map(|k| {
                let rest = &k[prefix.len()..];
                let mut parts = rest.splitn(3, '.');
                let (a, b) = (parts.next()?, parts.next()?);
                Some(format!("{prefix}{a}.{b}"))
            })
            .collect();
        children.sort();
        children.dedup();
        if !children.is_empty() {
            m.insert(
                "child_modules".into(),
                Json::Array(children.iter().map(|c| build(c, by)).collect()),
            );
        }
        Json::Object(m)
    }
    let mut root = build("", &by_module);
    let mut values = Map::new();
    if let Some(o) = outputs {
        values.insert("outputs".into(), o);
    }
    values.insert("root_module".into(), root.take());
    Json::Object(values)
}

fn output_entry(v: &V, sensitive: bool) -> Json {
    if v.has_unknown() {
        return json!({"sensitive": sensitive});
    }
    let plain = v.deep_unmark();
    json!({"sensitive": sensitive, "type": plain.ty().to_json(false), "value": plain.to_json()})
}

/// The `values` object of a state.
pub fn state_values(st: &State) -> Json {
    let entries = st
        .resources
        .values()
        .map(|i| {
            let mut e = resource_entry(&i.module, &i.rtype, &i.name);
            e.insert("schema_version".into(), json!(0));
            e.insert("values".into(), i.value.to_json());
            e.insert(
                "sensitive_values".into(),
                resource_sensitive(&i.rtype, &i.value, true),
            );
            (i.module.clone(), Json::Object(e))
        })
        .collect();
    let outputs = (!st.outputs.is_empty()).then(|| {
        Json::Object(
            st.outputs
                .iter()
                .map(|(k, o)| (k.clone(), output_entry(&o.value, o.sensitive)))
                .collect(),
        )
    });
    module_tree(entries, outputs)
}

/// `tofu show -json` of a state (None: no state).
pub fn state_json(st: Option<&State>) -> Json {
    let mut j = json!({"format_version": "1.0"});
    if let Some(s) = st {
        j["terraform_version"] = json!(TOFU_VERSION);
        if !s.is_empty() {
            j["values"] = state_values(s);
        }
    }
    j
}

fn expr_json(e: &hcl::Expression) -> Json {
    if let Some(c) = eval::constant_json(e) {
        return json!({"constant_value": c});
    }
    let refs: Vec<String> = eval::references(e)
        .iter()
        .flat_map(|r| r.display())
        .collect();
    if refs.is_empty() {
        json!({})
    } else {
        json!({"references": refs})
    }
}

/// The `configuration.root_module` (and nested module) representation.
pub fn module_config(m: &Module) -> Json {
    let mut j = Map::new();
    if !m.outputs.is_empty() {
        let outs: Map<String, Json> = m
            .outputs
            .iter()
            .map(|(k, o)| {
                let mut e = json!({"expression": expr_json(&o.expr)});
                if o.sensitive {
                    e["sensitive"] = json!(true);
                }
                if let Some(d) = &o.description {
                    e["description"] = json!(d);
                }
                let deps: Vec<String> = o
                    .depends_on
                    .iter()
                    .filter_map(eval::depends_ref)
                    .flat_map(|d| d.display().into_iter().take(1))
                    .collect();
                if !deps.is_empty() {
                    e["depends_on"] = json!(deps);
                }
                (k.clone(), e)
            })
            .collect();
        j.insert("outputs".into(), Json::Object(outs));
    }
    if !m.resources.is_empty() {
        let rs: Vec<Json> = m
            .resources
            .values()
            .map(|r| {
                let mut e = Map::new();
                e.insert("address".into(), json!(format!("{}.{}", r.rtype, r.name)));
                e.insert("mode".into(), json!("managed"));
                e.insert("type".into(), json!(r.rtype));
                e.insert("name".into(), json!(r.name));
                e.insert("provider_config_key".into(), json!(r.provider_key));
                let exprs: Map<String, Json> = r
                    .attrs
                    .iter()
                    .map(|(k, e)| (k.clone(), expr_json(e)))
                    .collect();
                e.insert("expressions".into(), Json::Object(exprs));
                e.insert("schema_version".into(), json!(0));
                let deps: Vec<String> = r
                    .depends_on
                    .iter()
                    .filter_map(eval::depends_ref)
                    .flat_map(|d| d.display().into_iter().take(1))
                    .collect();
                if !deps.is_empty() {
                    e.insert("depends_on".into(), json!(deps));
                }
                Json::Object(e)
            })
            .collect();
        j.insert("resources".into(), json!(rs));
    }
    if !m.calls.is_empty() {
        let calls: Map<String, Json> = m
            .calls
            .iter()
            .map(|(k, c)| {
                let exprs: Map<String, Json> = c
                    .args
                    .iter()
                    .map(|(k, e)| (k.clone(), expr_json(e)))
                    .collect();
                let mut e = json!({"source": c.source, "module": module_config(&c.module)});
                if !exprs.is_empty() {
                    e["expressions"] = Json::Object(exprs);
                }
                (k.clone(), e)
            })
            .collect();
        j.insert("module_calls".into(), Json::Object(calls));
    }
    if !m.variables.is_empty() {
        let vars: Map<String, Json> = m
            .variables
            .iter()
            .map(|(k, v)| {
                let mut e = Map::new();
                if let Some(d) = &v.default {
                    e.insert("default".into(), d.to_json());
                } else {
                    e.insert("required".into(), json!(true));
                }
                if v.type_given {
                    e.insert("type".into(), v.ty.to_json(true));
                }
                if let Some(d) = &v.description {
                    e.insert("description".into(), json!(d));
                }
                if v.sensitive {
                    e.insert("sensitive".into(), json!(true));
                }
                (k.clone(), Json::Object(e))
            })
            .collect();
        j.insert("variables".into(), Json::Object(vars));
    }
    Json::Object(j)
}

/// `configuration` with `provider_config`.
pub fn configuration(root: &Module) -> Json {
    let mut providers: BTreeMap<String, Json> = BTreeMap::new();
    fn rec(m: &Module, providers: &mut BTreeMap<String, Json>) {
        for r in m.resources.values() {
            if let Some((key, full)) = provider_of(&r.rtype) {
                providers
                    .entry(key.to_owned())
                    .or_insert_with(|| json!({"name": key, "full_name": full}));
            }
        }
        for c in m.calls.values() {
            rec(&c.module, providers);
        }
    }
    for (name, rp) in &root.required_providers {
        let full = if rp.source.contains("terraform.io/builtin") {
            rp.source.clone()
        } else if rp.source.matches('/').count() == 1 {
            format!("registry.opentofu.org/{}", rp.source)
        } else {
            rp.source.clone()
        };
        let mut e = json!({"name": name, "full_name": full});
        if let Some(v) = &rp.version {
            e["version_constraint"] = json!(v);
        }
        providers.insert(name.clone(), e);
    }
    for p in &root.provider_blocks {
        if let Some(full) = match p.as_str() {
            "local" => Some("registry.opentofu.org/hashicorp/local"),
            _ => None,
        } {
            providers
                .entry(p.clone())
                .or_insert_with(|| json!({"name": p, "full_name": full}));
        }
    }
    rec(root, &mut providers);
    let mut j = Map::new();
    if !providers.is_empty() {
        j.insert("provider_config".into(), json!(providers));
    }
    j.insert("root_module".into(), module_config(root));
    Json::Object(j)
}

/// Everything a plan document is made of.
pub struct PlanDoc<'a> {
    pub root: &'a Module,
    pub raw_vars: &'a BTreeMap<String, Json>,
    pub prior: &'a State,
    pub drift: &'a [crate::state::Instance],
    pub changes: &'a BTreeMap<String, Change>,
    pub outputs: &'a BTreeMap<String, V>,
    pub errored: bool,
    pub destroy: bool,
}

pub fn change_json(c: &Change) -> Json {
    let mut e = resource_entry(&c.module, &c.rtype, &c.name);
    if !c.module.is_empty() {
        e.insert("module_address".into(), json!(c.module));
    }
    let before = c.before.as_ref();
    let after = c.after.as_ref().filter(|_| c.action != Action::Delete);
    let mut ch = json!({
        "actions": c.action.json(),
        "before": before.map(V::to_json).unwrap_or(Json::Null),
        "after": after.map(V::to_known_json).unwrap_or(Json::Null),
        "after_unknown": after.map(|a| obj_or_empty(a.unknown_json())).unwrap_or(json!({})),
        "before_sensitive": before.map(|b| resource_sensitive(&c.rtype, b, true)).unwrap_or(json!(false)),
        "after_sensitive": after.map(|a| resource_sensitive(&c.rtype, a, true)).unwrap_or(json!(false)),
    });
    if !c.replace_paths.is_empty() {
        ch["replace_paths"] = json!(c.replace_paths.iter().map(|p| vec![p]).collect::<Vec<_>>());
    }
    e.insert("change".into(), ch);
    if let Some(r) = c.reason {
        e.insert("action_reason".into(), json!(r));
    }
    Json::Object(e)
}

pub fn plan_json(d: &PlanDoc) -> Json {
    let mut j = Map::new();
    j.insert("format_version".into(), json!("1.2"));
    j.insert("terraform_version".into(), json!(TOFU_VERSION));
    if !d.raw_vars.is_empty() {
        let vars: Map<String, Json> = d
            .raw_vars
            .iter()
            .map(|(k, v)| (k.clone(), json!({"value": v})))
            .collect();
        j.insert("variables".into(), Json::Object(vars));
    }
    // planned_values
    let mut entries = Vec::new();
    for c in d.changes.values() {
        if c.action == Action::Delete {
            continue;
        }
        let Some(after) = &c.after else { continue };
        let mut e = resource_entry(&c.module, &c.rtype, &c.name);
        e.insert("schema_version".into(), json!(0));
        e.insert("values".into(), after.to_known_json());
        let with_schema = c.created || c.action == Action::NoOp;
        e.insert(
            "sensitive_values".into(),
            resource_sensitive(&c.rtype, after, with_schema),
        );
        entries.push((c.module.clone(), Json::Object(e)));
    }
    let planned_outputs = (!d.outputs.is_empty()).then(|| {
        Json::Object(
            d.outputs
                .iter()
                .map(|(k, v)| (k.clone(), output_entry(v, d.root.outputs[k].sensitive)))
                .collect(),
        )
    });
    if d.errored {
        j.insert("planned_values".into(), json!({"root_module": {}}));
    } else {
        j.insert(
            "planned_values".into(),
            module_tree(entries, planned_outputs),
        );
    }
    if !d.drift.is_empty() {
        let drift: Vec<Json> = d
            .drift
            .iter()
            .map(|i| {
                change_json(&Change {
                    module: i.module.clone(),
                    rtype: i.rtype.clone(),
                    name: i.name.clone(),
                    action: Action::Delete,
                    before: Some(i.value.clone()),
                    after: None,
                    replace_paths: Vec::new(),
                    reason: None,
                    created: false,
                })
            })
            .collect();
        j.insert("resource_drift".into(), json!(drift));
    }
    if !d.changes.is_empty() && !d.errored {
        j.insert(
            "resource_changes".into(),
            Json::Array(d.changes.values().map(change_json).collect()),
        );
    }
    // output_changes
    let mut oc = Map::new();
    if !d.errored {
        for (k, v) in d.outputs {
            let sens = d.root.outputs[k].sensitive;
            let before = d.prior.outputs.get(k);
            let action = match before {
                None => "create",
                Some(b)
                    if !v.has_unknown()
                        && b.value.deep_unmark().to_json() == v.deep_unmark().to_json() =>
                {
                    "no-op"
                }
                Some(_) => "update",
            };
            oc.insert(
                k.clone(),
                json!({
                    "actions": [action],
                    "before": before.map(|b| b.value.to_json()).unwrap_or(Json::Null),
                    "after": if v.has_unknown() && matches!(v.unmark().0, V::Unknown(_)) { Json::Null } else { v.to_known_json_list() },
                    "after_unknown": if matches!(v.unmark().0, V::Unknown(_)) { json!(true) } else { v.unknown_json() },
                    "before_sensitive": before.map(|b| b.sensitive).unwrap_or(false),
                    "after_sensitive": sens,
                }),
            );
        }
        for (k, b) in &d.prior.outputs {
            if !d.outputs.contains_key(k) {
                oc.insert(
                    k.clone(),
                    json!({
                        "actions": ["delete"],
                        "before": b.value.to_json(),
                        "after": null,
                        "after_unknown": false,
                        "before_sensitive": b.sensitive,
                        "after_sensitive": false,
                    }),
                );
            }
        }
    }
    if !oc.is_empty() {
        j.insert("output_changes".into(), Json::Object(oc));
    }
    // prior_state: the refreshed state with this plan's known root outputs.
    if d.errored {
        j.insert("prior_state".into(), json!({}));
    } else {
        let mut prior = d.prior.clone();
        if !d.destroy {
            prior.outputs = d
                .outputs
                .iter()
                .filter(|(_, v)| !v.has_unknown())
                .map(|(k, v)| {
                    (
                        k.clone(),
                        crate::state::StateOutput {
                            value: v.deep_unmark(),
                            sensitive: d.root.outputs[k].sensitive,
                        },
                    )
                })
                .collect();
        }
        if !prior.is_empty() {
            j.insert(
                "prior_state".into(),
                json!({"format_version": "1.0", "values": state_values(&prior)}),
            );
        }
    }
    j.insert("configuration".into(), configuration(d.root));
    j.insert(
        "timestamp".into(),
        json!(chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()),
    );
    j.insert("errored".into(), json!(d.errored));
    Json::Object(j)
}

impl V {
    /// `after` of an output: unknown list elements become null, unknown attributes vanish.
    pub fn to_known_json_list(&self) -> Json {
        self.to_known_json()
    }
}
