//! Contexts and credentials on disk. `config.toml` in the config directory
//! (`$CAIRN_CONFIG_DIR`, else `$XDG_CONFIG_HOME/cairn`, else `~/.config/cairn`) names the
//! current context and each context's endpoints (unset ones default to the local ports);
//! `credentials.toml` next to it (mode 0600) holds each context's credential.
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use cairn_sdk::{Credential, Endpoints};
use serde::{Deserialize, Serialize};

use crate::error::CliError;

/// The variable that overrides the config directory.
pub const CONFIG_DIR_VAR: &str = "CAIRN_CONFIG_DIR";
/// The variable holding a credential that needs no login.
pub const API_TOKEN_VAR: &str = "CAIRN_API_TOKEN";
/// The context used when none is named or current.
pub const DEFAULT_CONTEXT: &str = "default";

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_context: Option<String>,
    #[serde(default)]
    pub contexts: BTreeMap<String, Endpoints>,
}

#[derive(Default, Serialize, Deserialize)]
struct CredentialsFile {
    #[serde(default)]
    contexts: BTreeMap<String, StoredCredential>,
}

#[derive(Clone, Serialize, Deserialize)]
struct StoredCredential {
    token: String,
}

/// The config directory.
pub fn config_dir() -> Result<PathBuf, CliError> {
    if let Some(dir) = std::env::var_os(CONFIG_DIR_VAR).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("cairn"));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".config").join("cairn")),
        None => Err(CliError::Other(format!(
            "no config directory: set {CONFIG_DIR_VAR} or HOME"
        ))),
    }
}

fn read_toml<T: for<'de> Deserialize<'de> + Default>(path: &Path) -> Result<T, CliError> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).map_err(|e| {
            CliError::Other(format!(
                "{}: {}",
                path.display(),
                e.message().lines().next().unwrap_or("invalid TOML")
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(CliError::Other(format!("read {}: {e}", path.display()))),
    }
}

/// Writes `text` to `path` atomically (a temporary file renamed into place), with mode
/// 0600 when `private`.
fn write_file(path: &Path, text: &str, private: bool) -> Result<(), CliError> {
    let fail = |e: std::io::Error| CliError::Other(format!("write {}: {e}", path.display()));
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if private { 0o600 } else { 0o644 });
    }
    let mut file = options.open(&tmp).map_err(fail)?;
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(fail)?;
    }
    file.write_all(text.as_bytes()).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}

/// The loaded configuration and the context chosen for this invocation.
#[derive(Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub file: ConfigFile,
    /// The context in use.
    pub context: String,
}

impl Config {
    /// Loads `config.toml`; `named` (from `--context`/`CAIRN_CONTEXT`) wins over the
    /// current context.
    pub fn load(named: Option<&str>) -> Result<Config, CliError> {
        let dir = config_dir()?;
        let file: ConfigFile = read_toml(&dir.join("config.toml"))?;
        let context = named
            .map(str::to_owned)
            .or_else(|| file.current_context.clone())
            .unwrap_or_else(|| DEFAULT_CONTEXT.to_owned());
        if named.is_some() && !file.contexts.contains_key(&context) && context != DEFAULT_CONTEXT {
            return Err(CliError::Usage(format!(
                "no context {context:?} in {} (create it with `cairn context set {context}`)",
                dir.join("config.toml").display()
            )));
        }
        Ok(Config { dir, file, context })
    }

    /// The endpoints of the context in use.
    pub fn endpoints(&self) -> Endpoints {
        self.file
            .contexts
            .get(&self.context)
            .cloned()
            .unwrap_or_default()
    }

    pub fn save(&self) -> Result<(), CliError> {
        let text = toml::to_string_pretty(&self.file)
            .map_err(|e| CliError::Other(format!("encode config: {e}")))?;
        write_file(&self.dir.join("config.toml"), &text, false)
    }

    fn credentials_path(&self) -> PathBuf {
        self.dir.join("credentials.toml")
    }

    /// `CAIRN_API_TOKEN` if set, else the context's stored credential.
    pub fn credential(&self) -> Result<Option<Credential>, CliError> {
        if let Ok(token) = std::env::var(API_TOKEN_VAR)
            && !token.trim().is_empty()
        {
            return Credential::parse(&token).map(Some).map_err(|_| {
                CliError::Usage(format!(
                    "{API_TOKEN_VAR} holds neither a Cairn API token nor an access token"
                ))
            });
        }
        let file: CredentialsFile = read_toml(&self.credentials_path())?;
        match file.contexts.get(&self.context) {
            Some(c) => Credential::parse(&c.token).map(Some).map_err(|_| {
                CliError::Other(format!(
                    "the stored credential of context {:?} is unreadable; run `cairn login` again",
                    self.context
                ))
            }),
            None => Ok(None),
        }
    }

    /// Stores `token` as the context's credential (credentials.toml, 0600).
    pub fn store_credential(&self, token: &str) -> Result<PathBuf, CliError> {
        let path = self.credentials_path();
        let mut file: CredentialsFile = read_toml(&path)?;
        file.contexts.insert(
            self.context.clone(),
            StoredCredential {
                token: token.trim().to_owned(),
            },
        );
        let text = toml::to_string_pretty(&file)
            .map_err(|e| CliError::Other(format!("encode credentials: {e}")))?;
        write_file(&path, &text, true)?;
        Ok(path)
    }

    /// Removes the context's stored credential; false when there was none.
    pub fn forget_credential(&self) -> Result<bool, CliError> {
        let path = self.credentials_path();
        let mut file: CredentialsFile = read_toml(&path)?;
        if file.contexts.remove(&self.context).is_none() {
            return Ok(false);
        }
        let text = toml::to_string_pretty(&file)
            .map_err(|e| CliError::Other(format!("encode credentials: {e}")))?;
        write_file(&path, &text, true)?;
        Ok(true)
    }
}
