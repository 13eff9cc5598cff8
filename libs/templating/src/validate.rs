//! Validation of a parsed template against the module library: modules, inputs, types,
//! wiring kinds, sensitive outputs, parameters, instance outputs and dependency cycles, all
//! reported at once.
use std::collections::{BTreeMap, BTreeSet};

use crate::document::{Input, Resource, Template};
use crate::expr::{ExprKind, Part};
use crate::library::Library;
use crate::module::{ModuleSpec, TypeSpec};
use crate::problem::{ProblemKind, Problems};
use crate::yaml::Loc;

/// The module variable that receives the physical name when the template leaves it unset.
pub const NAME_VARIABLE: &str = "name";

/// Checks everything that can be checked without parameter values.
pub fn validate(template: &Template, library: &Library) -> Result<(), Problems> {
    let mut problems = Problems::default();
    let by_name: BTreeMap<&str, &Resource> = template
        .resources
        .iter()
        .map(|r| (r.name.as_str(), r))
        .collect();
    let module_of = |name: &str| by_name.get(name).and_then(|r| library.get(&r.module));

    for r in &template.resources {
        let path = format!("resources.{}", r.name);
        let Some(module) = library.get(&r.module) else {
            let known: Vec<&str> = library.sources().collect();
            problems.push(
                ProblemKind::UnknownModule,
                format!("{path}.module"),
                r.module_loc,
                format!(
                    "unknown module {:?} (the library has: {})",
                    r.module,
                    known.join(", ")
                ),
            );
            continue;
        };
        for input in &r.inputs {
            check_input(template, &module_of, &mut problems, &path, r, module, input);
        }
        for (name, var) in &module.variables {
            let given = r.inputs.iter().any(|i| &i.name == name);
            if var.required
                && !given
                && !module.target_inputs.contains(name)
                && name != NAME_VARIABLE
            {
                problems.push(
                    ProblemKind::MissingInput,
                    format!("{path}.inputs"),
                    r.loc,
                    format!("module {} requires input {name:?} ({})", r.module, var.ty),
                );
            }
        }
        for (i, (dep, loc)) in r.depends_on.iter().enumerate() {
            if !by_name.contains_key(dep.as_str()) {
                problems.push(
                    ProblemKind::UnknownResource,
                    format!("{path}.depends_on[{i}]"),
                    *loc,
                    format!("no resource named {dep:?}"),
                );
            }
        }
    }

    for env in &template.environments {
        let epath = format!("environments.{}", env.name);
        for (k, node) in &env.parameters {
            match template.parameters.iter().find(|p| p.name == k.name) {
                None => problems.push(
                    ProblemKind::UnknownParameter,
                    format!("{epath}.parameters.{}", k.name),
                    k.loc,
                    format!("the template has no parameter {:?}", k.name),
                ),
                Some(p) if !p.sensitive => {
                    if let Err(m) = crate::params::check_value(p, &node.to_json()) {
                        problems.push(
                            ProblemKind::InvalidParameter,
                            format!("{epath}.parameters.{}", k.name),
                            node.loc,
                            m,
                        );
                    }
                }
                Some(_) => problems.push(
                    ProblemKind::InvalidParameter,
                    format!("{epath}.parameters.{}", k.name),
                    node.loc,
                    "a sensitive parameter is supplied at deploy time as a reference, not in the template",
                ),
            }
        }
        for o in &env.resources {
            let Some(r) = by_name.get(o.name.as_str()) else {
                problems.push(
                    ProblemKind::UnknownResource,
                    format!("{epath}.resources.{}", o.name),
                    o.loc,
                    format!("no resource named {:?}", o.name),
                );
                continue;
            };
            let Some(module) = library.get(&r.module) else {
                continue;
            };
            let path = format!("{epath}.resources.{}", o.name);
            for input in &o.inputs {
                check_input(template, &module_of, &mut problems, &path, r, module, input);
            }
        }
    }

    check_outputs(template, &module_of, &mut problems);
    check_cycles(template, &mut problems);
    problems.into_result(())
}

#[allow(clippy::too_many_arguments)]
fn check_input<'a>(
    template: &Template,
    module_of: &dyn Fn(&str) -> Option<&'a ModuleSpec>,
    problems: &mut Problems,
    path: &str,
    r: &Resource,
    module: &ModuleSpec,
    input: &Input,
) {
    let ipath = format!("{path}.inputs.{}", input.name);
    let Some(var) = module.variables.get(&input.name) else {
        let known: Vec<&str> = module.variables.keys().map(String::as_str).collect();
        problems.push(
            ProblemKind::UnknownInput,
            ipath,
            input.key_loc,
            format!(
                "module {} has no variable {:?} (it has: {})",
                r.module,
                input.name,
                known.join(", ")
            ),
        );
        return;
    };
    if module.target_inputs.contains(&input.name) {
        problems.push(
            ProblemKind::ReservedInput,
            ipath,
            input.key_loc,
            format!(
                "{:?} is filled from the target's settings and cannot be set by a template",
                input.name
            ),
        );
        return;
    }
    let expr = &input.expr;
    // Parameters used anywhere in the value.
    let mut used = Vec::new();
    expr.params(&mut used);
    for (name, loc, whole) in &used {
        match template.parameters.iter().find(|p| &p.name == name) {
            None => problems.push(
                ProblemKind::UnknownParameter,
                ipath.clone(),
                *loc,
                format!("the template has no parameter {name:?}"),
            ),
            Some(p) if p.sensitive && !(*whole && matches!(&expr.kind, ExprKind::Param(n) if n == name)) => {
                problems.push(
                    ProblemKind::InvalidExpression,
                    ipath.clone(),
                    *loc,
                    format!("sensitive parameter {name:?} can only be the whole value of an input (it is passed as a sensitive variable)"),
                )
            }
            Some(_) => {}
        }
    }
    match &expr.kind {
        ExprKind::Param(name) => {
            if let Some(p) = template.parameters.iter().find(|p| &p.name == name) {
                let ok = if p.sensitive {
                    matches!(var.ty, TypeSpec::String | TypeSpec::Any)
                } else {
                    var.ty.accepts_param(p.ty)
                };
                if !ok {
                    problems.push(
                        ProblemKind::TypeMismatch,
                        ipath,
                        expr.loc,
                        format!(
                            "variable {:?} is {}, parameter {name:?} is a {}",
                            input.name,
                            var.ty,
                            p.ty.as_str()
                        ),
                    );
                }
            }
        }
        ExprKind::Outputs(up) => {
            let Some(up_module) = upstream(problems, module_of, &ipath, expr.loc, r, up) else {
                return;
            };
            let Some(expected) = module.wiring.get(&input.name) else {
                problems.push(
                    ProblemKind::TypeMismatch,
                    ipath,
                    expr.loc,
                    format!(
                        "{:?} is not a wiring variable of {} (module.cairn.json); pass one output with ${{resources.{up}.<output>}}",
                        input.name, r.module
                    ),
                );
                return;
            };
            if &up_module.kind != expected {
                problems.push(
                    ProblemKind::WrongUpstreamKind,
                    ipath.clone(),
                    expr.loc,
                    format!(
                        "{:?} expects a {expected}, but resource {up:?} is a {} ({})",
                        input.name, up_module.kind, up_module.source
                    ),
                );
                return;
            }
            if let TypeSpec::Object(attrs) = &var.ty {
                for (attr, (_, optional)) in attrs {
                    match up_module.outputs.get(attr) {
                        Some(o) if o.sensitive => problems.push(
                            ProblemKind::SensitiveOutputWired,
                            ipath.clone(),
                            expr.loc,
                            format!("{:?} needs output {attr:?} of {up:?}, which is sensitive; secrets travel as references, never through wiring", input.name),
                        ),
                        Some(_) => {}
                        None if *optional => {}
                        None => problems.push(
                            ProblemKind::TypeMismatch,
                            ipath.clone(),
                            expr.loc,
                            format!("{:?} needs attribute {attr:?}, which {} does not output", input.name, up_module.source),
                        ),
                    }
                }
            }
        }
        ExprKind::Output(up, out) => {
            let Some(up_module) = upstream(problems, module_of, &ipath, expr.loc, r, up) else {
                return;
            };
            match up_module.outputs.get(out) {
                None => problems.push(
                    ProblemKind::UnknownOutput,
                    ipath,
                    expr.loc,
                    format!(
                        "module {} has no output {out:?} (it has: {})",
                        up_module.source,
                        up_module.outputs.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ),
                Some(o) if o.sensitive => problems.push(
                    ProblemKind::SensitiveOutputWired,
                    ipath,
                    expr.loc,
                    format!("output {out:?} of {up:?} is sensitive and cannot be wired; pass a reference instead"),
                ),
                Some(_) => {}
            }
        }
        ExprKind::Str(parts) if parts.iter().any(|p| matches!(p, Part::Param(_))) => {
            if let Err(m) = var.ty.accepts(&serde_json::Value::String(String::new())) {
                problems.push(ProblemKind::TypeMismatch, ipath, expr.loc, m);
            }
        }
        ExprKind::Null
        | ExprKind::Bool(_)
        | ExprKind::Number(_)
        | ExprKind::Str(_)
        | ExprKind::List(_)
        | ExprKind::Map(_) => {
            if used.is_empty()
                && let Some(v) = crate::resolve::literal_json(expr, &BTreeMap::new())
                && let Err(m) = var.ty.accepts(&v)
            {
                problems.push(
                    ProblemKind::TypeMismatch,
                    ipath,
                    expr.loc,
                    format!("variable {:?}: {m}", input.name),
                );
            }
        }
    }
}

/// Every instance output names a resource of the template and an output of its module.
fn check_outputs<'a>(
    template: &Template,
    module_of: &dyn Fn(&str) -> Option<&'a ModuleSpec>,
    problems: &mut Problems,
) {
    for o in &template.outputs {
        let path = format!("outputs.{}.value", o.name);
        let Some(r) = template.resources.iter().find(|r| r.name == o.resource) else {
            problems.push(
                ProblemKind::UnknownResource,
                path,
                o.value_loc,
                format!("no resource named {:?}", o.resource),
            );
            continue;
        };
        // An unknown module is reported at the resource.
        let Some(module) = module_of(&r.name) else {
            continue;
        };
        if !module.outputs.contains_key(&o.output) {
            problems.push(
                ProblemKind::UnknownOutput,
                path,
                o.value_loc,
                format!(
                    "module {} has no output {:?} (it has: {})",
                    module.source,
                    o.output,
                    module
                        .outputs
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
    }
}

fn upstream<'a>(
    problems: &mut Problems,
    module_of: &dyn Fn(&str) -> Option<&'a ModuleSpec>,
    ipath: &str,
    loc: Loc,
    r: &Resource,
    up: &str,
) -> Option<&'a ModuleSpec> {
    if up == r.name {
        problems.push(
            ProblemKind::DependencyCycle,
            ipath,
            loc,
            format!("dependency cycle: {up} -> {up}"),
        );
        return None;
    }
    let m = module_of(up);
    if m.is_none() {
        problems.push(
            ProblemKind::UnknownResource,
            ipath,
            loc,
            format!("no resource named {up:?}"),
        );
    }
    m
}

/// Every dependency edge of a resource (inputs in the base document and in every
/// environment, and `depends_on`), with where it is written.
pub fn edges(template: &Template) -> BTreeMap<&str, Vec<(&str, Loc)>> {
    let names: BTreeSet<&str> = template.resources.iter().map(|r| r.name.as_str()).collect();
    let mut out: BTreeMap<&str, Vec<(&str, Loc)>> = BTreeMap::new();
    for r in &template.resources {
        let list = out.entry(r.name.as_str()).or_default();
        let overrides = template
            .environments
            .iter()
            .flat_map(|e| e.resources.iter().filter(|o| o.name == r.name))
            .flat_map(|o| o.inputs.iter());
        for input in r.inputs.iter().chain(overrides) {
            if let Some(up) = input.expr.upstream()
                && names.contains(up)
                && up != r.name
            {
                list.push((up, input.expr.loc));
            }
        }
        for (dep, loc) in &r.depends_on {
            if names.contains(dep.as_str()) && dep != &r.name {
                list.push((dep.as_str(), *loc));
            }
        }
        list.sort();
        list.dedup_by(|a, b| a.0 == b.0);
    }
    out
}

fn check_cycles(template: &Template, problems: &mut Problems) {
    let graph = edges(template);
    // 0 = unvisited, 1 = on the stack, 2 = done.
    let mut state: BTreeMap<&str, u8> = BTreeMap::new();
    let mut reported: BTreeSet<Vec<&str>> = BTreeSet::new();
    for start in graph.keys() {
        if state.get(start).copied().unwrap_or(0) != 0 {
            continue;
        }
        // Iterative DFS: (node, next edge index).
        let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
        state.insert(start, 1);
        while let Some((node, idx)) = stack.last().copied() {
            let next = graph.get(node).and_then(|e| e.get(idx));
            match next {
                None => {
                    state.insert(node, 2);
                    stack.pop();
                }
                Some((to, loc)) => {
                    if let Some(top) = stack.last_mut() {
                        top.1 += 1;
                    }
                    match state.get(to).copied().unwrap_or(0) {
                        0 => {
                            state.insert(to, 1);
                            stack.push((to, 0));
                        }
                        1 => {
                            let from = stack.iter().position(|(n, _)| n == to).unwrap_or(0);
                            let mut cycle: Vec<&str> =
                                stack[from..].iter().map(|(n, _)| *n).collect();
                            // Report each cycle once, starting from its smallest name.
                            let min = cycle
                                .iter()
                                .enumerate()
                                .min_by_key(|(_, n)| **n)
                                .map(|(i, _)| i)
                                .unwrap_or(0);
                            cycle.rotate_left(min);
                            if reported.insert(cycle.clone()) {
                                let mut text = cycle.join(" -> ");
                                text.push_str(" -> ");
                                text.push_str(cycle[0]);
                                problems.push(
                                    ProblemKind::DependencyCycle,
                                    format!("resources.{node}"),
                                    *loc,
                                    format!("dependency cycle: {text}"),
                                );
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}
