//! Instance outputs: the last applied snapshot's output declarations joined with the
//! outputs in each referenced resource's state. A sensitive one (declared, or sensitive in
//! the state) is shown without its value; one that cannot be read says why.
use std::collections::BTreeMap;

use cairn_templating::InstanceOutput;

/// One output of a resource's state, as the coordinator answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateOutput {
    /// JSON of the value; empty when sensitive.
    pub value_json: String,
    pub sensitive: bool,
}

/// What is known of a referenced resource's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateOutputs {
    /// The resource has no state (never applied, or the state is gone).
    NoState,
    /// The outputs of the state's current generation, by name.
    Read(BTreeMap<String, StateOutput>),
}

/// An output of the instance as it is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputView {
    pub name: String,
    pub description: String,
    pub sensitive: bool,
    /// JSON of the value; `None` when sensitive (withheld) or unavailable.
    pub value_json: Option<String>,
    /// Why no value could be read (not set for a withheld sensitive value).
    pub unavailable: Option<String>,
}

/// Joins the declarations (in their order) with the states of the resources they name
/// (`states` by resource name; a resource missing from it has no state).
pub fn instance_outputs(
    declarations: &[InstanceOutput],
    states: &BTreeMap<String, StateOutputs>,
) -> Vec<OutputView> {
    declarations
        .iter()
        .map(|d| {
            let mut view = OutputView {
                name: d.name.clone(),
                description: d.description.clone(),
                sensitive: d.sensitive,
                value_json: None,
                unavailable: None,
            };
            let outputs = match states.get(&d.resource) {
                Some(StateOutputs::Read(outputs)) => outputs,
                Some(StateOutputs::NoState) | None => {
                    view.unavailable = Some(format!(
                        "resource {:?} has no state yet: deploy the instance",
                        d.resource
                    ));
                    return view;
                }
            };
            match outputs.get(&d.output) {
                None => {
                    view.unavailable = Some(format!(
                        "the state of resource {:?} has no output {:?}",
                        d.resource, d.output
                    ));
                }
                Some(o) => {
                    // The state's own marking counts too: a value OpenTofu calls sensitive
                    // is never shown, whatever the template declares.
                    view.sensitive = d.sensitive || o.sensitive;
                    if !view.sensitive {
                        view.value_json = Some(o.value_json.clone());
                    }
                }
            }
            view
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn decl(name: &str, resource: &str, output: &str, sensitive: bool) -> InstanceOutput {
        InstanceOutput {
            name: name.into(),
            description: format!("the {name}"),
            resource: resource.into(),
            output: output.into(),
            sensitive,
        }
    }

    fn out(value_json: &str, sensitive: bool) -> StateOutput {
        StateOutput {
            value_json: value_json.into(),
            sensitive,
        }
    }

    #[test]
    fn values_are_shown_and_sensitive_ones_withheld() {
        let declarations = [
            decl("url", "web", "url", false),
            decl("user", "db", "admin_username", true),
            decl("password", "db", "password", false),
            decl("port", "db", "port", false),
            decl("missing", "db", "nope", false),
            decl("queue", "queue", "url", false),
        ];
        let states = BTreeMap::from([
            (
                "web".to_owned(),
                StateOutputs::Read(BTreeMap::from([(
                    "url".to_owned(),
                    out("\"http://shop.service.internal:8080\"", false),
                )])),
            ),
            (
                "db".to_owned(),
                StateOutputs::Read(BTreeMap::from([
                    ("admin_username".to_owned(), out("\"admin\"", false)),
                    ("password".to_owned(), out("", true)),
                    ("port".to_owned(), out("5432", false)),
                ])),
            ),
            ("queue".to_owned(), StateOutputs::NoState),
        ]);
        let got = instance_outputs(&declarations, &states);
        let summary: Vec<(&str, bool, Option<&str>, bool)> = got
            .iter()
            .map(|v| {
                (
                    v.name.as_str(),
                    v.sensitive,
                    v.value_json.as_deref(),
                    v.unavailable.is_some(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "url",
                    false,
                    Some("\"http://shop.service.internal:8080\""),
                    false
                ),
                // Declared sensitive: withheld although the state has the value.
                ("user", true, None, false),
                // Sensitive in the state: withheld although the template did not say so.
                ("password", true, None, false),
                ("port", false, Some("5432"), false),
                ("missing", false, None, true),
                ("queue", false, None, true),
            ]
        );
        assert_eq!(got[0].description, "the url");
        assert!(
            got[4].unavailable.as_deref().unwrap().contains("\"nope\""),
            "{:?}",
            got[4]
        );
        assert!(
            got[5].unavailable.as_deref().unwrap().contains("no state"),
            "{:?}",
            got[5]
        );
    }
}
