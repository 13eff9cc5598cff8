//! The CLI contract with the local backend: commands, flags, exit codes, environment
//! variables, variables files, .tf.json templates, modules, drift, sensitive values, state
//! serial/lineage and the TOFU_SIM_* fault knobs.
// Synchronous tests (no tokio runtime): blocking sleeps and waits are fine here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]
mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

fn state(w: &Work) -> Value {
    serde_json::from_str(&w.read("terraform.tfstate")).unwrap()
}

#[test]
fn version_and_unknown_commands_and_flags() {
    let w = Work::new();
    let v = w.ok(&["version", "-json"], 0).json();
    assert_eq!(v["terraform_version"], "1.12.6");
    assert_eq!(v["platform"], "linux_amd64");
    assert!(w.ok(&["version"], 0).stdout.starts_with("OpenTofu v1.12.6"));
    let r = w.ok(&["frobnicate"], 1);
    assert!(
        r.all()
            .contains("OpenTofu has no command named \"frobnicate\"")
    );
    let r = w.ok(&["version", "-bogus"], 1);
    assert!(
        r.all().contains("flag provided but not defined: -bogus"),
        "{}",
        r.all()
    );
    let r = w.ok(&["plan", "-nope=1"], 1);
    assert!(r.all().contains("flag provided but not defined: -nope"));
    w.ok(&[], 127);
}

#[test]
fn init_writes_the_lock_file_and_other_commands_require_it() {
    let w = Work::new();
    w.write(
        "main.tf",
        r#"
terraform {
  required_providers {
    local = {
      source  = "hashicorp/local"
      version = "2.2.3"
    }
  }
}
resource "local_file" "f" {
  filename = "${path.module}/out/hello.txt"
  content  = "hi"
}
"#,
    );
    let r = w.ok(&["plan"], 1);
    assert!(
        r.all().contains("Inconsistent dependency lock file"),
        "{}",
        r.all()
    );
    w.ok(&["init", "-input=false"], 0);
    let lock = w.read(".terraform.lock.hcl");
    assert!(lock.contains("provider \"registry.opentofu.org/hashicorp/local\""));
    assert!(lock.contains("version     = \"2.2.3\""));
    assert!(lock.contains("constraints = \"2.2.3\""));
    hcl::parse(&lock).expect("the lock file is HCL");
    let v = w.ok(&["version", "-json"], 0).json();
    assert_eq!(
        v["provider_selections"]["registry.opentofu.org/hashicorp/local"],
        "2.2.3"
    );
    w.ok(&["validate"], 0);
    w.ok(&["apply", "-auto-approve", "-input=false"], 0);
    assert_eq!(w.read("out/hello.txt"), "hi");
    let st = state(&w);
    assert_eq!(st["serial"], 1);
    assert_eq!(
        st["resources"][0]["instances"][0]["attributes"]["id"],
        "c22b5f9178342609428d6f51b2c5af4c0bde6a42"
    );

    // A constraint the emulated version does not satisfy.
    let w2 = Work::new();
    w2.write(
        "main.tf",
        "terraform {\n  required_providers {\n    local = {\n      source  = \"hashicorp/local\"\n      version = \">= 2.4.0\"\n    }\n  }\n}\n",
    );
    w2.ok(&["init"], 1);
}

#[test]
fn tf_data_dir_is_honoured() {
    let mut w = Work::new();
    w.write(
        "main.tf",
        "resource \"local_file\" \"f\" {\n  filename = \"x.txt\"\n  content = \"x\"\n}\n",
    );
    w.set("TF_DATA_DIR", "custom-data");
    w.ok(&["init"], 0);
    assert!(w.path().join("custom-data").is_dir());
    assert!(!w.path().join(".terraform").exists());
    w.ok(&["plan"], 0);
    w.env.clear();
    w.ok(&["plan"], 1);
}

#[test]
fn variables_precedence_types_and_required() {
    let mut w = Work::new();
    w.write(
        "main.tf",
        r#"
variable "name" {
  type = string
}
variable "size" {
  type    = number
  default = 1
}
variable "tags" {
  type = map(string)
  default = {}
}
variable "cfg" {
  type = object({
    a = string
    b = optional(number, 7)
  })
  default = { a = "x" }
}
output "all" {
  value = { name = var.name, size = var.size, tags = var.tags, cfg = var.cfg }
}
"#,
    );
    w.ok(&["init"], 0);
    let r = w.ok(&["plan", "-input=false"], 1);
    assert!(
        r.all().contains("No value for required variable"),
        "{}",
        r.all()
    );
    w.set("TF_VAR_name", "from-env");
    w.set("TF_VAR_tags", "{ team = \"a\" }");
    w.set("TF_INPUT", "0");
    w.ok(&["apply", "-auto-approve"], 0);
    let out = w.ok(&["output", "-json"], 0).json();
    assert_eq!(out["all"]["value"]["name"], "from-env");
    assert_eq!(out["all"]["value"]["tags"], json!({"team": "a"}));
    assert_eq!(out["all"]["value"]["cfg"], json!({"a": "x", "b": 7}));
    // *.auto.tfvars beats the environment; -var beats both.
    w.write("b.auto.tfvars", "name = \"from-auto\"\nsize = 3\n");
    w.write("a.auto.tfvars.json", "{\"size\": 2}");
    w.ok(&["apply", "-auto-approve"], 0);
    let out = w.ok(&["output", "-json"], 0).json();
    assert_eq!(out["all"]["value"]["name"], "from-auto");
    assert_eq!(
        out["all"]["value"]["size"], 3,
        "auto files load in lexical order"
    );
    w.ok(
        &[
            "apply",
            "-auto-approve",
            "-var",
            "name=from-cli",
            "-var=cfg={a=\"y\", b=1}",
        ],
        0,
    );
    let out = w.ok(&["output", "-json"], 0).json();
    assert_eq!(out["all"]["value"]["name"], "from-cli");
    assert_eq!(out["all"]["value"]["cfg"], json!({"a": "y", "b": 1}));
    // Type errors and undeclared variables.
    let r = w.ok(&["plan", "-var", "size=big"], 1);
    assert!(
        r.all().contains("Invalid value for input variable"),
        "{}",
        r.all()
    );
    let r = w.ok(&["plan", "-var", "nope=1"], 1);
    assert!(r.all().contains("Value for undeclared variable"));
}

#[test]
fn tf_json_strings_are_templates_with_escapes() {
    let w = Work::new();
    w.write(
        "main.tf.json",
        r#"{
  "variable": {"who": {"type": "string", "default": "world"}},
  "locals": {"greeting": "hello ${var.who}"},
  "resource": {
    "local_file": {
      "f": {"filename": "${path.module}/greeting.txt", "content": "${local.greeting}: $${not.a.ref} %%{also literal}"}
    },
    "terraform_data": {"d": {"input": {"n": 1, "s": "${upper(var.who)}"}}}
  },
  "output": {
    "literal": {"value": "$${var.who}"},
    "d": {"value": "${terraform_data.d.output}"}
  }
}"#,
    );
    w.ok(&["init"], 0);
    w.ok(&["apply", "-auto-approve"], 0);
    assert_eq!(
        w.read("greeting.txt"),
        "hello world: ${not.a.ref} %{also literal}"
    );
    let out = w.ok(&["output", "-json"], 0).json();
    assert_eq!(out["literal"]["value"], "${var.who}");
    assert_eq!(out["d"]["value"], json!({"n": 1, "s": "WORLD"}));
    let st = state(&w);
    let d = st["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["type"] == "terraform_data")
        .unwrap();
    assert_eq!(
        d["instances"][0]["attributes"]["input"]["type"],
        json!(["object", {"n": "number", "s": "string"}]),
        "dynamic attributes are stored with their type"
    );
    assert_eq!(
        d["provider"],
        "provider[\"terraform.io/builtin/terraform\"]"
    );
}

#[test]
fn detailed_exitcode_drift_and_refresh_only() {
    let w = Work::new();
    w.write(
        "main.tf",
        "resource \"local_file\" \"f\" {\n  filename = \"data/f.txt\"\n  content  = \"v1\"\n}\nresource \"terraform_data\" \"t\" {\n  triggers_replace = local_file.f.id\n}\n",
    );
    w.ok(&["init"], 0);
    w.ok(&["plan", "-detailed-exitcode"], 2);
    w.ok(&["apply", "-auto-approve"], 0);
    w.ok(&["plan", "-detailed-exitcode"], 0);
    let serial = state(&w)["serial"].as_u64().unwrap();

    // Edited outside tofu: refresh drops it, the plan creates it again and replaces the dependent.
    std::fs::write(w.path().join("data/f.txt"), "edited").unwrap();
    w.ok(&["plan", "-detailed-exitcode", "-out=p"], 2);
    let plan = w.ok(&["show", "-json", "p"], 0).json();
    assert_eq!(plan["resource_drift"][0]["address"], "local_file.f");
    assert_eq!(
        plan["resource_drift"][0]["change"]["actions"],
        json!(["delete"])
    );
    let changes: Vec<(String, Value)> = plan["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["address"].as_str().unwrap().to_owned(),
                c["change"]["actions"].clone(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            ("local_file.f".to_owned(), json!(["create"])),
            ("terraform_data.t".to_owned(), json!(["delete", "create"]))
        ]
    );
    let rc = &plan["resource_changes"][1];
    assert_eq!(rc["action_reason"], "replace_because_cannot_update");
    assert_eq!(rc["change"]["replace_paths"], json!([["triggers_replace"]]));

    // -refresh-only: reports the drift, changes nothing but the state.
    w.ok(&["plan", "-refresh-only", "-detailed-exitcode"], 2);
    w.ok(&["apply", "-refresh-only", "-auto-approve"], 0);
    let st = state(&w);
    assert_eq!(st["serial"].as_u64().unwrap(), serial + 1);
    assert_eq!(
        st["resources"].as_array().unwrap().len(),
        1,
        "only terraform_data.t is left"
    );
    assert_eq!(w.read("data/f.txt"), "edited");

    // Deleted outside tofu, then a normal apply restores it.
    std::fs::remove_file(w.path().join("data/f.txt")).unwrap();
    w.ok(&["apply", "-auto-approve"], 0);
    assert_eq!(w.read("data/f.txt"), "v1");

    // -destroy removes everything.
    w.ok(&["plan", "-destroy", "-out=d"], 0);
    let d = w.ok(&["show", "-json", "d"], 0).json();
    assert!(
        d["resource_changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["change"]["actions"] == json!(["delete"]))
    );
    w.ok(&["apply", "d"], 0);
    assert!(!w.path().join("data/f.txt").exists());
    assert_eq!(state(&w)["resources"], json!([]));
}

#[test]
fn modules_sensitive_values_and_the_json_stream() {
    let w = Work::new();
    w.write(
        "modules/local/db/main.tf",
        r#"
variable "base_dir" { type = string }
variable "password" {
  type      = string
  sensitive = true
}
resource "local_file" "conf" {
  filename             = "${var.base_dir}/db.conf"
  sensitive_content    = "password=${var.password}"
  file_permission      = "0600"
}
output "kind" { value = "database" }
output "conf_path" { value = local_file.conf.filename }
output "module_dir" { value = path.module }
"#,
    );
    w.write(
        "main.tf",
        r#"
variable "db_password" {
  type      = string
  sensitive = true
}
module "db" {
  source   = "./modules/local/db"
  base_dir = "${path.module}/target"
  password = var.db_password
}
output "conf" { value = module.db.conf_path }
output "dir" { value = module.db.module_dir }
output "secret" {
  value     = var.db_password
  sensitive = true
}
"#,
    );
    w.ok(&["init"], 0);
    let mut w = w;
    w.set("TF_VAR_db_password", "hunter2");
    let plan = w.ok(&["plan", "-json", "-out=p"], 0);
    let lines = plan.json_lines();
    assert_eq!(lines[0]["type"], "version");
    assert!(lines.iter().any(|l| l["type"] == "planned_change"
        && l["change"]["resource"]["addr"] == "module.db.local_file.conf"));
    let summary = lines
        .iter()
        .find(|l| l["type"] == "change_summary")
        .unwrap();
    assert_eq!(summary["changes"]["add"], 1);
    assert_eq!(summary["changes"]["operation"], "plan");
    let outs = lines.iter().find(|l| l["type"] == "outputs").unwrap();
    assert_eq!(
        outs["outputs"]["secret"],
        json!({"sensitive": true, "action": "create"})
    );
    assert!(
        lines
            .iter()
            .all(|l| l["@timestamp"].as_str().unwrap().ends_with('Z'))
    );
    let show = w.ok(&["show", "-json", "p"], 0).json();
    let rc = &show["resource_changes"][0];
    assert_eq!(rc["module_address"], "module.db");
    assert_eq!(rc["change"]["after_sensitive"]["sensitive_content"], true);
    assert_eq!(show["output_changes"]["secret"]["after_sensitive"], true);
    assert_eq!(
        show["configuration"]["root_module"]["variables"]["db_password"]["sensitive"],
        true
    );
    assert_eq!(
        show["configuration"]["root_module"]["module_calls"]["db"]["source"],
        "./modules/local/db"
    );
    assert_eq!(
        show["variables"]["db_password"]["value"], "hunter2",
        "show -json prints values in clear"
    );

    let apply = w.ok(&["apply", "-json", "p"], 0);
    let lines = apply.json_lines();
    let outs = lines.iter().find(|l| l["type"] == "outputs").unwrap();
    assert_eq!(
        outs["outputs"]["secret"],
        json!({"sensitive": true, "type": "string"}),
        "no value for sensitive outputs"
    );
    assert_eq!(outs["outputs"]["conf"]["value"], "./target/db.conf");
    assert_eq!(outs["outputs"]["dir"]["value"], "modules/local/db");
    assert!(
        !apply.stdout.contains("hunter2"),
        "the stream never shows the secret"
    );
    assert_eq!(w.read("target/db.conf"), "password=hunter2");
    let st = state(&w);
    assert_eq!(st["resources"][0]["module"], "module.db");
    assert_eq!(st["outputs"]["secret"]["sensitive"], true);
    let out = w.ok(&["output", "-json"], 0).json();
    assert_eq!(
        out["secret"]["value"], "hunter2",
        "output -json prints sensitive values"
    );
    assert_eq!(
        w.ok(&["output", "-raw", "conf"], 0).stdout,
        "./target/db.conf"
    );

    // An output of a sensitive value must be marked sensitive.
    w.write(
        "bad.tf",
        "output \"leak\" {\n  value = var.db_password\n}\n",
    );
    let r = w.ok(&["plan"], 1);
    assert!(
        r.all().contains("Output refers to sensitive values"),
        "{}",
        r.all()
    );
}

#[test]
fn validate_reports_configuration_errors() {
    let w = Work::new();
    w.write("main.tf", "output \"x\" {\n  value = var.missing\n}\n");
    w.ok(&["init"], 0);
    let v = w.ok(&["validate", "-json"], 1).json();
    assert_eq!(v["valid"], false);
    assert_eq!(v["error_count"], 1);
    assert_eq!(
        v["diagnostics"][0]["summary"],
        "Reference to undeclared input variable"
    );
    w.write("main.tf", "resource \"aws_instance\" \"x\" {}\n");
    let r = w.ok(&["validate"], 1);
    assert!(r.all().contains("Invalid resource type"), "{}", r.all());
    w.write("main.tf", "variable \"ok\" {\n  default = 1\n}\n");
    let v = w.ok(&["validate", "-json"], 0).json();
    assert_eq!(v["valid"], true);
}

#[test]
fn local_state_serial_and_lineage() {
    let w = Work::new();
    w.write("main.tf", "variable \"v\" {\n  default = \"a\"\n}\nresource \"terraform_data\" \"d\" {\n  input = var.v\n}\n");
    w.ok(&["init"], 0);
    w.ok(&["apply", "-auto-approve"], 0);
    let s1 = state(&w);
    assert_eq!(s1["serial"], 1);
    assert_eq!(s1["version"], 4);
    let id = s1["resources"][0]["instances"][0]["attributes"]["id"].clone();
    w.ok(&["apply", "-auto-approve"], 0);
    assert_eq!(state(&w)["serial"], 1, "no change, no write");
    w.ok(&["apply", "-auto-approve", "-var", "v=b"], 0);
    let s2 = state(&w);
    assert_eq!(s2["serial"], 2);
    assert_eq!(s2["lineage"], s1["lineage"]);
    assert_eq!(
        s2["resources"][0]["instances"][0]["attributes"]["id"], id,
        "input changes update in place"
    );
    assert_eq!(
        s2["resources"][0]["instances"][0]["attributes"]["output"]["value"],
        "b"
    );
    let pulled = w.ok(&["state", "pull"], 0).json();
    assert_eq!(pulled, s2);
}

#[test]
fn fault_knobs() {
    let mut w = Work::new();
    w.write("main.tf", "resource \"terraform_data\" \"a\" {\n  input = 1\n}\nresource \"terraform_data\" \"b\" {\n  input = terraform_data.a.output\n}\n");
    w.ok(&["init"], 0);

    w.set("TOFU_SIM_FAIL_RESOURCE", "terraform_data.b");
    let r = w.ok(&["apply", "-auto-approve", "-json"], 1);
    assert!(
        r.stdout.contains("simulated permanent failure"),
        "{}",
        r.all()
    );
    assert!(r.json_lines().iter().any(|l| l["type"] == "apply_errored"));
    assert_eq!(
        state(&w)["resources"].as_array().unwrap().len(),
        1,
        "what was applied is saved"
    );
    w.env.clear();

    w.set("TOFU_SIM_FAIL_TRANSIENT", "terraform_data.b:2");
    for _ in 0..2 {
        let r = w.ok(&["apply", "-auto-approve"], 1);
        assert!(
            r.all().contains("simulated transient failure"),
            "{}",
            r.all()
        );
    }
    w.ok(&["apply", "-auto-approve"], 0);
    assert_eq!(state(&w)["resources"].as_array().unwrap().len(), 2);
    w.env.clear();

    w.write("main.tf", "resource \"terraform_data\" \"a\" {\n  input = 2\n}\nresource \"terraform_data\" \"b\" {\n  input = terraform_data.a.output\n}\n");
    w.set("TOFU_SIM_RESOURCE_DELAY", "300ms");
    let t = Instant::now();
    w.ok(&["apply", "-auto-approve"], 0);
    assert!(
        t.elapsed() >= Duration::from_millis(600),
        "a delay per resource"
    );
    w.env.clear();

    w.set("TOFU_SIM_CRASH_AFTER_LOCK", "1");
    let r = w.ok(&["apply", "-auto-approve"], 86);
    assert!(r.stderr.contains("simulated crash"));
    assert!(
        w.path().join(".terraform.tfstate.lock.info").exists(),
        "the lock is left behind"
    );
    w.env.clear();
    let r = w.ok(&["plan"], 1);
    assert!(r.all().contains("Error acquiring the state lock"));
    let id = serde_json::from_str::<Value>(&w.read(".terraform.tfstate.lock.info")).unwrap()["ID"]
        .as_str()
        .unwrap()
        .to_owned();
    w.ok(&["force-unlock", "-force", &id], 0);
    w.ok(&["plan"], 0);
}

fn signal(pid: u32, sig: &str) {
    let st = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn sigint_stops_gracefully_unless_ignored() {
    let mut w = Work::new();
    let mut cfg = String::new();
    for i in 0..6 {
        cfg.push_str(&format!(
            "resource \"terraform_data\" \"r{i}\" {{\n  input = {i}\n}}\n"
        ));
    }
    w.write("main.tf", &cfg);
    w.ok(&["init"], 0);
    w.set("TOFU_SIM_RESOURCE_DELAY", "400ms");

    let child = w
        .command(&["apply", "-auto-approve"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    signal(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // OpenTofu says at once that it heard the interrupt (stdout), before it stops.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "Interrupt received.\nPlease wait for OpenTofu to exit or data loss may occur.\nGracefully shutting down..."
        ),
        "{stdout}"
    );
    let n = state(&w)["resources"].as_array().unwrap().len();
    assert!(
        (1..6).contains(&n),
        "stopped part way and saved what was applied ({n})"
    );
    assert!(
        !w.path().join(".terraform.tfstate.lock.info").exists(),
        "unlocked"
    );

    w.set("TOFU_SIM_IGNORE_SIGINT", "1");
    let child = w
        .command(&["apply", "-auto-approve"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    signal(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "SIGINT is ignored");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Interrupt received"));
    assert_eq!(state(&w)["resources"].as_array().unwrap().len(), 6);
}

#[test]
fn destroy_order_and_create_before_destroy() {
    let w = Work::new();
    w.write(
        "main.tf",
        r#"
resource "terraform_data" "a" {
  input = "a"
}
resource "terraform_data" "b" {
  input = terraform_data.a.output
}
resource "terraform_data" "c" {
  triggers_replace = terraform_data.b.output
  lifecycle {
    create_before_destroy = true
  }
}
"#,
    );
    w.ok(&["init"], 0);
    w.ok(&["apply", "-auto-approve"], 0);
    let deps = &state(&w)["resources"][2]["instances"][0]["dependencies"];
    assert_eq!(deps, &json!(["terraform_data.b"]));

    // create_before_destroy: ["create","delete"], the new object first.
    w.write(
        "main.tf",
        &w.read("main.tf").replace("input = \"a\"", "input = \"a2\""),
    );
    w.ok(&["plan", "-out=p"], 0);
    let plan = w.ok(&["show", "-json", "p"], 0).json();
    let c = plan["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["address"] == "terraform_data.c")
        .unwrap()
        .clone();
    assert_eq!(c["change"]["actions"], json!(["create", "delete"]));
    assert_eq!(
        c["change"]["after_unknown"]["triggers_replace"], true,
        "known only after b is updated"
    );
    let apply = w.ok(&["apply", "-json", "p"], 0);
    let starts: Vec<(String, String)> = apply
        .json_lines()
        .iter()
        .filter(|l| l["type"] == "apply_start")
        .map(|l| {
            (
                l["hook"]["resource"]["addr"].as_str().unwrap().to_owned(),
                l["hook"]["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let pairs: Vec<(&str, &str)> = starts
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("terraform_data.a", "update"),
            ("terraform_data.b", "update"),
            ("terraform_data.c", "create"),
            ("terraform_data.c", "delete"),
        ]
    );

    // Destroy: dependents before their dependencies.
    let destroy = w.ok(&["destroy", "-auto-approve", "-json"], 0);
    let order: Vec<String> = destroy
        .json_lines()
        .iter()
        .filter(|l| l["type"] == "apply_start")
        .map(|l| l["hook"]["resource"]["addr"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        order,
        ["terraform_data.c", "terraform_data.b", "terraform_data.a"]
    );
    let summary = destroy
        .json_lines()
        .into_iter()
        .find(|l| l["type"] == "change_summary" && l["changes"]["operation"] == "destroy")
        .unwrap();
    assert_eq!(summary["changes"]["remove"], 3);
}

#[test]
fn backend_false_validates_but_does_not_plan_and_lock_files_are_kept() {
    let w = Work::new();
    w.write(
        "main.tf",
        "terraform {\n  backend \"http\" {}\n}\nresource \"local_file\" \"f\" {\n  filename = \"f\"\n  content  = \"x\"\n}\n",
    );
    let existing = "# This file is maintained automatically by \"tofu init\".\n# Manual edits may be lost in future updates.\n\nprovider \"registry.opentofu.org/hashicorp/local\" {\n  version     = \"2.2.3\"\n  hashes = [\n    \"h1:real-hash-from-opentofu=\",\n  ]\n}\n";
    w.write(".terraform.lock.hcl", existing);
    w.ok(&["init", "-backend=false"], 0);
    assert_eq!(
        w.read(".terraform.lock.hcl"),
        existing,
        "a lock file selecting 2.2.3 is kept"
    );
    w.ok(&["validate"], 0);
    let r = w.ok(&["plan"], 1);
    assert!(
        r.all().contains("Backend initialization required"),
        "{}",
        r.all()
    );
}
