//! The two emulated resource types: the built-in `terraform_data` and hashicorp/local
//! 2.2.3's `local_file` (schema, plan rules, apply and refresh).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha1::{Digest, Sha1};

use crate::config::{ConfigError, Resource, cerr};
use crate::value::{Ty, V};

const LOCAL_FILE_ATTRS: &[&str] = &[
    "content",
    "content_base64",
    "directory_permission",
    "file_permission",
    "filename",
    "id",
    "sensitive_content",
    "source",
];
const DATA_ATTRS: &[&str] = &["id", "input", "output", "triggers_replace"];

/// Every attribute of a type's schema.
pub fn schema_attrs(rtype: &str) -> &'static [&'static str] {
    match rtype {
        "local_file" => LOCAL_FILE_ATTRS,
        _ => DATA_ATTRS,
    }
}

/// Attributes the schema marks sensitive.
pub fn schema_sensitive(rtype: &str) -> &'static [&'static str] {
    match rtype {
        "local_file" => &["sensitive_content"],
        _ => &[],
    }
}

fn computed(rtype: &str, attr: &str) -> bool {
    match rtype {
        "local_file" => attr == "id",
        _ => attr == "id" || attr == "output",
    }
}

/// Checks a resource block's arguments against the schema.
pub fn check_schema(r: &Resource) -> Result<(), ConfigError> {
    for k in r.attrs.keys() {
        if !schema_attrs(&r.rtype).contains(&k.as_str()) || computed(&r.rtype, k) {
            return Err(cerr(
                "Unsupported argument",
                format!(
                    "An argument named \"{k}\" is not expected here ({}.{}).",
                    r.rtype, r.name
                ),
            ));
        }
    }
    if r.rtype == "local_file" {
        if !r.attrs.contains_key("filename") {
            return Err(cerr(
                "Missing required argument",
                format!(
                    "The argument \"filename\" is required, but no definition was found ({}.{}).",
                    r.rtype, r.name
                ),
            ));
        }
        let given = ["content", "content_base64", "sensitive_content", "source"]
            .iter()
            .filter(|k| r.attrs.contains_key(**k))
            .count();
        if given != 1 {
            return Err(cerr(
                "Invalid combination of arguments",
                "\"content\": only one of `content,content_base64,sensitive_content,source` can be specified, and one must be specified",
            ));
        }
    }
    Ok(())
}

/// The action planned for one resource instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    NoOp,
    Create,
    Update,
    /// Delete then create.
    Replace,
    /// Create then delete (create_before_destroy).
    ReplaceCbd,
    Delete,
}

impl Action {
    pub fn json(self) -> Vec<&'static str> {
        match self {
            Action::NoOp => vec!["no-op"],
            Action::Create => vec!["create"],
            Action::Update => vec!["update"],
            Action::Replace => vec!["delete", "create"],
            Action::ReplaceCbd => vec!["create", "delete"],
            Action::Delete => vec!["delete"],
        }
    }

    pub fn parse(parts: &[String]) -> Action {
        match parts
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["create"] => Action::Create,
            ["update"] => Action::Update,
            ["delete", "create"] => Action::Replace,
            ["create", "delete"] => Action::ReplaceCbd,
            ["delete"] => Action::Delete,
            _ => Action::NoOp,
        }
    }

    pub fn is_replace(self) -> bool {
        matches!(self, Action::Replace | Action::ReplaceCbd)
    }
}

/// A provider's planned new state.
pub struct Planned {
    pub action: Action,
    pub after: V,
    pub replace_paths: Vec<String>,
}

/// The configuration object with every schema attribute (null when not set) and defaults.
pub fn config_object(rtype: &str, attrs: BTreeMap<String, V>) -> V {
    let mut m = BTreeMap::new();
    for a in schema_attrs(rtype) {
        if computed(rtype, a) {
            continue;
        }
        let v = attrs.get(*a).cloned().unwrap_or(V::Null(Ty::String));
        let v = match (rtype, *a) {
            ("local_file", "file_permission" | "directory_permission") if v.is_null() => {
                V::str("0777")
            }
            ("local_file", _) => crate::value::convert(&v, &Ty::String).unwrap_or(v),
            _ => v,
        };
        m.insert((*a).to_owned(), v);
    }
    V::Object(m)
}

fn get<'a>(v: &'a V, k: &str) -> Option<&'a V> {
    match v.unmark().0 {
        V::Object(m) => m.get(k),
        _ => None,
    }
}

fn same(a: Option<&V>, b: Option<&V>) -> bool {
    let j = |v: Option<&V>| v.map(|x| x.deep_unmark().to_json()).unwrap_or_default();
    a.map(|x| x.is_null()).unwrap_or(true) == b.map(|x| x.is_null()).unwrap_or(true) && j(a) == j(b)
}

/// Plans a change from `prior` (refreshed state, if any) to `config`.
pub fn plan(rtype: &str, prior: Option<&V>, config: &V, ignore: &[String]) -> Planned {
    let V::Object(cfg) = config.unmark().0.clone() else {
        return Planned {
            action: Action::NoOp,
            after: config.clone(),
            replace_paths: Vec::new(),
        };
    };
    let mut after = cfg.clone();
    // ignore_changes keeps the prior value.
    if let Some(p) = prior {
        for k in ignore {
            if let Some(v) = get(p, k) {
                after.insert(k.clone(), v.clone());
            }
        }
    }
    match rtype {
        "local_file" => {
            let Some(p) = prior else {
                after.insert("id".into(), V::Unknown(Ty::String));
                return Planned {
                    action: Action::Create,
                    after: V::Object(after),
                    replace_paths: Vec::new(),
                };
            };
            let changed: Vec<String> = after
                .iter()
                .filter(|(k, v)| !same(Some(v), get(p, k)))
                .map(|(k, _)| k.clone())
                .collect();
            if changed.is_empty() {
                return Planned {
                    action: Action::NoOp,
                    after: p.clone(),
                    replace_paths: Vec::new(),
                };
            }
            after.insert("id".into(), V::Unknown(Ty::String));
            Planned {
                action: Action::Replace,
                after: V::Object(after),
                replace_paths: changed,
            }
        }
        _ => {
            let input = after.get("input").cloned().unwrap_or(V::null());
            let unknown_output = if input.is_null() {
                V::Null(input.ty())
            } else {
                V::Unknown(input.ty())
            };
            let Some(p) = prior else {
                after.insert("id".into(), V::Unknown(Ty::String));
                after.insert("output".into(), unknown_output);
                return Planned {
                    action: Action::Create,
                    after: V::Object(after),
                    replace_paths: Vec::new(),
                };
            };
            if !same(after.get("triggers_replace"), get(p, "triggers_replace")) {
                after.insert("id".into(), V::Unknown(Ty::String));
                after.insert("output".into(), unknown_output);
                return Planned {
                    action: Action::Replace,
                    after: V::Object(after),
                    replace_paths: vec!["triggers_replace".into()],
                };
            }
            if !same(after.get("input"), get(p, "input")) {
                after.insert("id".into(), get(p, "id").cloned().unwrap_or(V::null()));
                after.insert("output".into(), unknown_output);
                return Planned {
                    action: Action::Update,
                    after: V::Object(after),
                    replace_paths: Vec::new(),
                };
            }
            Planned {
                action: Action::NoOp,
                after: p.clone(),
                replace_paths: Vec::new(),
            }
        }
    }
}

fn str_attr(v: &V, k: &str) -> Option<String> {
    get(v, k).and_then(|x| x.as_template_str())
}

/// The bytes a local_file would hold.
fn local_content(v: &V) -> Result<Vec<u8>, String> {
    if let Some(c) = str_attr(v, "content") {
        return Ok(c.into_bytes());
    }
    if let Some(c) = str_attr(v, "sensitive_content") {
        return Ok(c.into_bytes());
    }
    if let Some(c) = str_attr(v, "content_base64") {
        return STANDARD
            .decode(c)
            .map_err(|e| format!("failed to decode content_base64: {e}"));
    }
    if let Some(src) = str_attr(v, "source") {
        return std::fs::read(&src).map_err(|e| format!("failed to read source {src}: {e}"));
    }
    Err("one of content, content_base64, sensitive_content or source must be set".into())
}

fn mode(s: &str) -> u32 {
    u32::from_str_radix(s, 8).unwrap_or(0o777)
}

/// Applies a create/update (the after value is fully known); returns the new state value.
pub fn apply_create(rtype: &str, after: &V, prior: Option<&V>) -> Result<V, String> {
    let V::Object(mut m) = after.unmark().0.clone() else {
        return Err("invalid planned value".into());
    };
    match rtype {
        "local_file" => {
            let filename = str_attr(after, "filename").ok_or("filename is required")?;
            let content = local_content(after)?;
            let path = Path::new(&filename);
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                create_dirs(
                    dir,
                    mode(&str_attr(after, "directory_permission").unwrap_or_default()),
                )
                .map_err(|e| format!("create directory {}: {e}", dir.display()))?;
            }
            write_file(
                path,
                &content,
                mode(&str_attr(after, "file_permission").unwrap_or_default()),
            )
            .map_err(|e| format!("open {filename}: {e}"))?;
            m.insert("id".into(), V::Str(hex::encode(Sha1::digest(&content))));
        }
        _ => {
            let id = match prior.and_then(|p| get(p, "id")) {
                Some(V::Str(s)) if !m.get("id").is_some_and(|x| matches!(x, V::Unknown(_))) => {
                    s.clone()
                }
                _ => uuid::Uuid::new_v4().to_string(),
            };
            m.insert("id".into(), V::Str(id));
            let input = m.get("input").cloned().unwrap_or(V::null());
            m.insert("output".into(), input);
        }
    }
    Ok(V::Object(m))
}

#[cfg(unix)]
fn create_dirs(dir: &Path, perm: u32) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(perm)
        .create(dir)
}

#[cfg(unix)]
fn write_file(path: &Path, content: &[u8], perm: u32) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(perm)
        .open(path)?;
    f.write_all(content)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))
}

/// Deletes the real object behind a state value.
pub fn apply_delete(rtype: &str, prior: &V) -> Result<(), String> {
    if rtype == "local_file"
        && let Some(f) = str_attr(prior, "filename")
    {
        match std::fs::remove_file(&f) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("remove {f}: {e}")),
        }
    }
    Ok(())
}

/// Reads the real object: None when it is gone (or, for local_file, no longer matches).
pub fn refresh(rtype: &str, prior: &V) -> Option<V> {
    if rtype == "local_file" {
        let f = str_attr(prior, "filename")?;
        let bytes = std::fs::read(&f).ok()?;
        let id = str_attr(prior, "id").unwrap_or_default();
        if hex::encode(Sha1::digest(&bytes)) != id {
            return None;
        }
    }
    Some(prior.clone())
}

/// The id to show in UI messages.
pub fn id_of(v: &V) -> Option<String> {
    str_attr(v, "id")
}
