//! What a run hands on from tofu's JSON: the plan's summary and risk, its drift findings
//! (addresses, actions, attribute paths; no values) and the plan with every
//! sensitive value masked (`show -json`), and the root outputs with sensitive values withheld
//! (`output -json`). Neither JSON is ever logged as it is.

use cairn_tofu::{DriftFinding, PlanSummary, PublicOutput};
use serde_json::Value;

/// The summary of the plan JSON of `tofu show -json`, and the plan with its sensitive values
/// masked (`None` when it is not JSON).
pub(super) fn plan_view(plan_json: &str) -> (PlanSummary, Option<Value>) {
    let summary = cairn_tofu::summarize_plan(plan_json.as_bytes());
    let masked = serde_json::from_str::<Value>(plan_json).ok().map(|mut v| {
        cairn_tofu::mask_plan(&mut v);
        v
    });
    (summary, masked)
}

/// The drift findings of the plan JSON (none when it cannot be read: the summary then says
/// the risk is unknown).
pub(super) fn drift_findings(plan_json: &str) -> Vec<DriftFinding> {
    cairn_tofu::drift_findings_json(plan_json.as_bytes()).unwrap_or_default()
}

/// The outputs of `tofu output -json` with sensitive values withheld; unreadable output gives
/// none.
pub(super) fn public_outputs(json: &str) -> Vec<PublicOutput> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(json) else {
        return Vec::new();
    };
    map.into_iter()
        .map(|(name, o)| {
            let sensitive = o.get("sensitive").and_then(Value::as_bool).unwrap_or(true);
            PublicOutput {
                name,
                value: if sensitive {
                    None
                } else {
                    o.get("value").cloned()
                },
                type_json: o.get("type").cloned(),
                sensitive,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_withhold_sensitive_values() {
        let out = public_outputs(
            r#"{"a":{"sensitive":false,"type":"string","value":"x"},
                "b":{"sensitive":true,"type":"string","value":"hunter2"}}"#,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].value, Some(Value::String("x".into())));
        assert_eq!(out[1].value, None);
        assert!(!format!("{out:?}").contains("hunter2"));
    }
}
