//! Masking of a plan JSON document before it is stored or logged: `show -json` prints every
//! sensitive value in clear next to the maps that say which ones are sensitive.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::address::strip_instance_keys;

/// What every sensitive value is replaced with (the words OpenTofu's own plan output uses).
pub const SENSITIVE_MARKER: &str = "(sensitive value)";

/// Replaces, in place, every sensitive value of a plan JSON document with
/// [`SENSITIVE_MARKER`]:
///
/// - `before`/`after` of `resource_changes`, `resource_drift` and `output_changes`, following
///   `before_sensitive`/`after_sensitive` (`true` masks the whole value, an object or array
///   masks the parts it marks);
/// - resource `values` in `planned_values` and `prior_state` following `sensitive_values`,
///   in every child module, and outputs flagged `sensitive` (or declared so in the
///   configuration);
/// - values in the `variables` section of variables declared `sensitive`;
/// - in `configuration`: defaults of sensitive variables, constant expressions of sensitive
///   outputs, module call arguments feeding sensitive module variables, and resource
///   arguments whose attribute is sensitive in any instance of that resource.
///
/// Finally every string anywhere in the document that equals a masked string value is
/// masked too, and longer strings have such values (4 characters or more) cut out, so a
/// secret copied somewhere the maps do not cover (a provider block, `generated_config`) does
/// not survive. Object keys are left alone. A document that is not a plan is left as it is,
/// except for whatever of the above it happens to contain.
pub fn mask_plan(plan: &mut Value) {
    mask_plan_collecting(plan);
}

/// [`mask_plan`], returning every non-empty string it masked, so the caller can redact the
/// same values from anything else it prints (log lines, diagnostics). Handle the result as a
/// secret: it is exactly what was removed.
pub fn mask_plan_collecting(plan: &mut Value) -> BTreeSet<String> {
    let mut masker = Masker::default();
    let config = ConfigFlags::read(plan.get("configuration"));
    let resource_marks = collect_resource_marks(plan);

    for key in ["resource_changes", "resource_drift"] {
        for rc in array_mut(plan.get_mut(key)) {
            if let Some(change) = rc.get_mut("change") {
                masker.mask_change(change, false);
            }
        }
    }
    if let Some(Value::Object(outputs)) = plan.get_mut("output_changes") {
        for (name, change) in outputs.iter_mut() {
            masker.mask_change(change, config.sensitive_outputs.contains(name));
        }
    }
    if let Some(values) = plan.get_mut("planned_values") {
        masker.mask_state_values(values, &config.sensitive_outputs);
    }
    if let Some(values) = plan
        .get_mut("prior_state")
        .and_then(|prior| prior.get_mut("values"))
    {
        masker.mask_state_values(values, &config.sensitive_outputs);
    }
    if let Some(Value::Object(variables)) = plan.get_mut("variables") {
        for (name, variable) in variables.iter_mut() {
            if config.sensitive_variables.contains(name)
                && let Some(value) = variable.get_mut("value")
            {
                masker.mask(value);
            }
        }
    }
    if let Some(root) = plan
        .get_mut("configuration")
        .and_then(|config| config.get_mut("root_module"))
    {
        masker.mask_config_module(root, "", &resource_marks);
    }
    masker.sweep(plan);
    masker.secrets
}

#[derive(Default)]
struct Masker {
    /// Every non-empty string that was masked.
    secrets: BTreeSet<String>,
}

impl Masker {
    /// Replaces `value` (unless null) with the marker, remembering the strings it held.
    fn mask(&mut self, value: &mut Value) {
        if value.is_null() {
            return;
        }
        self.remember(value);
        *value = Value::String(SENSITIVE_MARKER.to_owned());
    }

    fn remember(&mut self, value: &Value) {
        match value {
            Value::String(text) if !text.is_empty() && text != SENSITIVE_MARKER => {
                self.secrets.insert(text.clone());
            }
            Value::Array(items) => items.iter().for_each(|item| self.remember(item)),
            Value::Object(fields) => fields.values().for_each(|item| self.remember(item)),
            _ => {}
        }
    }

    /// Masks the parts of `value` that `marks` marks sensitive. Where the shapes disagree
    /// and `marks` marks anything, the whole value is masked.
    fn mask_marked(&mut self, value: &mut Value, marks: &Value) {
        match (marks, &mut *value) {
            (Value::Bool(true), _) => self.mask(value),
            (Value::Object(marks), Value::Object(fields)) => {
                for (key, mark) in marks {
                    if let Some(field) = fields.get_mut(key) {
                        self.mask_marked(field, mark);
                    }
                }
            }
            (Value::Array(marks), Value::Array(items)) => {
                for (item, mark) in items.iter_mut().zip(marks) {
                    self.mask_marked(item, mark);
                }
            }
            (marks, _) if marks_anything(marks) => self.mask(value),
            _ => {}
        }
    }

    /// A change object: `before`/`after` by their sensitivity maps, or both whole.
    fn mask_change(&mut self, change: &mut Value, whole: bool) {
        let Value::Object(change) = change else {
            return;
        };
        for (value_key, marks_key) in [("before", "before_sensitive"), ("after", "after_sensitive")]
        {
            let marks = if whole {
                Value::Bool(true)
            } else {
                change.get(marks_key).cloned().unwrap_or(Value::Null)
            };
            if let Some(value) = change.get_mut(value_key) {
                self.mask_marked(value, &marks);
            }
        }
    }

    /// A `values` object of the state JSON format: `outputs` and `root_module`.
    fn mask_state_values(&mut self, values: &mut Value, sensitive_outputs: &BTreeSet<String>) {
        if let Some(Value::Object(outputs)) = values.get_mut("outputs") {
            for (name, output) in outputs.iter_mut() {
                let flagged = output.get("sensitive") == Some(&Value::Bool(true));
                if (flagged || sensitive_outputs.contains(name))
                    && let Some(value) = output.get_mut("value")
                {
                    self.mask(value);
                }
            }
        }
        if let Some(module) = values.get_mut("root_module") {
            self.mask_state_module(module);
        }
    }

    fn mask_state_module(&mut self, module: &mut Value) {
        for resource in array_mut(module.get_mut("resources")) {
            let marks = resource
                .get("sensitive_values")
                .cloned()
                .unwrap_or(Value::Null);
            if let Some(values) = resource.get_mut("values") {
                self.mask_marked(values, &marks);
            }
        }
        for child in array_mut(module.get_mut("child_modules")) {
            self.mask_state_module(child);
        }
    }

    /// A module of the `configuration` section; `path` is its keyless module address.
    fn mask_config_module(
        &mut self,
        module: &mut Value,
        path: &str,
        resource_marks: &BTreeMap<String, Value>,
    ) {
        let Value::Object(module) = module else {
            return;
        };
        if let Some(Value::Object(variables)) = module.get_mut("variables") {
            for variable in variables.values_mut() {
                if is_flagged_sensitive(variable)
                    && let Some(default) = variable.get_mut("default")
                {
                    self.mask(default);
                }
            }
        }
        if let Some(Value::Object(outputs)) = module.get_mut("outputs") {
            for output in outputs.values_mut() {
                if is_flagged_sensitive(output)
                    && let Some(expression) = output.get_mut("expression")
                {
                    self.mask_constants(expression);
                }
            }
        }
        for resource in array_mut(module.get_mut("resources")) {
            let Some(address) = resource.get("address").and_then(Value::as_str) else {
                continue;
            };
            let key = join_address(path, address);
            let Some(Value::Object(marks)) = resource_marks.get(&key) else {
                continue;
            };
            if let Some(Value::Object(expressions)) = resource.get_mut("expressions") {
                for (attribute, mark) in marks {
                    if marks_anything(mark)
                        && let Some(expression) = expressions.get_mut(attribute)
                    {
                        self.mask_constants(expression);
                    }
                }
            }
        }
        if let Some(Value::Object(calls)) = module.get_mut("module_calls") {
            for (name, call) in calls.iter_mut() {
                let child_path = join_address(path, &format!("module.{name}"));
                self.mask_module_call(call, &child_path, resource_marks);
            }
        }
    }

    fn mask_module_call(
        &mut self,
        call: &mut Value,
        path: &str,
        resource_marks: &BTreeMap<String, Value>,
    ) {
        let sensitive_inputs: Vec<String> = call
            .get("module")
            .and_then(|module| module.get("variables"))
            .and_then(Value::as_object)
            .map(|variables| {
                variables
                    .iter()
                    .filter(|(_, variable)| is_flagged_sensitive(variable))
                    .map(|(name, _)| name.clone())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(Value::Object(expressions)) = call.get_mut("expressions") {
            for name in &sensitive_inputs {
                if let Some(expression) = expressions.get_mut(name) {
                    self.mask_constants(expression);
                }
            }
        }
        if let Some(module) = call.get_mut("module") {
            self.mask_config_module(module, path, resource_marks);
        }
    }

    /// Masks every `constant_value` inside a configuration expression (or a nested block of
    /// expressions).
    fn mask_constants(&mut self, expression: &mut Value) {
        match expression {
            Value::Object(fields) => {
                for (key, field) in fields.iter_mut() {
                    if key == "constant_value" {
                        self.mask(field);
                    } else {
                        self.mask_constants(field);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.mask_constants(item)),
            _ => {}
        }
    }

    /// Masks copies of the remembered strings anywhere in the document.
    fn sweep(&self, value: &mut Value) {
        if self.secrets.is_empty() {
            return;
        }
        // Longest first, so a secret containing another is cut out whole.
        let mut cut: Vec<&str> = self
            .secrets
            .iter()
            .map(String::as_str)
            .filter(|secret| secret.chars().count() >= 4)
            .collect();
        cut.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
        sweep_value(value, &self.secrets, &cut);
    }
}

fn sweep_value(value: &mut Value, exact: &BTreeSet<String>, cut: &[&str]) {
    match value {
        Value::String(text) => {
            if exact.contains(text.as_str()) {
                *text = SENSITIVE_MARKER.to_owned();
                return;
            }
            for secret in cut {
                if text.contains(secret) {
                    *text = text.replace(secret, SENSITIVE_MARKER);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| sweep_value(item, exact, cut)),
        Value::Object(fields) => fields
            .values_mut()
            .for_each(|item| sweep_value(item, exact, cut)),
        _ => {}
    }
}

/// Masks the values of sensitive outputs in one UI stream message (`type` `outputs`, which
/// `apply -json` prints with sensitive values in clear), returning the non-empty strings it
/// masked. Other messages are left as they are.
pub fn mask_ui_message(message: &mut Value) -> BTreeSet<String> {
    let mut masker = Masker::default();
    if message.get("type").and_then(Value::as_str) == Some("outputs")
        && let Some(Value::Object(outputs)) = message.get_mut("outputs")
    {
        for output in outputs.values_mut() {
            if is_flagged_sensitive(output)
                && let Some(value) = output.get_mut("value")
            {
                masker.mask(value);
            }
        }
    }
    masker.secrets
}

/// Whether a sensitivity map marks any part of a value.
fn marks_anything(marks: &Value) -> bool {
    match marks {
        Value::Bool(flag) => *flag,
        Value::Array(items) => items.iter().any(marks_anything),
        Value::Object(fields) => fields.values().any(marks_anything),
        _ => false,
    }
}

fn is_flagged_sensitive(declaration: &Value) -> bool {
    declaration.get("sensitive") == Some(&Value::Bool(true))
}

fn join_address(path: &str, address: &str) -> String {
    if path.is_empty() {
        address.to_owned()
    } else {
        format!("{path}.{address}")
    }
}

/// Root-module declarations of the configuration that make values sensitive.
#[derive(Default)]
struct ConfigFlags {
    sensitive_variables: BTreeSet<String>,
    sensitive_outputs: BTreeSet<String>,
}

impl ConfigFlags {
    fn read(configuration: Option<&Value>) -> Self {
        let root = configuration.and_then(|config| config.get("root_module"));
        let flagged = |section: &str| -> BTreeSet<String> {
            root.and_then(|root| root.get(section))
                .and_then(Value::as_object)
                .map(|declarations| {
                    declarations
                        .iter()
                        .filter(|(_, declaration)| is_flagged_sensitive(declaration))
                        .map(|(name, _)| name.clone())
                        .collect()
                })
                .unwrap_or_default()
        };
        ConfigFlags {
            sensitive_variables: flagged("variables"),
            sensitive_outputs: flagged("outputs"),
        }
    }
}

/// The union of the sensitivity maps of every instance of each resource, keyed by the
/// resource's address without instance keys (`module.a.aws_instance.web`), which is how the
/// configuration section names resources.
fn collect_resource_marks(plan: &Value) -> BTreeMap<String, Value> {
    let mut marks: BTreeMap<String, Value> = BTreeMap::new();
    let mut add = |address: Option<&Value>, mark: Option<&Value>| {
        let (Some(address), Some(mark)) = (address.and_then(Value::as_str), mark) else {
            return;
        };
        let entry = marks
            .entry(strip_instance_keys(address))
            .or_insert(Value::Bool(false));
        *entry = union_marks(entry, mark);
    };
    for key in ["resource_changes", "resource_drift"] {
        for rc in array(plan.get(key)) {
            let change = rc.get("change");
            for marks_key in ["before_sensitive", "after_sensitive"] {
                add(rc.get("address"), change.and_then(|c| c.get(marks_key)));
            }
        }
    }
    let mut modules: Vec<&Value> = Vec::new();
    if let Some(root) = plan
        .get("planned_values")
        .and_then(|values| values.get("root_module"))
    {
        modules.push(root);
    }
    if let Some(root) = plan
        .get("prior_state")
        .and_then(|prior| prior.get("values"))
        .and_then(|values| values.get("root_module"))
    {
        modules.push(root);
    }
    while let Some(module) = modules.pop() {
        for resource in array(module.get("resources")) {
            add(resource.get("address"), resource.get("sensitive_values"));
        }
        modules.extend(array(module.get("child_modules")));
    }
    marks
}

/// A map marking everything either map marks.
fn union_marks(left: &Value, right: &Value) -> Value {
    match (left, right) {
        (Value::Bool(true), _) | (_, Value::Bool(true)) => Value::Bool(true),
        (Value::Object(a), Value::Object(b)) => {
            let mut merged: Map<String, Value> = a.clone();
            for (key, mark) in b {
                let combined = match merged.get(key) {
                    Some(existing) => union_marks(existing, mark),
                    None => mark.clone(),
                };
                merged.insert(key.clone(), combined);
            }
            Value::Object(merged)
        }
        (Value::Array(a), Value::Array(b)) => {
            let length = a.len().max(b.len());
            let none = Value::Bool(false);
            Value::Array(
                (0..length)
                    .map(|i| union_marks(a.get(i).unwrap_or(&none), b.get(i).unwrap_or(&none)))
                    .collect(),
            )
        }
        (a, b) if !marks_anything(b) => a.clone(),
        (a, b) if !marks_anything(a) => b.clone(),
        // Both mark something but disagree on the shape: mark the whole value.
        _ => Value::Bool(true),
    }
}

fn array(value: Option<&Value>) -> impl Iterator<Item = &Value> {
    value.and_then(Value::as_array).into_iter().flatten()
}

fn array_mut(value: Option<&mut Value>) -> impl Iterator<Item = &mut Value> {
    value.and_then(Value::as_array_mut).into_iter().flatten()
}
