//! The module library: every `modules/<family>/<kind>/` directory with a
//! `module.cairn.json`, read from disk once at start-up, plus a fingerprint of its content
//! (saved plans are tagged with it).
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::hash::Sha256;
use crate::module::{ModuleError, ModuleSpec};

/// Why the library cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    #[error("read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("module {source_name}: {error}")]
    Module {
        source_name: String,
        error: ModuleError,
    },
}

/// The modules a template may use, by source (`local/database`).
#[derive(Debug, Clone, Default)]
pub struct Library {
    modules: BTreeMap<String, ModuleSpec>,
    fingerprint: String,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LibraryError + '_ {
    move |source| LibraryError::Io {
        path: path.to_owned(),
        source,
    }
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, LibraryError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        out.push(entry.map_err(io(dir))?.path());
    }
    out.sort();
    Ok(out)
}

impl Library {
    /// A library of the given modules (tests, embedding).
    pub fn from_modules(modules: impl IntoIterator<Item = ModuleSpec>) -> Library {
        let modules: BTreeMap<String, ModuleSpec> =
            modules.into_iter().map(|m| (m.source.clone(), m)).collect();
        let mut h = Sha256::new();
        for m in modules.values() {
            h.update(format!("{m:?}").as_bytes());
        }
        Library {
            modules,
            fingerprint: h.finish_hex(),
        }
    }

    /// Loads `root/<family>/<kind>/` for every directory holding a `module.cairn.json`
    /// (others, such as `examples/`, are skipped).
    pub fn load_dir(root: &Path) -> Result<Library, LibraryError> {
        let mut modules = BTreeMap::new();
        let mut h = Sha256::new();
        for family in sorted_entries(root)? {
            if !family.is_dir() {
                continue;
            }
            for dir in sorted_entries(&family)? {
                let manifest_path = dir.join("module.cairn.json");
                if !manifest_path.is_file() {
                    continue;
                }
                let source = format!(
                    "{}/{}",
                    family.file_name().unwrap_or_default().to_string_lossy(),
                    dir.file_name().unwrap_or_default().to_string_lossy()
                );
                let manifest =
                    std::fs::read_to_string(&manifest_path).map_err(io(&manifest_path))?;
                h.update(source.as_bytes());
                h.update(b"\0module.cairn.json\0");
                h.update(manifest.as_bytes());
                let mut tf = Vec::new();
                for file in sorted_entries(&dir)? {
                    if file.extension().is_some_and(|e| e == "tf") {
                        let text = std::fs::read_to_string(&file).map_err(io(&file))?;
                        let name = file
                            .file_name()
                            .unwrap_or_default()
                            .to_string_lossy()
                            .into_owned();
                        h.update(b"\0");
                        h.update(name.as_bytes());
                        h.update(b"\0");
                        h.update(text.as_bytes());
                        tf.push((name, text));
                    }
                }
                let spec = ModuleSpec::from_sources(&source, &tf, &manifest).map_err(|error| {
                    LibraryError::Module {
                        source_name: source.clone(),
                        error,
                    }
                })?;
                modules.insert(source, spec);
            }
        }
        Ok(Library {
            modules,
            fingerprint: h.finish_hex(),
        })
    }

    pub fn get(&self, source: &str) -> Option<&ModuleSpec> {
        self.modules.get(source)
    }

    pub fn sources(&self) -> impl Iterator<Item = &str> {
        self.modules.keys().map(String::as_str)
    }

    /// sha256 of every file the library was built from.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}
