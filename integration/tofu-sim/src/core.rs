//! The graph walk: evaluates a configuration lazily (references pull what they need), plans
//! resource and output changes against the refreshed state, and applies a plan in
//! dependency order.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};

use hcl::Expression;

use crate::config::{Module, provider_of};
use crate::eval::{self, Ref, Resolver};
use crate::providers::{self, Action};
use crate::state::{Instance, State, StateOutput};
use crate::value::{Ty, V, convert};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Normal,
    Destroy,
    RefreshOnly,
}

/// One planned resource change.
#[derive(Clone, Debug)]
pub struct Change {
    pub module: String,
    pub rtype: String,
    pub name: String,
    pub action: Action,
    pub before: Option<V>,
    pub after: Option<V>,
    pub replace_paths: Vec<String>,
    pub reason: Option<&'static str>,
    /// True when `after` came from the provider for a create (schema marks apply).
    pub created: bool,
}

impl Change {
    pub fn address(&self) -> String {
        addr(&self.module, &self.rtype, &self.name)
    }
}

pub fn addr(module: &str, rtype: &str, name: &str) -> String {
    if module.is_empty() {
        format!("{rtype}.{name}")
    } else {
        format!("{module}.{rtype}.{name}")
    }
}

fn module_addr(path: &[String]) -> String {
    path.iter()
        .map(|m| format!("module.{m}"))
        .collect::<Vec<_>>()
        .join(".")
}

/// Called around each resource apply (UI hooks, faults, snapshots).
pub trait Hooks {
    fn before(&self, c: &Change, action: Action) -> Result<(), String>;
    fn after(
        &self,
        c: &Change,
        action: Action,
        new: Option<&V>,
        state: &State,
    ) -> Result<(), String>;
}

pub struct Walker<'a> {
    pub root: &'a Module,
    pub vars: BTreeMap<String, V>,
    pub mode: Mode,
    pub applying: bool,
    /// Refreshed prior state (plan) or the working state (apply).
    pub state: RefCell<State>,
    memo: RefCell<BTreeMap<String, V>>,
    busy: RefCell<HashSet<String>>,
    pub changes: RefCell<BTreeMap<String, Change>>,
    /// The plan being applied (address → change).
    pub planned: BTreeMap<String, Change>,
    pub hooks: Option<&'a dyn Hooks>,
    pub cwd: String,
}

struct Scope<'w, 'a> {
    w: &'w Walker<'a>,
    path: Vec<String>,
}

impl Walker<'_> {
    pub fn new<'a>(
        root: &'a Module,
        vars: BTreeMap<String, V>,
        mode: Mode,
        state: State,
    ) -> Walker<'a> {
        Walker {
            root,
            vars,
            mode,
            applying: false,
            state: RefCell::new(state),
            memo: RefCell::new(BTreeMap::new()),
            busy: RefCell::new(HashSet::new()),
            changes: RefCell::new(BTreeMap::new()),
            planned: BTreeMap::new(),
            hooks: None,
            cwd: std::env::current_dir()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| ".".into()),
        }
    }

    fn module_at(&self, path: &[String]) -> Result<&Module, String> {
        let mut m = self.root;
        for p in path {
            m = &m
                .calls
                .get(p)
                .ok_or_else(|| format!("No module call named \"{p}\" is declared."))?
                .module;
        }
        Ok(m)
    }

    fn memoized(&self, key: String, f: impl FnOnce() -> Result<V, String>) -> Result<V, String> {
        if let Some(v) = self.memo.borrow().get(&key) {
            return Ok(v.clone());
        }
        if !self.busy.borrow_mut().insert(key.clone()) {
            return Err(format!("Cycle: {key} refers to itself."));
        }
        let r = f();
        self.busy.borrow_mut().remove(&key);
        let v = r?;
        self.memo.borrow_mut().insert(key, v.clone());
        Ok(v)
    }

    fn var(&self, path: &[String], name: &str) -> Result<V, String> {
        let m = self.module_at(path)?;
        let decl = m.variables.get(name).ok_or_else(|| {
            format!("An input variable with the name \"{name}\" has not been declared.")
        })?;
        if path.is_empty() {
            let v = self
                .vars
                .get(name)
                .cloned()
                .unwrap_or(V::Null(decl.ty.concrete()));
            return Ok(v.mark(decl.sensitive));
        }
        let key = format!("{}.var.{name}", module_addr(path));
        self.memoized(key, || {
            let parent = &path[..path.len() - 1];
            let call = &self.module_at(parent)?.calls[&path[path.len() - 1]];
            let raw = match call.args.get(name) {
                Some(e) => self.eval_in(parent, e)?,
                None => V::Null(Ty::Dynamic),
            };
            let raw = if raw.is_null() && !(decl.nullable && call.args.contains_key(name)) {
                match &decl.default {
                    Some(d) => d.clone(),
                    None if call.args.contains_key(name) && decl.nullable => raw,
                    None => {
                        return Err(format!(
                            "Missing required argument: the argument \"{name}\" is required by module.{}.",
                            path[path.len() - 1]
                        ));
                    }
                }
            } else {
                raw
            };
            let v = convert(&raw, &decl.ty).map_err(|e| {
                format!("Invalid value for input variable \"{name}\": {e}.")
            })?;
            Ok(v.mark(decl.sensitive))
        })
    }

    pub fn eval_in(&self, path: &[String], e: &Expression) -> Result<V, String> {
        let scope = Scope {
            w: self,
            path: path.to_vec(),
        };
        eval::eval(e, &scope)
    }

    fn local(&self, path: &[String], name: &str) -> Result<V, String> {
        let m = self.module_at(path)?;
        let e = m.locals.get(name).ok_or_else(|| {
            format!("A local value with the name \"{name}\" has not been declared.")
        })?;
        self.memoized(format!("{}.local.{name}", module_addr(path)), || {
            self.eval_in(path, e)
        })
    }

    /// A module call's outputs as an object.
    fn module_outputs(&self, path: &[String], call: &str) -> Result<V, String> {
        let mut child = path.to_vec();
        child.push(call.to_owned());
        let m = self.module_at(&child)?;
        let mut out = BTreeMap::new();
        for name in m.outputs.keys() {
            out.insert(name.clone(), self.output(&child, name)?);
        }
        Ok(V::Object(out))
    }

    /// An output's value (marked when declared sensitive).
    pub fn output(&self, path: &[String], name: &str) -> Result<V, String> {
        let m = self.module_at(path)?;
        let o = &m.outputs[name];
        self.memoized(format!("{}.output.{name}", module_addr(path)), || {
            let v = self.eval_in(path, &o.expr)?;
            if v.has_sensitive() && !o.sensitive {
                return Err(format!(
                    "Output refers to sensitive values: output \"{name}\" must be marked sensitive = true."
                ));
            }
            Ok(v.mark(o.sensitive))
        })
    }

    fn config_value(&self, path: &[String], key: &str) -> Result<V, String> {
        let m = self.module_at(path)?;
        let r = &m.resources[key];
        // depends_on: realize those first.
        for d in &r.depends_on {
            match eval::depends_ref(d) {
                Some(Ref::Resource(t, n, _)) => {
                    self.resource(path, &t, &n)?;
                }
                Some(Ref::Module(mname, _)) => {
                    self.module_outputs(path, &mname)?;
                }
                _ => return Err("Invalid depends_on reference".into()),
            }
        }
        let mut attrs = BTreeMap::new();
        for (k, e) in &r.attrs {
            let v = self.eval_in(path, e).map_err(|m| format!("{key}: {m}"))?;
            attrs.insert(k.clone(), v);
        }
        Ok(providers::config_object(&r.rtype, attrs))
    }

    /// The references a resource depends on (for state `dependencies`).
    fn dependencies(&self, path: &[String], key: &str) -> Vec<String> {
        let Ok(m) = self.module_at(path) else {
            return Vec::new();
        };
        let r = &m.resources[key];
        let mut deps: Vec<String> = Vec::new();
        let prefix = module_addr(path);
        let mut refs: Vec<Ref> = r.attrs.values().flat_map(eval::references).collect();
        refs.extend(r.depends_on.iter().filter_map(eval::depends_ref));
        for rf in refs {
            if let Ref::Resource(t, n, _) = rf
                && provider_of(&t).is_some()
            {
                let a = addr(&prefix, &t, &n);
                if !deps.contains(&a) {
                    deps.push(a);
                }
            }
        }
        deps.sort();
        deps
    }

    /// A resource's value: planned (plan) or applied (apply).
    fn resource(&self, path: &[String], rtype: &str, name: &str) -> Result<V, String> {
        let m = self.module_at(path)?;
        let key = format!("{rtype}.{name}");
        if !m.resources.contains_key(&key) {
            return Err(format!(
                "A managed resource \"{rtype}\" \"{name}\" has not been declared in {}.",
                if path.is_empty() {
                    "the root module".to_owned()
                } else {
                    module_addr(path)
                }
            ));
        }
        let maddr = module_addr(path);
        let address = addr(&maddr, rtype, name);
        self.memoized(format!("resource {address}"), || {
            if self.applying {
                self.apply_resource(path, &key, &address)
            } else {
                self.plan_resource(path, &key, &address)
            }
        })
    }

    fn plan_resource(&self, path: &[String], key: &str, address: &str) -> Result<V, String> {
        let m = self.module_at(path)?;
        let r = &m.resources[key];
        let prior = self
            .state
            .borrow()
            .resources
            .get(address)
            .map(|i| i.value.clone());
        if self.mode == Mode::RefreshOnly {
            return Ok(prior.unwrap_or(V::Unknown(Ty::Dynamic)));
        }
        let cfg = self.config_value(path, key)?;
        let p = providers::plan(&r.rtype, prior.as_ref(), &cfg, &r.ignore_changes);
        let action = match p.action {
            Action::Replace if r.create_before_destroy => Action::ReplaceCbd,
            a => a,
        };
        let change = Change {
            module: module_addr(path),
            rtype: r.rtype.clone(),
            name: r.name.clone(),
            action,
            before: prior,
            after: Some(p.after.clone()),
            replace_paths: p.replace_paths,
            reason: action
                .is_replace()
                .then_some("replace_because_cannot_update"),
            created: action == Action::Create,
        };
        self.changes.borrow_mut().insert(address.to_owned(), change);
        Ok(p.after)
    }

    fn apply_resource(&self, path: &[String], key: &str, address: &str) -> Result<V, String> {
        let planned = self.planned.get(address).cloned();
        let prior = self
            .state
            .borrow()
            .resources
            .get(address)
            .map(|i| i.value.clone());
        let Some(pc) = planned else {
            return prior.ok_or_else(|| format!("{address}: no planned change and no state"));
        };
        if pc.action == Action::NoOp {
            return Ok(prior.or(pc.after).unwrap_or(V::null()));
        }
        let m = self.module_at(path)?;
        let r = &m.resources[key];
        let cfg = self.config_value(path, key)?;
        let p = providers::plan(&r.rtype, prior.as_ref(), &cfg, &r.ignore_changes);
        if p.after.has_unknown()
            && !matches!(
                pc.action,
                Action::Create | Action::Update | Action::Replace | Action::ReplaceCbd
            )
        {
            return Err(format!(
                "{address}: Provider produced inconsistent final plan"
            ));
        }
        let deps = self.dependencies(path, key);
        let mut cur = pc.clone();
        cur.before = prior.clone();
        if pc.action == Action::Replace
            && let Some(old) = &prior
        {
            self.hook_before(&cur, Action::Delete)?;
            providers::apply_delete(&r.rtype, old).map_err(|e| format!("{address}: {e}"))?;
            self.state.borrow_mut().resources.remove(address);
            self.hook_after(&cur, Action::Delete, None)?;
        }
        let act = if pc.action == Action::Update {
            Action::Update
        } else {
            Action::Create
        };
        self.hook_before(&cur, act)?;
        let new = providers::apply_create(&r.rtype, &p.after, prior.as_ref())
            .map_err(|e| format!("{address}: {e}"))?;
        self.state.borrow_mut().resources.insert(
            address.to_owned(),
            Instance {
                module: module_addr(path),
                rtype: r.rtype.clone(),
                name: r.name.clone(),
                value: new.clone(),
                dependencies: deps,
            },
        );
        self.hook_after(&cur, act, Some(&new))?;
        if pc.action == Action::ReplaceCbd
            && let Some(old) = &prior
        {
            self.hook_before(&cur, Action::Delete)?;
            providers::apply_delete(&r.rtype, old).map_err(|e| format!("{address}: {e}"))?;
            self.hook_after(&cur, Action::Delete, None)?;
        }
        Ok(new)
    }

    fn hook_before(&self, c: &Change, a: Action) -> Result<(), String> {
        match self.hooks {
            Some(h) => h.before(c, a),
            None => Ok(()),
        }
    }

    fn hook_after(&self, c: &Change, a: Action, new: Option<&V>) -> Result<(), String> {
        match self.hooks {
            Some(h) => h.after(c, a, new, &self.state.borrow()),
            None => Ok(()),
        }
    }

    /// Every (module path, resource key) in the configuration.
    fn all_resources(&self) -> Vec<(Vec<String>, String, String)> {
        fn rec(m: &Module, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, String, String)>) {
            let ma = module_addr(path);
            for (k, r) in &m.resources {
                out.push((path.clone(), k.clone(), addr(&ma, &r.rtype, &r.name)));
            }
            for (name, c) in &m.calls {
                path.push(name.clone());
                rec(&c.module, path, out);
                path.pop();
            }
        }
        let mut out = Vec::new();
        rec(self.root, &mut Vec::new(), &mut out);
        out
    }

    /// Plans every resource and the orphans; returns the root output values.
    pub fn plan(&self) -> Result<BTreeMap<String, V>, String> {
        let configured = self.all_resources();
        let in_config: HashSet<String> = configured.iter().map(|c| c.2.clone()).collect();
        if self.mode != Mode::Destroy {
            for (path, key, _) in &configured {
                let (t, n) = key.split_once('.').unwrap_or_default();
                self.resource(path, t, n)?;
            }
        }
        if self.mode != Mode::RefreshOnly {
            let st = self.state.borrow().clone();
            for (a, i) in &st.resources {
                if self.mode == Mode::Destroy || !in_config.contains(a) {
                    self.changes.borrow_mut().insert(
                        a.clone(),
                        Change {
                            module: i.module.clone(),
                            rtype: i.rtype.clone(),
                            name: i.name.clone(),
                            action: Action::Delete,
                            before: Some(i.value.clone()),
                            after: None,
                            replace_paths: Vec::new(),
                            reason: (self.mode != Mode::Destroy)
                                .then_some("delete_because_no_resource_config"),
                            created: false,
                        },
                    );
                }
            }
        }
        let mut outs = BTreeMap::new();
        if self.mode != Mode::Destroy {
            for name in self.root.outputs.keys() {
                outs.insert(name.clone(), self.output(&[], name)?);
            }
        }
        Ok(outs)
    }

    /// Applies `self.planned`: deletes of orphans first (dependents before dependencies),
    /// then every configured resource in dependency order; returns root outputs.
    pub fn apply(&mut self) -> Result<BTreeMap<String, V>, String> {
        self.applying = true;
        let mut deletes: Vec<Change> = self
            .planned
            .values()
            .filter(|c| c.action == Action::Delete)
            .cloned()
            .collect();
        let deps: BTreeMap<String, Vec<String>> = self
            .state
            .borrow()
            .resources
            .iter()
            .map(|(a, i)| (a.clone(), i.dependencies.clone()))
            .collect();
        // A resource is deleted only after every resource that depends on it.
        let mut ordered: Vec<Change> = Vec::new();
        while !deletes.is_empty() {
            let pending: Vec<String> = deletes.iter().map(Change::address).collect();
            let pos = deletes
                .iter()
                .position(|c| {
                    let a = c.address();
                    !pending
                        .iter()
                        .any(|other| *other != a && deps.get(other).is_some_and(|d| d.contains(&a)))
                })
                .unwrap_or(0);
            ordered.push(deletes.remove(pos));
        }
        let deletes = ordered;
        for c in &deletes {
            let a = c.address();
            let prior = self
                .state
                .borrow()
                .resources
                .get(&a)
                .map(|i| i.value.clone());
            if let Some(p) = prior {
                self.hook_before(c, Action::Delete)?;
                providers::apply_delete(&c.rtype, &p).map_err(|e| format!("{a}: {e}"))?;
                self.state.borrow_mut().resources.remove(&a);
                self.hook_after(c, Action::Delete, None)?;
            }
        }
        let mut outs = BTreeMap::new();
        if self.mode == Mode::Normal {
            for (path, key, _) in self.all_resources() {
                let (t, n) = key.split_once('.').unwrap_or_default();
                self.resource(&path, t, n)?;
            }
            for name in self.root.outputs.keys() {
                outs.insert(name.clone(), self.output(&[], name)?);
            }
        }
        let mut st = self.state.borrow_mut();
        if self.mode == Mode::RefreshOnly {
            for name in self.root.outputs.keys() {
                if let Ok(v) = self.output(&[], name) {
                    outs.insert(name.clone(), v);
                }
            }
        }
        st.outputs = outs
            .iter()
            .filter(|(_, v)| !v.has_unknown())
            .map(|(k, v)| {
                (
                    k.clone(),
                    StateOutput {
                        value: v.deep_unmark(),
                        sensitive: self.root.outputs[k].sensitive,
                    },
                )
            })
            .collect();
        Ok(outs)
    }
}

impl Resolver for Scope<'_, '_> {
    fn var(&self, name: &str) -> Result<V, String> {
        self.w.var(&self.path, name)
    }
    fn local(&self, name: &str) -> Result<V, String> {
        self.w.local(&self.path, name)
    }
    fn resource(&self, rtype: &str, name: &str) -> Result<V, String> {
        self.w.resource(&self.path, rtype, name)
    }
    fn module(&self, name: &str) -> Result<V, String> {
        self.w.module_outputs(&self.path, name)
    }
    fn path_module(&self) -> String {
        self.w
            .module_at(&self.path)
            .map(|m| m.path_module.clone())
            .unwrap_or_else(|_| ".".into())
    }
    fn path_root(&self) -> String {
        ".".into()
    }
    fn path_cwd(&self) -> String {
        self.w.cwd.clone()
    }
    fn planning(&self) -> bool {
        !self.w.applying
    }
}
