//! The tags a saved plan is stored with, and which of them changed before an apply: the root
//! config's hash, the base generation, the tofu version, the provider lock file's sha256 and
//! the module library's hash.

use std::path::{Path, PathBuf};

use aws_lc_rs::digest::{Context, SHA256, digest};

/// What a plan was made from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlanTags {
    /// The coordinator's hash of the root config.
    pub config_hash: String,
    /// The state generation the plan was made against.
    pub base_generation: u64,
    /// `terraform_version` of `tofu version -json`.
    pub tofu_version: String,
    /// sha256 (hex) of `.terraform.lock.hcl`.
    pub provider_lock_hash: String,
    /// See [`module_library_hash`].
    pub module_library_hash: String,
}

impl PlanTags {
    /// The names of the tags that differ between `self` (the saved plan's) and `now`.
    pub fn changed(&self, now: &PlanTags) -> Vec<&'static str> {
        let mut changed = Vec::new();
        if self.config_hash != now.config_hash {
            changed.push("config hash");
        }
        if self.base_generation != now.base_generation {
            changed.push("base generation");
        }
        if self.tofu_version != now.tofu_version {
            changed.push("tofu version");
        }
        if self.provider_lock_hash != now.provider_lock_hash {
            changed.push("provider lock file");
        }
        if self.module_library_hash != now.module_library_hash {
            changed.push("module library");
        }
        changed
    }
}

/// Why the module library could not be hashed.
#[derive(Debug, thiserror::Error)]
#[error("hash the module library at {}", path.display())]
pub struct LibraryHashError {
    /// The file or directory that could not be read.
    pub path: PathBuf,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}

/// sha256 of `bytes`, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(digest(&SHA256, bytes).as_ref())
}

/// The `terraform_version` of `tofu version -json` output; `None` when it has none.
pub fn tofu_version(version_json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(version_json).ok()?;
    v.get("terraform_version")?.as_str().map(str::to_owned)
}

/// sha256 over the module library: every regular file (symlinks followed), in the order of
/// their paths relative to `root`, each as its path, a NUL, its length and its contents.
pub fn module_library_hash(root: &Path) -> Result<String, LibraryHashError> {
    let mut files = Vec::new();
    collect_files(root, root, &mut files)?;
    files.sort();
    let mut ctx = Context::new(&SHA256);
    for rel in files {
        let path = root.join(&rel);
        let bytes = std::fs::read(&path).map_err(|source| LibraryHashError {
            path: path.clone(),
            source,
        })?;
        ctx.update(rel.as_bytes());
        ctx.update(&[0]);
        ctx.update(&(bytes.len() as u64).to_be_bytes());
        ctx.update(&bytes);
    }
    Ok(hex::encode(ctx.finish().as_ref()))
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), LibraryHashError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LibraryHashError { path, source }
    };
    for entry in std::fs::read_dir(dir).map_err(err(dir))? {
        let entry = entry.map_err(err(dir))?;
        let path = entry.path();
        let meta = std::fs::metadata(&path).map_err(err(&path))?;
        if meta.is_dir() {
            collect_files(root, &path, out)?;
        } else if meta.is_file() {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            out.push(rel.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_hash_follows_content_and_names_not_order() {
        let a = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(a.path().join("local/net")).unwrap();
        std::fs::write(a.path().join("local/net/main.tf"), "x").unwrap();
        std::fs::write(a.path().join("top.tf"), "y").unwrap();
        let h1 = module_library_hash(a.path()).unwrap();
        assert_eq!(h1, module_library_hash(a.path()).unwrap());
        std::fs::write(a.path().join("top.tf"), "z").unwrap();
        let h2 = module_library_hash(a.path()).unwrap();
        assert_ne!(h1, h2);
        std::fs::rename(a.path().join("top.tf"), a.path().join("top2.tf")).unwrap();
        assert_ne!(h2, module_library_hash(a.path()).unwrap());
        assert!(module_library_hash(&a.path().join("missing")).is_err());
    }

    #[test]
    fn names_the_changed_tags() {
        let saved = PlanTags {
            config_hash: "c".into(),
            base_generation: 3,
            tofu_version: "1.12.6".into(),
            provider_lock_hash: "l".into(),
            module_library_hash: "m".into(),
        };
        assert!(saved.changed(&saved).is_empty());
        let mut now = saved.clone();
        now.base_generation = 4;
        now.module_library_hash = "m2".into();
        assert_eq!(saved.changed(&now), ["base generation", "module library"]);
        assert_eq!(
            tofu_version(r#"{"terraform_version":"1.12.6","platform":"linux_amd64"}"#).as_deref(),
            Some("1.12.6")
        );
        assert_eq!(tofu_version("not json"), None);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
