//! Resolution: a validated template version plus an instance's parameters, environment and
//! target settings → a [`Snapshot`] with resources in dependency order.
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use crate::document::{Input, Template};
use crate::expr::{Expr, ExprKind, Part};
use crate::library::Library;
use crate::naming::{physical_name, state_key};
use crate::params::{ParamValue, effective, json_type};
use crate::problem::{ProblemKind, Problems};
use crate::snapshot::{Binding, InstanceOutput, ResolvedResource, SNAPSHOT_FORMAT, Snapshot};
use crate::validate::{NAME_VARIABLE, edges, validate};
use crate::yaml::Loc;

/// What a resolve needs besides the template and the library.
#[derive(Debug, Clone, Default)]
pub struct ResolveInput {
    /// Content hash of the template version.
    pub template_version: String,
    pub tenant_id: String,
    pub instance_id: String,
    pub instance_name: String,
    /// The environment as requested; normalised here (`prod` → `production`), and an
    /// invalid name is a problem.
    pub environment: String,
    /// Parameter values; sensitive parameters take references.
    pub parameters: BTreeMap<String, serde_json::Value>,
    /// The target's settings (e.g. `base_dir`), from which `target_inputs` are filled.
    pub target: BTreeMap<String, serde_json::Value>,
}

/// A literal expression as JSON, with plain parameter values substituted.
pub fn literal_json(
    expr: &Expr,
    params: &BTreeMap<String, serde_json::Value>,
) -> Option<serde_json::Value> {
    literal(expr, params).ok()
}

fn literal(
    expr: &Expr,
    params: &BTreeMap<String, serde_json::Value>,
) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    Ok(match &expr.kind {
        ExprKind::Null => J::Null,
        ExprKind::Bool(b) => J::Bool(*b),
        ExprKind::Number(n) => J::Number(n.clone()),
        ExprKind::Str(parts) => {
            let mut s = String::new();
            for part in parts {
                match part {
                    Part::Lit(t) => s.push_str(t),
                    Part::Param(p) => match params.get(p) {
                        Some(J::String(v)) => s.push_str(v),
                        Some(v @ (J::Number(_) | J::Bool(_))) => s.push_str(&v.to_string()),
                        Some(v) => {
                            return Err(format!(
                                "parameter {p:?} is a {} and cannot be interpolated into a string",
                                json_type(v)
                            ));
                        }
                        None => return Err(format!("no value for parameter {p:?}")),
                    },
                }
            }
            J::String(s)
        }
        ExprKind::List(items) => J::Array(
            items
                .iter()
                .map(|e| literal(e, params))
                .collect::<Result<_, _>>()?,
        ),
        ExprKind::Map(m) => J::Object(
            m.iter()
                .map(|(k, e)| Ok((k.clone(), literal(e, params)?)))
                .collect::<Result<_, String>>()?,
        ),
        ExprKind::Param(p) => params
            .get(p)
            .cloned()
            .ok_or_else(|| format!("no value for parameter {p:?}"))?,
        ExprKind::Outputs(_) | ExprKind::Output(..) => {
            return Err("a resource reference is not a literal".to_owned());
        }
    })
}

/// Resources in dependency order; among those ready at the same time, document order.
pub fn topological_order(template: &Template) -> Vec<usize> {
    let graph = edges(template);
    let index: BTreeMap<&str, usize> = template
        .resources
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    let mut pending = vec![0usize; template.resources.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); template.resources.len()];
    for (i, r) in template.resources.iter().enumerate() {
        for (up, _) in graph
            .get(r.name.as_str())
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            if let Some(&u) = index.get(up) {
                pending[i] += 1;
                dependents[u].push(i);
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = pending
        .iter()
        .enumerate()
        .filter(|(_, n)| **n == 0)
        .map(|(i, _)| Reverse(i))
        .collect();
    let mut order = Vec::with_capacity(pending.len());
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &d in &dependents[i] {
            pending[d] -= 1;
            if pending[d] == 0 {
                ready.push(Reverse(d));
            }
        }
    }
    order
}

/// Validates and resolves. Every problem (document, parameters, target) is reported at once.
pub fn resolve(
    template: &Template,
    library: &Library,
    input: &ResolveInput,
) -> Result<Snapshot, Problems> {
    validate(template, library)?;
    // The one environment rule: `prod` and `Production` are `production`, here as in the
    // coordinator and the runner; the snapshot records the normalised name.
    let environment = cairn_contract::Environment::parse(&input.environment).map_err(|e| {
        let mut problems = Problems::default();
        problems.push(
            ProblemKind::InvalidName,
            "environment",
            Loc::default(),
            e.to_string(),
        );
        problems
    })?;
    let params = effective(template, &environment, &input.parameters)?;
    let plain: BTreeMap<String, serde_json::Value> = params
        .iter()
        .filter_map(|(k, v)| match v {
            ParamValue::Plain(j) => Some((k.clone(), j.clone())),
            ParamValue::Reference(_) => None,
        })
        .collect();
    let env = template.environment(&environment);
    let graph = edges(template);
    let modules_by_resource: BTreeMap<&str, &str> = template
        .resources
        .iter()
        .map(|r| (r.name.as_str(), r.module.as_str()))
        .collect();
    let mut problems = Problems::default();
    let mut resources = Vec::with_capacity(template.resources.len());

    for i in topological_order(template) {
        let r = &template.resources[i];
        let path = format!("resources.{}", r.name);
        let Some(module) = library.get(&r.module) else {
            continue; // validate() already refused unknown modules
        };
        // Effective inputs: the environment's override wins.
        let mut inputs: BTreeMap<&str, &Input> =
            r.inputs.iter().map(|i| (i.name.as_str(), i)).collect();
        if let Some(o) = env.and_then(|e| e.resources.iter().find(|o| o.name == r.name)) {
            for i in &o.inputs {
                inputs.insert(i.name.as_str(), i);
            }
        }
        let physical = physical_name(
            &input.tenant_id,
            &input.instance_id,
            &input.instance_name,
            &r.name,
        );
        let mut bindings = BTreeMap::new();
        let mut sensitive_variables = BTreeMap::new();
        for (name, inp) in &inputs {
            let ipath = format!("{path}.inputs.{name}");
            let Some(var) = module.variables.get(*name) else {
                continue;
            };
            let binding = match &inp.expr.kind {
                ExprKind::Outputs(up) => {
                    let outputs = modules_by_resource
                        .get(up.as_str())
                        .and_then(|m| library.get(m))
                        .map(|m| m.public_outputs())
                        .unwrap_or_default();
                    Binding::Outputs {
                        resource: up.clone(),
                        outputs,
                    }
                }
                ExprKind::Output(up, out) => Binding::Output {
                    resource: up.clone(),
                    output: out.clone(),
                },
                ExprKind::Param(p) if matches!(params.get(p), Some(ParamValue::Reference(_))) => {
                    if let Some(ParamValue::Reference(reference)) = params.get(p) {
                        sensitive_variables.insert(p.clone(), reference.clone());
                    }
                    Binding::Sensitive {
                        variable: p.clone(),
                    }
                }
                _ => match literal(&inp.expr, &plain) {
                    Ok(value) => {
                        if let Err(m) = var.ty.accepts(&value) {
                            problems.push(
                                ProblemKind::TypeMismatch,
                                &ipath,
                                inp.expr.loc,
                                format!("variable {name:?}: {m}"),
                            );
                        }
                        Binding::Literal { value }
                    }
                    Err(m) => {
                        problems.push(ProblemKind::TypeMismatch, &ipath, inp.expr.loc, m);
                        continue;
                    }
                },
            };
            bindings.insert((*name).to_owned(), binding);
        }
        for t in &module.target_inputs {
            match input.target.get(t) {
                Some(value) => {
                    if let Some(var) = module.variables.get(t)
                        && let Err(m) = var.ty.accepts(value)
                    {
                        problems.push(
                            ProblemKind::MissingTargetSetting,
                            format!("{path}.inputs.{t}"),
                            r.loc,
                            format!("target setting {t:?}: {m}"),
                        );
                    }
                    bindings.insert(
                        t.clone(),
                        Binding::Literal {
                            value: value.clone(),
                        },
                    );
                }
                None => problems.push(
                    ProblemKind::MissingTargetSetting,
                    format!("{path}.inputs.{t}"),
                    r.loc,
                    format!("module {} needs the target setting {t:?}", r.module),
                ),
            }
        }
        if module.variables.contains_key(NAME_VARIABLE) && !bindings.contains_key(NAME_VARIABLE) {
            bindings.insert(
                NAME_VARIABLE.to_owned(),
                Binding::Literal {
                    value: serde_json::Value::String(physical.clone()),
                },
            );
        }
        let depends_on: BTreeSet<String> = graph
            .get(r.name.as_str())
            .map(|e| e.iter().map(|(n, _)| (*n).to_owned()).collect())
            .unwrap_or_default();
        resources.push(ResolvedResource {
            name: r.name.clone(),
            module: module.source.clone(),
            kind: module.kind.clone(),
            state_key: state_key(&physical),
            physical_name: physical,
            depends_on: depends_on.into_iter().collect(),
            inputs: bindings,
            sensitive_variables,
            outputs: module
                .outputs
                .iter()
                .map(|(k, o)| (k.clone(), o.sensitive))
                .collect(),
        });
    }
    problems.into_result(Snapshot {
        format: SNAPSHOT_FORMAT,
        template: template.name.clone(),
        template_version: input.template_version.clone(),
        environment: environment.as_str().to_owned(),
        tenant_id: input.tenant_id.clone(),
        instance_id: input.instance_id.clone(),
        instance_name: input.instance_name.clone(),
        module_library: library.fingerprint().to_owned(),
        resources,
        outputs: instance_outputs(template, library),
    })
}

/// The output declarations of a validated template, with sensitivity propagated from the
/// module outputs they name.
fn instance_outputs(template: &Template, library: &Library) -> Vec<InstanceOutput> {
    template
        .outputs
        .iter()
        .map(|o| {
            let module_sensitive = template
                .resources
                .iter()
                .find(|r| r.name == o.resource)
                .and_then(|r| library.get(&r.module))
                .and_then(|m| m.outputs.get(&o.output))
                .is_some_and(|m| m.sensitive);
            InstanceOutput {
                name: o.name.clone(),
                description: o.description.clone(),
                resource: o.resource.clone(),
                output: o.output.clone(),
                sensitive: o.sensitive || module_sensitive,
            }
        })
        .collect()
}
