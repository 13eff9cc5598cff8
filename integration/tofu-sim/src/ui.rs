//! Output to the user: OpenTofu's machine-readable `-json` UI stream, or short human text.

use std::io::Write;

use serde_json::{Value as Json, json};

use crate::core::Change;
use crate::providers::Action;
use crate::state::TOFU_VERSION;

/// Prints a debug line on stderr when TF_LOG is DEBUG or TRACE.
pub fn debug(line: &str) {
    if std::env::var("TF_LOG").is_ok_and(|v| {
        let v = v.to_ascii_uppercase();
        v == "DEBUG" || v == "TRACE"
    }) {
        eprintln!("{line}");
    }
}

pub struct Ui {
    pub json: bool,
}

fn now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

pub fn resource_json(c: &Change) -> Json {
    let implied = c.rtype.split('_').next().unwrap_or_default();
    json!({
        "addr": c.address(),
        "module": c.module,
        "resource": format!("{}.{}", c.rtype, c.name),
        "implied_provider": implied,
        "resource_type": c.rtype,
        "resource_name": c.name,
        "resource_key": null
    })
}

fn action_word(a: Action) -> &'static str {
    match a {
        Action::Create => "create",
        Action::Update => "update",
        Action::Delete => "delete",
        Action::Replace | Action::ReplaceCbd => "replace",
        Action::NoOp => "noop",
    }
}

impl Ui {
    pub fn emit(&self, level: &str, message: &str, kind: &str, extra: Json) {
        let mut line = json!({
            "@level": level,
            "@message": message,
            "@module": "tofu.ui",
            "@timestamp": now(),
            "type": kind,
        });
        if let (Some(l), Json::Object(e)) = (line.as_object_mut(), extra) {
            l.extend(e);
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    pub fn say(&self, text: &str) {
        if !self.json {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        }
    }

    /// A message of OpenTofu's own (an interrupt): a `log` message with `-json`, else text.
    pub fn log(&self, text: &str) {
        if self.json {
            self.emit("info", text, "log", json!({}));
        } else {
            self.say(text);
        }
    }

    pub fn version(&self) {
        if self.json {
            self.emit(
                "info",
                &format!("OpenTofu {TOFU_VERSION}"),
                "version",
                json!({"tofu": TOFU_VERSION, "ui": "1.2"}),
            );
        }
    }

    pub fn error(&self, summary: &str, detail: &str) {
        if self.json {
            self.emit(
                "error",
                &format!("Error: {summary}"),
                "diagnostic",
                json!({"diagnostic": {"severity": "error", "summary": summary, "detail": detail}}),
            );
        } else {
            eprintln!("\nError: {summary}\n\n{detail}\n");
        }
    }

    pub fn warn(&self, summary: &str, detail: &str) {
        if self.json {
            self.emit(
                "warn",
                &format!("Warning: {summary}"),
                "diagnostic",
                json!({"diagnostic": {"severity": "warning", "summary": summary, "detail": detail}}),
            );
        } else {
            eprintln!("\nWarning: {summary}\n\n{detail}\n");
        }
    }

    pub fn refresh(&self, c: &Change, id: &str) {
        if self.json {
            let hook = json!({"resource": resource_json(c), "id_key": "id", "id_value": id});
            self.emit(
                "info",
                &format!("{}: Refreshing state... [id={id}]", c.address()),
                "refresh_start",
                json!({"hook": hook.clone()}),
            );
            self.emit(
                "info",
                &format!("{}: Refresh complete [id={id}]", c.address()),
                "refresh_complete",
                json!({"hook": hook}),
            );
        } else {
            self.say(&format!("{}: Refreshing state... [id={id}]", c.address()));
        }
    }

    pub fn drift(&self, c: &Change) {
        if self.json {
            self.emit(
                "info",
                &format!("{}: Drift detected (delete)", c.address()),
                "resource_drift",
                json!({"change": {"resource": resource_json(c), "action": "delete"}}),
            );
        }
    }

    pub fn planned(&self, c: &Change) {
        let word = action_word(c.action);
        if self.json {
            let mut change = json!({"resource": resource_json(c), "action": word});
            match (c.action, c.reason) {
                (Action::Replace | Action::ReplaceCbd, _) => {
                    change["reason"] = json!("cannot_update")
                }
                (Action::Delete, Some(r)) => change["reason"] = json!(r),
                _ => {}
            }
            let verb = match c.action {
                Action::Create => "create",
                Action::Update => "update in-place",
                Action::Delete => "delete",
                _ => "replace",
            };
            self.emit(
                "info",
                &format!("{}: Plan to {verb}", c.address()),
                "planned_change",
                json!({"change": change}),
            );
        } else {
            let what = match c.action {
                Action::Create => "will be created",
                Action::Update => "will be updated in-place",
                Action::Delete => "will be destroyed",
                _ => "must be replaced",
            };
            self.say(&format!("  # {} {what}", c.address()));
        }
    }

    pub fn summary(&self, op: &str, add: usize, change: usize, remove: usize) {
        let msg = if op == "plan" {
            format!("Plan: {add} to add, {change} to change, {remove} to destroy.")
        } else if op == "destroy" {
            format!("Destroy complete! Resources: {remove} destroyed.")
        } else {
            format!("Apply complete! Resources: {add} added, {change} changed, {remove} destroyed.")
        };
        if self.json {
            self.emit(
                "info",
                &msg,
                "change_summary",
                json!({"changes": {"add": add, "change": change, "import": 0, "remove": remove, "forget": 0, "operation": op}}),
            );
        } else {
            self.say(&format!("\n{msg}"));
        }
    }

    pub fn apply_start(&self, c: &Change, a: Action) {
        let id = c.before.as_ref().and_then(crate::providers::id_of);
        let (msg, mut hook) = match a {
            Action::Delete => (
                format!(
                    "{}: Destroying... [id={}]",
                    c.address(),
                    id.clone().unwrap_or_default()
                ),
                json!({"resource": resource_json(c), "action": "delete"}),
            ),
            Action::Update => (
                format!(
                    "{}: Modifying... [id={}]",
                    c.address(),
                    id.clone().unwrap_or_default()
                ),
                json!({"resource": resource_json(c), "action": "update"}),
            ),
            _ => (
                format!("{}: Creating...", c.address()),
                json!({"resource": resource_json(c), "action": "create"}),
            ),
        };
        if matches!(a, Action::Delete | Action::Update)
            && let Some(i) = id
        {
            hook["id_key"] = json!("id");
            hook["id_value"] = json!(i);
        }
        if self.json {
            self.emit("info", &msg, "apply_start", json!({"hook": hook}));
        } else {
            self.say(&msg);
        }
    }

    pub fn apply_complete(&self, c: &Change, a: Action, new_id: Option<String>, secs: u64) {
        let mut hook = json!({"resource": resource_json(c), "action": action_word(a), "elapsed_seconds": secs});
        let msg = match a {
            Action::Delete => format!("{}: Destruction complete after {secs}s", c.address()),
            Action::Update => format!(
                "{}: Modifications complete after {secs}s [id={}]",
                c.address(),
                new_id.clone().unwrap_or_default()
            ),
            _ => format!(
                "{}: Creation complete after {secs}s [id={}]",
                c.address(),
                new_id.clone().unwrap_or_default()
            ),
        };
        if a != Action::Delete
            && let Some(i) = new_id
        {
            hook["id_key"] = json!("id");
            hook["id_value"] = json!(i);
        }
        if self.json {
            self.emit("info", &msg, "apply_complete", json!({"hook": hook}));
        } else {
            self.say(&msg);
        }
    }

    pub fn apply_errored(&self, c: &Change, a: Action, secs: u64) {
        if self.json {
            self.emit(
                "error",
                &format!("{}: {} errored after {secs}s", c.address(), if a == Action::Delete { "Destruction" } else { "Creation" }),
                "apply_errored",
                json!({"hook": {"resource": resource_json(c), "action": action_word(a), "elapsed_seconds": secs}}),
            );
        }
    }

    /// The plan's `outputs` message: the action per changed output.
    pub fn output_actions(&self, changes: &[(String, bool, &str)]) {
        if !self.json || changes.is_empty() {
            return;
        }
        let m: serde_json::Map<String, Json> = changes
            .iter()
            .map(|(k, sens, action)| (k.clone(), json!({"sensitive": sens, "action": action})))
            .collect();
        self.emit(
            "info",
            &format!("Outputs: {}", changes.len()),
            "outputs",
            json!({"outputs": m}),
        );
    }

    /// The `outputs` message (values omitted for sensitive outputs).
    pub fn outputs(&self, outs: &[(String, crate::value::V, bool)]) {
        let mut m = serde_json::Map::new();
        for (k, v, sens) in outs {
            let plain = v.deep_unmark();
            let mut e = json!({"sensitive": sens});
            if !v.has_unknown() {
                e["type"] = plain.ty().to_json(false);
                if !sens {
                    e["value"] = plain.to_json();
                }
            }
            m.insert(k.clone(), e);
        }
        if self.json {
            self.emit(
                "info",
                &format!("Outputs: {}", outs.len()),
                "outputs",
                json!({"outputs": m}),
            );
        } else if !outs.is_empty() {
            self.say("\nOutputs:\n");
            for (k, v, sens) in outs {
                if *sens {
                    self.say(&format!("{k} = <sensitive>"));
                } else {
                    self.say(&format!("{k} = {}", v.deep_unmark().to_json()));
                }
            }
        }
    }
}
