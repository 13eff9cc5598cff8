//! OpenTofu state v4: reading, writing (serial/lineage rules) and conversion of resource
//! attributes between state JSON and values.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json, json};

use crate::config::provider_of;
use crate::value::{Ty, V};

pub const TOFU_VERSION: &str = "1.12.6";

#[derive(Clone, Debug)]
pub struct StateOutput {
    pub value: V,
    pub sensitive: bool,
}

#[derive(Clone, Debug)]
pub struct Instance {
    /// "module.a.module.b" or "".
    pub module: String,
    pub rtype: String,
    pub name: String,
    pub value: V,
    pub dependencies: Vec<String>,
}

impl Instance {
    pub fn address(&self) -> String {
        if self.module.is_empty() {
            format!("{}.{}", self.rtype, self.name)
        } else {
            format!("{}.{}.{}", self.module, self.rtype, self.name)
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct State {
    pub serial: u64,
    pub lineage: String,
    pub outputs: BTreeMap<String, StateOutput>,
    /// Keyed by address.
    pub resources: BTreeMap<String, Instance>,
}

fn dynamic_attr(rtype: &str, attr: &str) -> bool {
    rtype == "terraform_data" && matches!(attr, "input" | "output" | "triggers_replace")
}

/// A resource value from its state attributes.
pub fn attrs_to_value(rtype: &str, attrs: &Json, sensitive: &Json) -> V {
    let mut m = BTreeMap::new();
    if let Some(o) = attrs.as_object() {
        for (k, v) in o {
            let val = if dynamic_attr(rtype, k) {
                match v {
                    Json::Object(w) if w.contains_key("value") && w.contains_key("type") => {
                        V::from_json(&w["value"], &Ty::from_json(&w["type"]))
                    }
                    other => V::from_json(other, &Ty::Dynamic),
                }
            } else {
                V::from_json(v, &Ty::String)
            };
            m.insert(k.clone(), val);
        }
    }
    // Re-apply top-level sensitive marks.
    if let Some(paths) = sensitive.as_array() {
        for p in paths {
            if let Some(first) = p.as_array().and_then(|x| x.first())
                && first["type"] == "get_attr"
                && let Some(k) = first["value"].as_str()
                && let Some(v) = m.remove(k)
            {
                m.insert(k.to_owned(), v.mark(true));
            }
        }
    }
    V::Object(m)
}

/// State attributes and sensitive paths from a resource value.
pub fn value_to_attrs(rtype: &str, v: &V) -> (Json, Json) {
    let mut attrs = Map::new();
    let mut sens = Vec::new();
    if let V::Object(m) = v.unmark().0 {
        for (k, x) in m {
            let plain = x.deep_unmark();
            let j = if dynamic_attr(rtype, k) && !plain.is_null() {
                json!({"value": plain.to_json(), "type": plain.ty().to_json(false)})
            } else {
                plain.to_json()
            };
            attrs.insert(k.clone(), j);
        }
        let mut prefix = Vec::new();
        v.sensitive_paths(&mut prefix, &mut sens);
    }
    for s in crate::providers::schema_sensitive(rtype) {
        let p = json!([{"type": "get_attr", "value": s}]);
        if !sens.contains(&p) {
            sens.push(p);
        }
    }
    (Json::Object(attrs), Json::Array(sens))
}

impl State {
    pub fn new_lineage() -> State {
        State {
            serial: 0,
            lineage: uuid::Uuid::new_v4().to_string(),
            ..State::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.outputs.is_empty()
    }

    pub fn parse(j: &Json) -> Result<State, String> {
        if j.get("encrypted_data").is_some() {
            return Err(
                "The state is encrypted; state encryption is not emulated by tofu-sim.".into(),
            );
        }
        let version = j["version"].as_u64().unwrap_or(0);
        if version != 4 {
            return Err(format!(
                "Unsupported state file format: version {version} (tofu-sim reads v4)."
            ));
        }
        let mut st = State {
            serial: j["serial"].as_u64().unwrap_or(0),
            lineage: j["lineage"].as_str().unwrap_or_default().to_owned(),
            ..State::default()
        };
        if let Some(outs) = j["outputs"].as_object() {
            for (k, o) in outs {
                let ty = Ty::from_json(&o["type"]);
                st.outputs.insert(
                    k.clone(),
                    StateOutput {
                        value: V::from_json(&o["value"], &ty),
                        sensitive: o["sensitive"].as_bool().unwrap_or(false),
                    },
                );
            }
        }
        for r in j["resources"].as_array().into_iter().flatten() {
            if r["mode"] != "managed" {
                continue;
            }
            let rtype = r["type"].as_str().unwrap_or_default().to_owned();
            let name = r["name"].as_str().unwrap_or_default().to_owned();
            let module = r["module"].as_str().unwrap_or_default().to_owned();
            for inst in r["instances"].as_array().into_iter().flatten() {
                if inst.get("index_key").is_some() {
                    return Err(
                        "Resources with count or for_each are not emulated by tofu-sim.".into(),
                    );
                }
                let value =
                    attrs_to_value(&rtype, &inst["attributes"], &inst["sensitive_attributes"]);
                let dependencies = inst["dependencies"]
                    .as_array()
                    .map(|d| {
                        d.iter()
                            .filter_map(|x| x.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                let i = Instance {
                    module: module.clone(),
                    rtype: rtype.clone(),
                    name: name.clone(),
                    value,
                    dependencies,
                };
                st.resources.insert(i.address(), i);
            }
        }
        Ok(st)
    }

    /// The v4 JSON document.
    pub fn to_json(&self) -> Json {
        let outputs: Map<String, Json> = self
            .outputs
            .iter()
            .map(|(k, o)| {
                let plain = o.value.deep_unmark();
                let mut e = json!({"value": plain.to_json(), "type": plain.ty().to_json(false)});
                if o.sensitive {
                    e["sensitive"] = json!(true);
                }
                (k.clone(), e)
            })
            .collect();
        let mut resources: Vec<&Instance> = self.resources.values().collect();
        resources
            .sort_by(|a, b| (&a.module, &a.rtype, &a.name).cmp(&(&b.module, &b.rtype, &b.name)));
        let resources: Vec<Json> = resources
            .into_iter()
            .map(|i| {
                let (attrs, sens) = value_to_attrs(&i.rtype, &i.value);
                let provider = provider_of(&i.rtype).map(|p| p.1).unwrap_or_default();
                let mut inst = json!({
                    "schema_version": 0,
                    "attributes": attrs,
                    "sensitive_attributes": sens,
                });
                if i.rtype == "local_file" {
                    inst["private"] = json!("bnVsbA==");
                }
                if !i.dependencies.is_empty() {
                    inst["dependencies"] = json!(i.dependencies);
                }
                let mut r = Map::new();
                if !i.module.is_empty() {
                    r.insert("module".into(), json!(i.module));
                }
                r.insert("mode".into(), json!("managed"));
                r.insert("type".into(), json!(i.rtype));
                r.insert("name".into(), json!(i.name));
                r.insert(
                    "provider".into(),
                    json!(format!("provider[\"{provider}\"]")),
                );
                r.insert("instances".into(), json!([inst]));
                Json::Object(r)
            })
            .collect();
        json!({
            "version": 4,
            "terraform_version": TOFU_VERSION,
            "serial": self.serial,
            "lineage": self.lineage,
            "outputs": outputs,
            "resources": resources,
            "check_results": null
        })
    }

    /// The bytes tofu writes (indented JSON with a final newline).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = serde_json::to_vec_pretty(&self.to_json()).unwrap_or_default();
        b.push(b'\n');
        b
    }

    /// Content equality, ignoring serial and version (decides whether a write is needed).
    pub fn same_content(&self, other: &State) -> bool {
        let strip = |s: &State| {
            let mut j = s.to_json();
            j["serial"] = json!(0);
            j
        };
        strip(self) == strip(other)
    }
}
