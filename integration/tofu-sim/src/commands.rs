//! The commands: version, init, validate, plan, show, apply, output, state pull,
//! force-unlock. Each returns the process exit code.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::args::{self, Kind};
use crate::backend::{Backend, BackendError, HttpBackend, Lock, lock_info};
use crate::config::{self, ConfigError, Module, provider_of};
use crate::core::{Change, Hooks, Mode, Walker};
use crate::faults;
use crate::planjson::{self, PlanDoc};
use crate::providers::{self, Action};
use crate::state::{State, TOFU_VERSION};
use crate::ui::Ui;
use crate::value::V;
use crate::vars;

const LOCAL_VERSION: &str = "2.2.3";
const PLAN_MAGIC: &str = "tofu-sim-plan";

fn data_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("TF_DATA_DIR")
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| ".terraform".into()),
    )
}

fn input_enabled(p: &args::Parsed) -> bool {
    let env_off =
        std::env::var("TF_INPUT").is_ok_and(|v| v == "0" || v.eq_ignore_ascii_case("false"));
    p.flag("input", !env_off)
}

fn automation() -> bool {
    std::env::var("TF_IN_AUTOMATION").is_ok_and(|v| !v.is_empty())
}

struct Fail(String, String);

impl From<ConfigError> for Fail {
    fn from(e: ConfigError) -> Fail {
        Fail(e.summary, e.detail)
    }
}

fn usage_error(ui: &Ui, cmd: &str, msg: &str) -> i32 {
    ui.error("Failed to parse command-line flags", msg);
    eprintln!("For more help on using this command, run:\n  tofu {cmd} -help");
    1
}

/// Entry point: returns the exit code.
pub fn run(mut argv: Vec<String>) -> i32 {
    // Global -chdir.
    while let Some(first) = argv.first() {
        if let Some(dir) = first.strip_prefix("-chdir=") {
            if let Err(e) = std::env::set_current_dir(dir) {
                eprintln!("Error handling -chdir option: {e}");
                return 1;
            }
            argv.remove(0);
        } else if first == "-version" || first == "--version" || first == "-v" {
            argv[0] = "version".into();
        } else {
            break;
        }
    }
    if faults::ignore_sigint() {
        let _ = signal_hook::flag::register(
            signal_hook::consts::SIGINT,
            Arc::new(AtomicBool::new(false)),
        );
    }
    let Some(cmd) = argv.first().cloned() else {
        print_usage();
        return 127;
    };
    let rest = argv[1..].to_vec();
    match cmd.as_str() {
        "version" => version(&rest),
        "init" => init(&rest),
        "validate" => validate(&rest),
        "plan" => plan(&rest),
        "apply" => apply(&rest, false),
        "destroy" => apply(&rest, true),
        "show" => show(&rest),
        "output" => output(&rest),
        "state" => match rest.first().map(String::as_str) {
            Some("pull") => state_pull(&rest[1..]),
            _ => {
                eprintln!(
                    "Usage: tofu [global options] state <subcommand> [options] [args]\n\n  (tofu-sim emulates only `state pull`)"
                );
                1
            }
        },
        "force-unlock" => force_unlock(&rest),
        "-help" | "--help" | "-h" | "help" => {
            print_usage();
            0
        }
        other => {
            eprintln!(
                "OpenTofu has no command named \"{other}\".\n\nTo see all of OpenTofu's top-level commands, run:\n  tofu -help\n"
            );
            1
        }
    }
}

fn print_usage() {
    eprintln!(
        "Usage: tofu [global options] <subcommand> [args]\n\nMain commands:\n  init          Prepare your working directory for other commands\n  validate      Check whether the configuration is valid\n  plan          Show changes required by the current configuration\n  apply         Create or update infrastructure\n  destroy       Destroy previously-created infrastructure\n\nOther commands:\n  force-unlock  Release a stuck lock on the current workspace\n  output        Show output values from your root module\n  show          Show the current state or a saved plan\n  state         Advanced state management\n  version       Show the current OpenTofu version\n\nGlobal options:\n  -chdir=DIR    Switch to a different working directory before executing the\n                given subcommand.\n  -help         Show this help output, or the help for a specified subcommand.\n  -version      An alias for the \"version\" subcommand."
    );
}

fn version(rest: &[String]) -> i32 {
    let ui = Ui { json: false };
    let p = match args::parse(rest, &[("json", Kind::Bool)]) {
        Ok(p) => p,
        Err(e) => return usage_error(&ui, "version", &e),
    };
    let mut selections = serde_json::Map::new();
    if let Ok(lock) = std::fs::read_to_string(".terraform.lock.hcl")
        && lock.contains("hashicorp/local")
    {
        selections.insert(
            "registry.opentofu.org/hashicorp/local".into(),
            json!(LOCAL_VERSION),
        );
    }
    if p.flag("json", false) {
        let j = json!({
            "terraform_version": TOFU_VERSION,
            "platform": "linux_amd64",
            "provider_selections": selections,
            "terraform_outdated": false
        });
        println!("{}", serde_json::to_string_pretty(&j).unwrap_or_default());
    } else {
        println!("OpenTofu v{TOFU_VERSION}\non linux_amd64");
        for (k, v) in &selections {
            println!("+ provider {k} v{}", v.as_str().unwrap_or_default());
        }
    }
    0
}

fn load_root() -> Result<Module, Fail> {
    let cwd = Path::new(".");
    if !config::has_config(cwd) {
        return Err(Fail(
            "No configuration files".into(),
            "Plan requires configuration to be present. Planning without a configuration would mark everything for destruction, which is normally not what is desired. If you would like to destroy everything, run plan with the -destroy option. Otherwise, create a OpenTofu configuration file (.tf file) and try again.".into(),
        ));
    }
    Ok(config::load(cwd, ".", 0)?)
}

fn uses_local(m: &Module) -> bool {
    m.resources.values().any(|r| r.rtype == "local_file")
        || m.required_providers.contains_key("local")
        || m.provider_blocks.iter().any(|p| p == "local")
        || m.calls.values().any(|c| uses_local(&c.module))
}

fn local_constraints(m: &Module, out: &mut Vec<String>) {
    if let Some(rp) = m.required_providers.get("local")
        && let Some(v) = &rp.version
    {
        out.push(v.clone());
    }
    for c in m.calls.values() {
        local_constraints(&c.module, out);
    }
}

/// Whether version 2.2.3 satisfies a constraint string ("2.2.3", ">= 2.0", "~> 2.2", ...).
fn admits(constraint: &str) -> bool {
    let ver = [2u64, 2, 3];
    constraint.split(',').all(|c| {
        let c = c.trim();
        let (op, v) = ["~>", ">=", "<=", "!=", ">", "<", "="]
            .iter()
            .find_map(|op| c.strip_prefix(op).map(|v| (*op, v.trim())))
            .unwrap_or(("=", c));
        let parts: Vec<u64> = v.split('.').filter_map(|x| x.parse().ok()).collect();
        let mut full = parts.clone();
        full.resize(3, 0);
        let cmp = ver.as_slice().cmp(full.as_slice());
        match op {
            "=" => cmp.is_eq(),
            "!=" => !cmp.is_eq(),
            ">" => cmp.is_gt(),
            ">=" => cmp.is_ge(),
            "<" => cmp.is_lt(),
            "<=" => cmp.is_le(),
            _ => {
                // ~>: same prefix except the last given part, and >=.
                let n = parts.len().max(1);
                cmp.is_ge() && ver[..n - 1] == full[..n - 1]
            }
        }
    })
}

fn lock_file_text(m: &Module) -> String {
    let mut s = String::from(
        "# This file is maintained automatically by \"tofu init\".\n# Manual edits may be lost in future updates.\n",
    );
    if uses_local(m) {
        let mut cons = Vec::new();
        local_constraints(m, &mut cons);
        let hash = {
            use sha1::Digest;
            let d = sha1::Sha1::digest(
                b"tofu-sim registry.opentofu.org/hashicorp/local 2.2.3 linux_amd64",
            );
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(d)
        };
        s.push_str("\nprovider \"registry.opentofu.org/hashicorp/local\" {\n");
        s.push_str(&format!("  version     = \"{LOCAL_VERSION}\"\n"));
        if !cons.is_empty() {
            s.push_str(&format!("  constraints = \"{}\"\n", cons.join(", ")));
        }
        s.push_str(&format!("  hashes = [\n    \"h1:{hash}\",\n  ]\n}}\n"));
    }
    s
}

fn backend_state_file() -> PathBuf {
    data_dir().join("terraform.tfstate")
}

fn init(rest: &[String]) -> i32 {
    let ui = Ui { json: false };
    let spec = [
        ("input", Kind::Bool),
        ("reconfigure", Kind::Bool),
        ("migrate-state", Kind::Bool),
        ("backend", Kind::Bool),
        ("upgrade", Kind::Bool),
        ("no-color", Kind::Bool),
        ("get", Kind::Bool),
        ("lock", Kind::Bool),
        ("lock-timeout", Kind::Value),
        ("backend-config", Kind::Multi),
        ("lockfile", Kind::Value),
        ("plugin-dir", Kind::Multi),
        ("json", Kind::Bool),
    ];
    let p = match args::parse(rest, &spec) {
        Ok(p) => p,
        Err(e) => return usage_error(&ui, "init", &e),
    };
    let root = match load_root() {
        Ok(m) => m,
        Err(Fail(s, d)) => {
            ui.error(&s, &d);
            return 1;
        }
    };
    let dd = data_dir();
    if let Err(e) = std::fs::create_dir_all(&dd) {
        ui.error("Failed to create data directory", &e.to_string());
        return 1;
    }
    if p.flag("backend", true)
        && let Some(b) = &root.backend
    {
        ui.say("\nInitializing the backend...");
        let j = json!({
            "version": 3,
            "terraform_version": TOFU_VERSION,
            "backend": {"type": b, "config": {}, "hash": 0}
        });
        if let Err(e) = std::fs::write(
            backend_state_file(),
            serde_json::to_vec_pretty(&j).unwrap_or_default(),
        ) {
            ui.error("Failed to save backend configuration", &e.to_string());
            return 1;
        }
        ui.say(&format!("\nSuccessfully configured the backend \"{b}\"! OpenTofu will automatically\nuse this backend unless the backend configuration changes."));
    }
    if !root.calls.is_empty() {
        ui.say("Initializing modules...");
        let mut mods = vec![json!({"Key": "", "Source": "", "Dir": "."})];
        fn rec(m: &Module, prefix: &str, out: &mut Vec<Json>) {
            for (k, c) in &m.calls {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.push(json!({"Key": key, "Source": c.source, "Dir": c.module.path_module}));
                rec(&c.module, &key, out);
            }
        }
        rec(&root, "", &mut mods);
        let _ = std::fs::create_dir_all(dd.join("modules"));
        let _ = std::fs::write(
            dd.join("modules/modules.json"),
            serde_json::to_vec(&json!({"Modules": mods})).unwrap_or_default(),
        );
    }
    ui.say("\nInitializing provider plugins...");
    if uses_local(&root) {
        let mut cons = Vec::new();
        local_constraints(&root, &mut cons);
        if let Some(bad) = cons.iter().find(|c| !admits(c)) {
            ui.error(
                "Failed to query available provider packages",
                &format!("Could not retrieve the list of available versions for provider hashicorp/local: no available releases match the given constraints {bad} (tofu-sim emulates only {LOCAL_VERSION})"),
            );
            return 1;
        }
        ui.say(&format!("- Installing hashicorp/local v{LOCAL_VERSION}...\n- Installed hashicorp/local v{LOCAL_VERSION} (signed, key ID 0C0AF313E5FD9F80)"));
        let _ = std::fs::create_dir_all(dd.join(format!(
            "providers/registry.opentofu.org/hashicorp/local/{LOCAL_VERSION}/linux_amd64"
        )));
    }
    let lock_text = lock_file_text(&root);
    let lock_path = Path::new(".terraform.lock.hcl");
    let existing = std::fs::read_to_string(lock_path).unwrap_or_default();
    // A lock file that already selects the emulated version (e.g. with real hashes) is kept.
    let keeps = uses_local(&root)
        && existing.contains("provider \"registry.opentofu.org/hashicorp/local\"")
        && existing.contains(&format!("version     = \"{LOCAL_VERSION}\""));
    if existing != lock_text && !keeps {
        if let Err(e) = std::fs::write(lock_path, &lock_text) {
            ui.error("Failed to write dependency lock file", &e.to_string());
            return 1;
        }
        ui.say("\nOpenTofu has created a lock file .terraform.lock.hcl to record the provider\nselections it made above.");
    }
    ui.say("\nOpenTofu has been successfully initialized!");
    if !automation() {
        ui.say("\nYou may now begin working with OpenTofu. Try running \"tofu plan\" to see\nany changes that are required for your infrastructure.");
    }
    0
}

fn require_init(root: &Module) -> Result<(), Fail> {
    require_providers(root)?;
    require_backend(root)
}

/// Providers and modules installed (what `validate` needs).
fn require_providers(root: &Module) -> Result<(), Fail> {
    if uses_local(root) {
        let lock = std::fs::read_to_string(".terraform.lock.hcl").unwrap_or_default();
        if !lock.contains("registry.opentofu.org/hashicorp/local")
            || !data_dir()
                .join("providers/registry.opentofu.org/hashicorp/local")
                .is_dir()
        {
            return Err(Fail(
                "Inconsistent dependency lock file".into(),
                "The following dependency selections recorded in the lock file are inconsistent with the current configuration:\n  - provider registry.opentofu.org/hashicorp/local: required by this configuration but no version is selected\n\nTo make the initial dependency selections that will initialize the dependency lock file, run:\n  tofu init".into(),
            ));
        }
    }
    if !root.calls.is_empty() && !data_dir().join("modules/modules.json").is_file() {
        return Err(Fail(
            "Module not installed".into(),
            "This module is not yet installed. Run \"tofu init\" to install all modules required by this configuration.".into(),
        ));
    }
    Ok(())
}

/// The backend initialised.
fn require_backend(root: &Module) -> Result<(), Fail> {
    if let Some(b) = &root.backend
        && !backend_state_file().is_file()
    {
        return Err(Fail(
            "Backend initialization required, please run \"tofu init\"".into(),
            format!(
                "Reason: Initial configuration of the requested backend \"{b}\"\n\nThe \"backend\" is the interface that OpenTofu uses to store state,\nperform operations, etc. If this message is showing up, it means that the\nOpenTofu configuration you're using is using a custom configuration for\nthe OpenTofu backend.\n\nChanges to backend configurations require reinitialization. This allows\nOpenTofu to set up the new configuration, copy existing state, etc. Please run\n\"tofu init\" with either the \"-reconfigure\" or \"-migrate-state\" flags to\nuse the current configuration."
            ),
        ));
    }
    Ok(())
}

fn open_backend(root: &Module) -> Result<Backend, Fail> {
    match root.backend.as_deref() {
        Some("http") => HttpBackend::from_env()
            .map(|h| Backend::Http(Box::new(h)))
            .map_err(|e| {
                Fail(
                    "Failed to configure the backend \"http\"".into(),
                    e.to_string(),
                )
            }),
        _ => Ok(Backend::Local(PathBuf::from("terraform.tfstate"))),
    }
}

fn lock_error(e: &BackendError) -> Fail {
    match e {
        BackendError::Locked { info, .. } => {
            let f = |k: &str| info[k].as_str().unwrap_or_default().to_owned();
            Fail(
                "Error acquiring the state lock".into(),
                format!(
                    "Error message: {e}\nLock Info:\n  ID:        {}\n  Path:      {}\n  Operation: {}\n  Who:       {}\n  Version:   {}\n  Created:   {}\n  Info:      {}\n\n\nOpenTofu acquires a state lock to protect the state from being written\nby multiple users at the same time. Please resolve the issue above and try\nagain. For most commands, you can disable locking with the \"-lock=false\"\nflag, but this is not recommended.",
                    f("ID"),
                    f("Path"),
                    f("Operation"),
                    f("Who"),
                    f("Version"),
                    f("Created"),
                    f("Info")
                ),
            )
        }
        other => Fail(
            "Error acquiring the state lock".into(),
            format!(
                "Error message: {other}\n\nOpenTofu acquires a state lock to protect the state from being written\nby multiple users at the same time. Please resolve the issue above and try\nagain. For most commands, you can disable locking with the \"-lock=false\"\nflag, but this is not recommended."
            ),
        ),
    }
}

/// Takes the lock when enabled; applies the crash-after-lock knob.
fn take_lock(
    b: &Backend,
    enabled: bool,
    timeout: Duration,
    op: &str,
) -> Result<Option<Lock>, Fail> {
    if !enabled {
        return Ok(None);
    }
    if let Backend::Http(h) = b
        && !h.locking()
    {
        return Ok(None);
    }
    let l = lock_info(op);
    b.lock_with_timeout(&l, timeout)
        .map_err(|e| lock_error(&e))?;
    if faults::crash_after_lock() {
        faults::crash("after taking the lock");
    }
    Ok(Some(l))
}

fn release(ui: &Ui, b: &Backend, l: Option<&Lock>) -> bool {
    if let Some(l) = l
        && let Err(e) = b.unlock(l)
    {
        ui.error(
            "Error releasing the state lock",
            &format!("Error message: {e}\n\nOpenTofu acquires a lock when accessing your state to prevent others\nrunning OpenTofu to potentially modify the state at the same time. An\nerror occurred while releasing this lock. This could mean that the lock\ndid or did not release properly. If the lock didn't release properly,\nOpenTofu may not be able to run future commands since it'll appear as if\nthe lock is held.\n\nIn this scenario, please call the \"force-unlock\" command to unlock the\nstate manually. This is a very dangerous operation since if it is done\nerroneously it could result in two people modifying state at the same time.\nOnly call this command if you're certain that the unlock above failed and\nthat no one else is holding a lock.\n\nLock ID: {}", l.id),
        );
        return false;
    }
    true
}

fn parse_timeout(p: &args::Parsed) -> Result<Duration, Fail> {
    match p.value("lock-timeout") {
        None => Ok(Duration::ZERO),
        Some(v) => faults::duration(v).ok_or_else(|| {
            Fail(
                "Invalid lock timeout".into(),
                format!("-lock-timeout={v}: time: invalid duration"),
            )
        }),
    }
}

/// A saved plan.
#[derive(Serialize, Deserialize)]
struct PlanFile {
    format: String,
    tofu_version: String,
    /// Lineage and serial of the state the plan was made from ("" / 0 when there was none).
    prior_lineage: String,
    prior_serial: u64,
    mode: String,
    errored: bool,
    variables: BTreeMap<String, Json>,
    changes: Vec<SavedChange>,
    plan_json: Json,
}

#[derive(Serialize, Deserialize)]
struct SavedChange {
    module: String,
    rtype: String,
    name: String,
    actions: Vec<String>,
    reason: Option<String>,
}

fn read_planfile(path: &str) -> Result<PlanFile, Fail> {
    let bytes = std::fs::read(path).map_err(|e| {
        Fail(
            "Failed to load plan file".into(),
            format!("Failed to read plan from plan file: {e}"),
        )
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let body = text
        .strip_prefix(PLAN_MAGIC)
        .map(str::trim_start)
        .ok_or_else(|| {
            Fail(
                "Failed to load plan file".into(),
                format!("The file {path} is not a valid plan file."),
            )
        })?;
    let pf: PlanFile = serde_json::from_str(body)
        .map_err(|e| Fail("Failed to load plan file".into(), format!("{path}: {e}")))?;
    if pf.tofu_version != TOFU_VERSION {
        return Err(Fail(
            "Failed to load plan file".into(),
            format!(
                "The plan file was created by OpenTofu {}, but this is {TOFU_VERSION}; plan and apply must use the same version.",
                pf.tofu_version
            ),
        ));
    }
    Ok(pf)
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Normal => "normal",
        Mode::Destroy => "destroy",
        Mode::RefreshOnly => "refresh-only",
    }
}

/// The result of planning.
struct Planned {
    root: Module,
    raw_vars: BTreeMap<String, Json>,
    mode: Mode,
    prior_meta: (String, u64),
    refreshed: State,
    drift: Vec<crate::state::Instance>,
    changes: BTreeMap<String, Change>,
    outputs: BTreeMap<String, V>,
    error: Option<Fail>,
}

impl Planned {
    fn has_changes(&self) -> bool {
        let res = self.changes.values().any(|c| c.action != Action::NoOp);
        let outs = self
            .outputs
            .iter()
            .any(|(k, v)| match self.refreshed.outputs.get(k) {
                None => true,
                Some(b) => {
                    v.has_unknown() || b.value.deep_unmark().to_json() != v.deep_unmark().to_json()
                }
            })
            || self
                .refreshed
                .outputs
                .keys()
                .any(|k| !self.outputs.contains_key(k));
        res || outs || (self.mode == Mode::RefreshOnly && !self.drift.is_empty())
    }

    fn doc(&self) -> Json {
        planjson::plan_json(&PlanDoc {
            root: &self.root,
            raw_vars: &self.raw_vars,
            prior: &self.refreshed,
            drift: &self.drift,
            changes: &self.changes,
            outputs: &self.outputs,
            errored: self.error.is_some(),
            destroy: self.mode == Mode::Destroy,
        })
    }
}

/// Refreshes and plans against `prior` (None: no state yet).
fn make_plan(
    ui: &Ui,
    root: Module,
    raw: BTreeMap<String, Json>,
    values: BTreeMap<String, V>,
    mode: Mode,
    prior: Option<State>,
    refresh: bool,
) -> Planned {
    let prior_meta = prior
        .as_ref()
        .map(|s| (s.lineage.clone(), s.serial))
        .unwrap_or_default();
    let mut refreshed = prior.unwrap_or_else(State::new_lineage);
    let mut drift = Vec::new();
    if refresh {
        let addrs: Vec<String> = refreshed.resources.keys().cloned().collect();
        for a in addrs {
            let inst = refreshed.resources[&a].clone();
            let c = Change {
                module: inst.module.clone(),
                rtype: inst.rtype.clone(),
                name: inst.name.clone(),
                action: Action::NoOp,
                before: Some(inst.value.clone()),
                after: None,
                replace_paths: Vec::new(),
                reason: None,
                created: false,
            };
            ui.refresh(&c, &providers::id_of(&inst.value).unwrap_or_default());
            if providers::refresh(&inst.rtype, &inst.value).is_none() {
                refreshed.resources.remove(&a);
                ui.drift(&c);
                drift.push(inst);
            }
        }
    }
    let (changes, outputs, error) = {
        let w = Walker::new(&root, values, mode, refreshed.clone());
        match w.plan() {
            Ok(outs) => (w.changes.into_inner(), outs, None),
            Err(e) => (
                BTreeMap::new(),
                BTreeMap::new(),
                Some(Fail("Invalid configuration".into(), e)),
            ),
        }
    };
    Planned {
        root,
        raw_vars: raw,
        mode,
        prior_meta,
        refreshed,
        drift,
        changes,
        outputs,
        error,
    }
}

fn emit_plan(ui: &Ui, p: &Planned) {
    let mut add = 0;
    let mut change = 0;
    let mut remove = 0;
    for c in p.changes.values() {
        match c.action {
            Action::NoOp => continue,
            Action::Create => add += 1,
            Action::Update => change += 1,
            Action::Delete => remove += 1,
            Action::Replace | Action::ReplaceCbd => {
                add += 1;
                remove += 1;
            }
        }
        ui.planned(c);
    }
    if p.error.is_none() {
        let mut outs: Vec<(String, bool, &str)> = Vec::new();
        for (k, v) in &p.outputs {
            let sens = p.root.outputs.get(k).is_some_and(|o| o.sensitive);
            let action = match p.refreshed.outputs.get(k) {
                None => "create",
                Some(b)
                    if !v.has_unknown()
                        && b.value.deep_unmark().to_json() == v.deep_unmark().to_json() =>
                {
                    continue;
                }
                Some(_) => "update",
            };
            outs.push((k.clone(), sens, action));
        }
        for (k, b) in &p.refreshed.outputs {
            if !p.outputs.contains_key(k) {
                outs.push((k.clone(), b.sensitive, "delete"));
            }
        }
        if !p.has_changes() && !ui.json {
            ui.say("\nNo changes. Your infrastructure matches the configuration.");
        } else {
            ui.summary("plan", add, change, remove);
        }
        ui.output_actions(&outs);
    }
}

fn plan_spec() -> Vec<(&'static str, Kind)> {
    vec![
        ("input", Kind::Bool),
        ("out", Kind::Value),
        ("detailed-exitcode", Kind::Bool),
        ("lock", Kind::Bool),
        ("lock-timeout", Kind::Value),
        ("refresh-only", Kind::Bool),
        ("refresh", Kind::Bool),
        ("destroy", Kind::Bool),
        ("json", Kind::Bool),
        ("var", Kind::Multi),
        ("var-file", Kind::Multi),
        ("no-color", Kind::Bool),
        ("compact-warnings", Kind::Bool),
        ("parallelism", Kind::Value),
        ("concise", Kind::Bool),
    ]
}

fn plan_mode(p: &args::Parsed, destroy_cmd: bool) -> Result<Mode, Fail> {
    let destroy = destroy_cmd || p.flag("destroy", false);
    let refresh_only = p.flag("refresh-only", false);
    match (destroy, refresh_only) {
        (true, true) => Err(Fail(
            "Incompatible plan mode options".into(),
            "The -destroy and -refresh-only options are mutually-exclusive.".into(),
        )),
        (true, false) => Ok(Mode::Destroy),
        (false, true) => Ok(Mode::RefreshOnly),
        _ => Ok(Mode::Normal),
    }
}

fn prepare(ui: &Ui, p: &args::Parsed) -> Result<(Module, vars::Values), Fail> {
    let root = load_root()?;
    require_init(&root)?;
    let mut warns = Vec::new();
    let v = vars::collect(&root, &p.multi, &mut warns)?;
    for (s, d) in warns {
        ui.warn(&s, &d);
    }
    Ok((root, v))
}

fn plan(rest: &[String]) -> i32 {
    let pre = Ui {
        json: rest.iter().any(|a| a == "-json" || a == "--json"),
    };
    let p = match args::parse(rest, &plan_spec()) {
        Ok(p) => p,
        Err(e) => return usage_error(&pre, "plan", &e),
    };
    let ui = Ui {
        json: p.flag("json", false),
    };
    ui.version();
    let _ = input_enabled(&p);
    let result = (|| -> Result<i32, Fail> {
        let mode = plan_mode(&p, false)?;
        let timeout = parse_timeout(&p)?;
        let (root, v) = prepare(&ui, &p)?;
        let backend = open_backend(&root)?;
        let lock = take_lock(&backend, p.flag("lock", true), timeout, "OperationTypePlan")?;
        let read = backend.read();
        let prior = match read {
            Ok(s) => s,
            Err(e) => {
                release(&ui, &backend, lock.as_ref());
                return Err(Fail("Failed to load state".into(), e.to_string()));
            }
        };
        let planned = make_plan(
            &ui,
            root,
            v.raw,
            v.values,
            mode,
            prior,
            p.flag("refresh", true),
        );
        emit_plan(&ui, &planned);
        if let Some(out) = p.value("out") {
            let saved = PlanFile {
                format: PLAN_MAGIC.into(),
                tofu_version: TOFU_VERSION.into(),
                prior_lineage: planned.prior_meta.0.clone(),
                prior_serial: planned.prior_meta.1,
                mode: mode_name(mode).into(),
                errored: planned.error.is_some(),
                variables: planned.raw_vars.clone(),
                changes: planned
                    .changes
                    .values()
                    .map(|c| SavedChange {
                        module: c.module.clone(),
                        rtype: c.rtype.clone(),
                        name: c.name.clone(),
                        actions: c.action.json().iter().map(|s| (*s).to_owned()).collect(),
                        reason: c.reason.map(str::to_owned),
                    })
                    .collect(),
                plan_json: planned.doc(),
            };
            let mut body = format!("{PLAN_MAGIC}\n");
            body.push_str(&serde_json::to_string(&saved).unwrap_or_default());
            if let Err(e) = std::fs::write(out, body) {
                release(&ui, &backend, lock.as_ref());
                return Err(Fail("Failed to write plan file".into(), e.to_string()));
            }
            if planned.error.is_none() {
                ui.say(&format!("\nSaved the plan to: {out}\n\nTo perform exactly these actions, run the following command to apply:\n    tofu apply \"{out}\""));
            }
        }
        let unlocked = release(&ui, &backend, lock.as_ref());
        if let Some(e) = planned.error {
            return Err(e);
        }
        if !unlocked {
            return Ok(1);
        }
        Ok(
            if p.flag("detailed-exitcode", false) && planned.has_changes() {
                2
            } else {
                0
            },
        )
    })();
    match result {
        Ok(code) => code,
        Err(Fail(s, d)) => {
            ui.error(&s, &d);
            1
        }
    }
}

/// UI hooks, fault knobs and intermediate snapshots during apply.
struct ApplyHooks<'a> {
    ui: &'a Ui,
    backend: &'a Backend,
    lock: Option<&'a Lock>,
    interval: Duration,
    last_persist: Cell<Instant>,
    written: RefCell<State>,
    started: Cell<Instant>,
    counts: Cell<(usize, usize, usize)>,
    stop: Arc<AtomicBool>,
}

impl ApplyHooks<'_> {
    /// Writes the state when its content changed (serial + 1).
    fn persist(&self, st: &State) -> Result<bool, String> {
        let mut w = self.written.borrow_mut();
        if w.same_content(st) {
            return Ok(false);
        }
        let mut next = st.clone();
        next.serial = w.serial + 1;
        next.lineage = w.lineage.clone();
        self.backend
            .write(&next, self.lock)
            .map_err(|e| format!("Failed to persist state to backend: {e}"))?;
        *w = next;
        self.last_persist.set(Instant::now());
        Ok(true)
    }
}

impl Hooks for ApplyHooks<'_> {
    fn before(&self, c: &Change, a: Action) -> Result<(), String> {
        if self.stop.load(Ordering::SeqCst) {
            return Err("Execution halted: the operation was interrupted.".into());
        }
        self.started.set(Instant::now());
        self.ui.apply_start(c, a);
        if let Some(d) = faults::resource_delay() {
            let until = Instant::now() + d;
            while Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
            }
        }
        let addr = c.address();
        if let Some(e) =
            faults::permanent_failure(&addr).or_else(|| faults::transient_failure(&addr))
        {
            self.ui
                .apply_errored(c, a, self.started.get().elapsed().as_secs());
            return Err(e);
        }
        Ok(())
    }

    fn after(&self, c: &Change, a: Action, new: Option<&V>, st: &State) -> Result<(), String> {
        let secs = self.started.get().elapsed().as_secs();
        self.ui
            .apply_complete(c, a, new.and_then(providers::id_of), secs);
        let (mut add, mut change, mut remove) = self.counts.get();
        match a {
            Action::Create => add += 1,
            Action::Update => change += 1,
            Action::Delete => remove += 1,
            _ => {}
        }
        self.counts.set((add, change, remove));
        if faults::crash_mid_apply() {
            self.persist(st)?;
            faults::crash("mid-apply, after an intermediate state write");
        }
        if self.last_persist.get().elapsed() >= self.interval {
            self.persist(st)?;
        }
        Ok(())
    }
}

/// OpenTofu's words on the first interrupt (views/operation.go `interrupted`), and on a
/// second one before it has stopped (`fatalInterrupt`).
const INTERRUPTED: &str = "\nInterrupt received.\nPlease wait for OpenTofu to exit or data loss may occur.\nGracefully shutting down...\n";
const FATAL_INTERRUPT: &str =
    "\nTwo interrupts received. Exiting immediately. Note that data loss may have occurred.\n";

/// SIGINT and SIGTERM during apply, as OpenTofu handles them: the first says so at once
/// (stdout, or a `log` message with `-json`) and asks the walk to stop after the resource in
/// progress (`stop`); a second one exits at once. Under `TOFU_SIM_IGNORE_SIGINT` only SIGTERM
/// is heard.
fn watch_interrupts(json: bool, stop: Arc<AtomicBool>) {
    let mut signals = vec![signal_hook::consts::SIGTERM];
    if !faults::ignore_sigint() {
        signals.push(signal_hook::consts::SIGINT);
    }
    let Ok(mut signals) = signal_hook::iterator::Signals::new(signals) else {
        return;
    };
    std::thread::spawn(move || {
        let ui = Ui { json };
        for _ in signals.forever() {
            if stop.swap(true, Ordering::SeqCst) {
                ui.log(FATAL_INTERRUPT);
                std::process::exit(1);
            }
            ui.log(INTERRUPTED);
        }
    });
}

fn persist_interval() -> Duration {
    std::env::var("TF_STATE_PERSIST_INTERVAL")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|s| Duration::from_secs_f64(s.max(0.0)))
        .unwrap_or(Duration::from_secs(20))
}

fn apply(rest: &[String], destroy_cmd: bool) -> i32 {
    let pre = Ui {
        json: rest.iter().any(|a| a == "-json" || a == "--json"),
    };
    let mut spec = plan_spec();
    spec.retain(|(n, _)| !matches!(*n, "out" | "detailed-exitcode"));
    spec.push(("auto-approve", Kind::Bool));
    spec.push(("backup", Kind::Value));
    spec.push(("state-out", Kind::Value));
    let cmd = if destroy_cmd { "destroy" } else { "apply" };
    let p = match args::parse(rest, &spec) {
        Ok(p) => p,
        Err(e) => return usage_error(&pre, cmd, &e),
    };
    let ui = Ui {
        json: p.flag("json", false),
    };
    ui.version();
    let result = (|| -> Result<i32, Fail> {
        let planfile = match p.positional.as_slice() {
            [] => None,
            [one] if !destroy_cmd => Some(read_planfile(one)?),
            _ => {
                return Err(Fail(
                    "Too many command line arguments".into(),
                    "Expected at most one positional argument.".into(),
                ));
            }
        };
        if planfile.is_some() && !p.multi.is_empty() {
            return Err(Fail(
                "Can't set variables when applying a saved plan".into(),
                "The -var and -var-file options cannot be used when applying a saved plan file, because a saved plan includes the variable values that were set when it was created.".into(),
            ));
        }
        if planfile.is_none() && !p.flag("auto-approve", false) {
            return Err(Fail(
                "Apply not confirmed".into(),
                "tofu-sim never prompts: pass -auto-approve or a saved plan file.".into(),
            ));
        }
        if let Some(pf) = &planfile
            && pf.errored
        {
            return Err(Fail(
                "Cannot apply incomplete plan".into(),
                "OpenTofu encountered an error when generating this plan, so it cannot be applied."
                    .into(),
            ));
        }
        let timeout = parse_timeout(&p)?;
        let root = load_root()?;
        require_init(&root)?;
        let backend = open_backend(&root)?;
        let lock = take_lock(
            &backend,
            p.flag("lock", true),
            timeout,
            "OperationTypeApply",
        )?;
        let code = apply_locked(
            &ui,
            &p,
            root,
            planfile,
            destroy_cmd,
            &backend,
            lock.as_ref(),
        );
        let unlocked = release(&ui, &backend, lock.as_ref());
        match code {
            Ok(c) if !unlocked => Ok(c.max(1)),
            other => other,
        }
    })();
    match result {
        Ok(code) => code,
        Err(Fail(s, d)) => {
            ui.error(&s, &d);
            1
        }
    }
}

fn apply_locked(
    ui: &Ui,
    p: &args::Parsed,
    root: Module,
    planfile: Option<PlanFile>,
    destroy_cmd: bool,
    backend: &Backend,
    lock: Option<&Lock>,
) -> Result<i32, Fail> {
    let current = backend
        .read()
        .map_err(|e| Fail("Failed to load state".into(), e.to_string()))?;
    let (planned_changes, mode, values, working) = match planfile {
        Some(pf) => {
            if let Some(cur) = &current {
                if !pf.prior_lineage.is_empty()
                    && !cur.lineage.is_empty()
                    && pf.prior_lineage != cur.lineage
                {
                    return Err(Fail(
                        "Saved plan does not match the given state".into(),
                        "The given plan file can not be applied because it was created from a different state lineage.".into(),
                    ));
                }
                if pf.prior_serial != cur.serial {
                    return Err(Fail(
                        "Saved plan is stale".into(),
                        "The given plan file can no longer be applied because the state was changed by another operation after the plan was created.".into(),
                    ));
                }
            } else if !pf.prior_lineage.is_empty() {
                return Err(Fail(
                    "Saved plan is stale".into(),
                    "The given plan file can no longer be applied because the state was changed by another operation after the plan was created.".into(),
                ));
            }
            let mode = match pf.mode.as_str() {
                "destroy" => Mode::Destroy,
                "refresh-only" => Mode::RefreshOnly,
                _ => Mode::Normal,
            };
            let values = vars::from_raw(&root, &pf.variables)?;
            let mut working = current.clone().unwrap_or_else(State::new_lineage);
            if mode == Mode::RefreshOnly {
                working
                    .resources
                    .retain(|_, i| providers::refresh(&i.rtype, &i.value).is_some());
            }
            let mut changes = BTreeMap::new();
            for sc in pf.changes {
                let c = Change {
                    before: working
                        .resources
                        .get(&crate::core::addr(&sc.module, &sc.rtype, &sc.name))
                        .map(|i| i.value.clone()),
                    module: sc.module,
                    rtype: sc.rtype,
                    name: sc.name,
                    action: Action::parse(&sc.actions),
                    after: None,
                    replace_paths: Vec::new(),
                    reason: match sc.reason.as_deref() {
                        Some("delete_because_no_resource_config") => {
                            Some("delete_because_no_resource_config")
                        }
                        Some(_) => Some("replace_because_cannot_update"),
                        None => None,
                    },
                    created: false,
                };
                if c.action != Action::NoOp {
                    ui.planned(&c);
                }
                changes.insert(c.address(), c);
            }
            (changes, mode, values, working)
        }
        None => {
            let mode = plan_mode(p, destroy_cmd)?;
            let mut warns = Vec::new();
            let v = vars::collect(&root, &p.multi, &mut warns)?;
            for (s, d) in warns {
                ui.warn(&s, &d);
            }
            let planned = make_plan(
                ui,
                root.clone(),
                v.raw,
                v.values.clone(),
                mode,
                current.clone(),
                p.flag("refresh", true),
            );
            emit_plan(ui, &planned);
            if let Some(e) = planned.error {
                return Err(e);
            }
            let mut working = planned.refreshed.clone();
            if current.is_none() {
                working.serial = 0;
            }
            (planned.changes, mode, v.values, working)
        }
    };
    let written = current.clone().unwrap_or_else(|| {
        let mut s = working.clone();
        s.resources.clear();
        s.outputs.clear();
        s.serial = 0;
        s
    });
    let stop = Arc::new(AtomicBool::new(false));
    watch_interrupts(ui.json, stop.clone());
    let hooks = ApplyHooks {
        ui,
        backend,
        lock,
        interval: persist_interval(),
        last_persist: Cell::new(Instant::now()),
        written: RefCell::new(written),
        started: Cell::new(Instant::now()),
        counts: Cell::new((0, 0, 0)),
        stop,
    };
    let mut w = Walker::new(&root, values, mode, working);
    w.planned = planned_changes;
    w.hooks = Some(&hooks);
    let result = w.apply();
    let final_state = w.state.borrow().clone();
    let persisted = hooks.persist(&final_state);
    if let Err(e) = &persisted {
        let path = Path::new("errored.tfstate");
        let mut st = final_state.clone();
        st.serial = hooks.written.borrow().serial + 1;
        let saved = std::fs::write(path, st.to_bytes()).is_ok();
        let detail = if saved {
            format!(
                "{e}\n\nError: Failed to save state\n\nOpenTofu encountered an error attempting to save the state before cancelling the current operation. Once the operation is complete another attempt will be made to save the final state.\n\nThe state was written to errored.tfstate in the current directory. Run \"tofu state push errored.tfstate\" once the backend is reachable again."
            )
        } else {
            if ui.json {
                ui.emit(
                    "error",
                    "Failed to save state",
                    "log",
                    json!({"state": st.to_json()}),
                );
            } else {
                println!("{}", String::from_utf8_lossy(&st.to_bytes()));
            }
            e.clone()
        };
        ui.error("Failed to persist state to backend", &detail);
        return Ok(1);
    }
    match result {
        Err(e) => {
            ui.error("Apply failed", &e);
            Ok(1)
        }
        Ok(outs) => {
            let (add, change, remove) = hooks.counts.get();
            ui.summary(
                if mode == Mode::Destroy {
                    "destroy"
                } else {
                    "apply"
                },
                add,
                change,
                remove,
            );
            let list: Vec<(String, V, bool)> = outs
                .iter()
                .map(|(k, v)| (k.clone(), v.clone(), root.outputs[k].sensitive))
                .collect();
            ui.outputs(&list);
            Ok(0)
        }
    }
}

fn read_state_only(ui: &Ui) -> Result<Option<State>, Fail> {
    let root = load_root()?;
    require_init(&root)?;
    let b = open_backend(&root)?;
    let _ = ui;
    b.read()
        .map_err(|e| Fail("Failed to load state".into(), e.to_string()))
}

fn show(rest: &[String]) -> i32 {
    let ui0 = Ui { json: false };
    let p = match args::parse(
        rest,
        &[
            ("json", Kind::Bool),
            ("no-color", Kind::Bool),
            ("show-sensitive", Kind::Bool),
        ],
    ) {
        Ok(p) => p,
        Err(e) => return usage_error(&ui0, "show", &e),
    };
    let ui = Ui {
        json: p.flag("json", false),
    };
    let res = (|| -> Result<(), Fail> {
        let doc = match p.positional.first() {
            Some(f) => read_planfile(f)?.plan_json,
            None => planjson::state_json(read_state_only(&ui)?.as_ref()),
        };
        if ui.json {
            println!("{}", serde_json::to_string(&doc).unwrap_or_default());
        } else {
            println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        Ok(())
    })();
    match res {
        Ok(()) => 0,
        Err(Fail(s, d)) => {
            ui.error(&s, &d);
            1
        }
    }
}

fn output(rest: &[String]) -> i32 {
    let ui0 = Ui { json: false };
    let p = match args::parse(
        rest,
        &[
            ("json", Kind::Bool),
            ("raw", Kind::Bool),
            ("no-color", Kind::Bool),
            ("state", Kind::Value),
            ("show-sensitive", Kind::Bool),
        ],
    ) {
        Ok(p) => p,
        Err(e) => return usage_error(&ui0, "output", &e),
    };
    let ui = Ui { json: false };
    let st = match read_state_only(&ui) {
        Ok(s) => s.unwrap_or_default(),
        Err(Fail(s, d)) => {
            ui.error(&s, &d);
            return 1;
        }
    };
    let entry = |o: &crate::state::StateOutput| json!({"sensitive": o.sensitive, "type": o.value.ty().to_json(false), "value": o.value.to_json()});
    match p.positional.first() {
        Some(name) => {
            let Some(o) = st.outputs.get(name) else {
                ui.error(
                    &format!("Output \"{name}\" not found"),
                    "The output variable requested could not be found in the state file. If you recently added this to your configuration, be sure to run `tofu apply`, since the state won't be updated with new output variables until that command is run.",
                );
                return 1;
            };
            if p.flag("raw", false) {
                match o.value.as_template_str() {
                    Some(s) => print!("{s}"),
                    None => {
                        ui.error(
                            "Unsupported value for raw output",
                            "The -raw option only supports strings, numbers, and boolean values.",
                        );
                        return 1;
                    }
                }
            } else {
                println!("{}", o.value.to_json());
            }
        }
        None => {
            if p.flag("json", false) {
                let m: serde_json::Map<String, Json> = st
                    .outputs
                    .iter()
                    .map(|(k, o)| (k.clone(), entry(o)))
                    .collect();
                println!(
                    "{}",
                    serde_json::to_string_pretty(&Json::Object(m)).unwrap_or_default()
                );
            } else if st.outputs.is_empty() {
                ui.warn("No outputs found", "The state file either has no outputs defined, or all the defined outputs are empty. Please define an output in your configuration with the `output` keyword and run `tofu refresh` for it to become available. If you are using interpolation, please verify the interpolated value is not empty. You can use the `tofu console` command to assist.");
            } else {
                for (k, o) in &st.outputs {
                    if o.sensitive {
                        println!("{k} = <sensitive>");
                    } else {
                        println!("{k} = {}", o.value.to_json());
                    }
                }
            }
        }
    }
    0
}

fn state_pull(rest: &[String]) -> i32 {
    let ui = Ui { json: false };
    if let Err(e) = args::parse(rest, &[]) {
        return usage_error(&ui, "state pull", &e);
    }
    match read_state_only(&ui) {
        Ok(Some(st)) => {
            print!("{}", String::from_utf8_lossy(&st.to_bytes()));
            0
        }
        Ok(None) => 0,
        Err(Fail(s, d)) => {
            ui.error(&s, &d);
            1
        }
    }
}

fn force_unlock(rest: &[String]) -> i32 {
    let ui = Ui { json: false };
    let p = match args::parse(rest, &[("force", Kind::Bool)]) {
        Ok(p) => p,
        Err(e) => return usage_error(&ui, "force-unlock", &e),
    };
    let Some(id) = p.positional.first() else {
        ui.error(
            "Invalid number of arguments",
            "Expected a single argument: LOCK_ID",
        );
        return 1;
    };
    if !p.flag("force", false) {
        ui.error(
            "Confirmation required",
            "tofu-sim never prompts: pass -force to unlock without confirmation.",
        );
        return 1;
    }
    let res = (|| -> Result<(), Fail> {
        let root = load_root()?;
        require_init(&root)?;
        let b = open_backend(&root)?;
        match &b {
            Backend::Http(h) => {
                if !h.can_unlock() {
                    return Err(Fail(
                        "Locking is disabled for this backend".into(),
                        "No unlock_address is configured.".into(),
                    ));
                }
                let body = json!({"ID": id, "Operation": "", "Info": "", "Who": "", "Version": "", "Created": "0001-01-01T00:00:00Z", "Path": ""});
                h.unlock_body(&serde_json::to_vec(&body).unwrap_or_default())
                    .map_err(|e| Fail("Failed to unlock state".into(), e.to_string()))
            }
            Backend::Local(_) => b
                .unlock(&Lock {
                    id: id.clone(),
                    info: json!({"ID": id}),
                })
                .map_err(|e| Fail("Failed to unlock state".into(), e.to_string())),
        }
    })();
    match res {
        Ok(()) => {
            println!(
                "OpenTofu state has been successfully unlocked!\n\nThe state has been unlocked, and OpenTofu commands should now be able to\nobtain a new lock on the remote state."
            );
            0
        }
        Err(Fail(s, d)) => {
            ui.error(&s, &d);
            1
        }
    }
}

fn validate(rest: &[String]) -> i32 {
    let ui0 = Ui { json: false };
    let p = match args::parse(
        rest,
        &[
            ("json", Kind::Bool),
            ("no-color", Kind::Bool),
            ("no-tests", Kind::Bool),
            ("test-directory", Kind::Value),
        ],
    ) {
        Ok(p) => p,
        Err(e) => return usage_error(&ui0, "validate", &e),
    };
    let json_out = p.flag("json", false);
    let diags: Vec<(String, String)> = match load_root() {
        Err(Fail(s, d)) => vec![(s, d)],
        Ok(root) => match require_providers(&root) {
            Err(Fail(s, d)) => vec![(s, d)],
            Ok(()) => check_references(&root),
        },
    };
    if json_out {
        let j = json!({
            "format_version": "1.0",
            "valid": diags.is_empty(),
            "error_count": diags.len(),
            "warning_count": 0,
            "diagnostics": diags.iter().map(|(s, d)| json!({"severity": "error", "summary": s, "detail": d})).collect::<Vec<_>>()
        });
        println!("{}", serde_json::to_string_pretty(&j).unwrap_or_default());
    } else if diags.is_empty() {
        println!("Success! The configuration is valid.\n");
    } else {
        for (s, d) in &diags {
            ui0.error(s, d);
        }
    }
    if diags.is_empty() { 0 } else { 1 }
}

/// Every reference must name something declared.
fn check_references(m: &Module) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut exprs: Vec<&hcl::Expression> = Vec::new();
    exprs.extend(m.locals.values());
    exprs.extend(m.outputs.values().map(|o| &o.expr));
    for r in m.resources.values() {
        exprs.extend(r.attrs.values());
    }
    for c in m.calls.values() {
        exprs.extend(c.args.values());
        for (k, v) in &c.module.variables {
            if v.default.is_none() && !c.args.contains_key(k) {
                out.push((
                    "Missing required argument".into(),
                    format!("The argument \"{k}\" is required, but no definition was found (module \"{}\").", c.source),
                ));
            }
        }
        for k in c.args.keys() {
            if !c.module.variables.contains_key(k) {
                out.push((
                    "Unsupported argument".into(),
                    format!(
                        "An argument named \"{k}\" is not expected here (module \"{}\").",
                        c.source
                    ),
                ));
            }
        }
        out.extend(check_references(&c.module));
    }
    for e in exprs {
        for r in crate::eval::references(e) {
            let problem = match &r {
                crate::eval::Ref::Var(n) if !m.variables.contains_key(n) => Some((
                    "Reference to undeclared input variable",
                    format!("An input variable with the name \"{n}\" has not been declared."),
                )),
                crate::eval::Ref::Local(n) if !m.locals.contains_key(n) => Some((
                    "Reference to undeclared local value",
                    format!("A local value with the name \"{n}\" has not been declared."),
                )),
                crate::eval::Ref::Module(n, o) => match m.calls.get(n) {
                    None => Some((
                        "Reference to undeclared module",
                        format!("No module call named \"{n}\" is declared in this module."),
                    )),
                    Some(c) => o
                        .as_ref()
                        .filter(|o| !c.module.outputs.contains_key(*o))
                        .map(|o| {
                            (
                                "Unsupported attribute",
                                format!("This object does not have an attribute named \"{o}\"."),
                            )
                        }),
                },
                crate::eval::Ref::Resource(t, n, _)
                    if provider_of(t).is_some()
                        && !m.resources.contains_key(&format!("{t}.{n}")) =>
                {
                    Some((
                        "Reference to undeclared resource",
                        format!(
                            "A managed resource \"{t}\" \"{n}\" has not been declared in the root module."
                        ),
                    ))
                }
                crate::eval::Ref::Resource(t, _, _) if provider_of(t).is_none() => Some((
                    "Invalid reference",
                    format!(
                        "A reference to a resource type must be followed by at least one attribute access, specifying the resource name (\"{t}\")."
                    ),
                )),
                _ => None,
            };
            if let Some((s, d)) = problem {
                out.push((s.into(), d));
            }
        }
    }
    out
}
