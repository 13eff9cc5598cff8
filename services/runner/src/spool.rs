//! The spool: `errored.tfstate` files tofu left behind that the coordinator has not yet
//! confirmed (`Quarantine`), kept on the runner's own disk (`CAIRN_RUNNER_SPOOL_DIR`, outside
//! any work directory) so that neither a failed call nor a stopped runner drops one. A file is
//! written here before it is first sent and removed once the coordinator has confirmed it; a
//! restarted runner re-sends what is left before it takes new work. The directory is 0700,
//! every file 0600; their contents are state and never logged.
//!
//! A file is named `<run_id>.<attempt>.<sha256>.tfstate`: what `Quarantine` needs besides the
//! bytes, and (with the coordinator idempotent on run, attempt and sha256) a re-send of the
//! same file after a lost response is stored once.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::executor::RunId;
use crate::plan_tags;

const SUFFIX: &str = ".tfstate";

/// Why the spool could not be used.
#[derive(Debug, thiserror::Error)]
#[error("spool {op} {}", path.display())]
pub struct SpoolError {
    op: &'static str,
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SpoolError {
    let path = path.to_path_buf();
    move |source| SpoolError { op, path, source }
}

/// The spool directory.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
}

/// One spooled `errored.tfstate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolEntry {
    /// The run whose attempt left it.
    pub run_id: RunId,
    /// The attempt.
    pub attempt: u32,
    /// sha256 (lowercase hex) of the file.
    pub sha256: String,
    path: PathBuf,
}

impl Spool {
    /// Opens (creating it, mode 0700) the spool directory `dir`; an existing one is made 0700.
    pub fn open(dir: &Path) -> Result<Self, SpoolError> {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io("restrict", dir))?;
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keeps `state`, left by `attempt` of `run_id`, durably (written to a temporary file,
    /// synced, renamed); the same file again is the same entry.
    pub async fn put(
        &self,
        run_id: RunId,
        attempt: u32,
        state: &[u8],
    ) -> Result<SpoolEntry, SpoolError> {
        let sha256 = plan_tags::sha256_hex(state);
        let path = self
            .dir
            .join(format!("{run_id}.{attempt}.{sha256}{SUFFIX}"));
        let tmp = self.dir.join(format!(".{run_id}.{attempt}.{sha256}.tmp"));
        let bytes = state.to_vec();
        let (dir, final_path) = (self.dir.clone(), path.clone());
        tokio::task::spawn_blocking(move || write_durably(&dir, &tmp, &final_path, &bytes))
            .await
            .map_err(|e| SpoolError {
                op: "write",
                path: path.clone(),
                source: std::io::Error::other(e),
            })??;
        Ok(SpoolEntry {
            run_id,
            attempt,
            sha256,
            path,
        })
    }

    /// The spooled files, oldest name first; files that are not spool entries are skipped
    /// (and a leftover temporary file of an interrupted `put` is removed).
    pub async fn list(&self) -> Result<Vec<SpoolEntry>, SpoolError> {
        let mut dir = tokio::fs::read_dir(&self.dir)
            .await
            .map_err(io("read", &self.dir))?;
        let mut out = Vec::new();
        while let Some(e) = dir.next_entry().await.map_err(io("read", &self.dir))? {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.ends_with(".tmp") {
                let _ = tokio::fs::remove_file(e.path()).await;
                continue;
            }
            if let Some(entry) = parse(&name, e.path()) {
                out.push(entry);
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// The bytes of a spooled file.
    pub async fn read(&self, entry: &SpoolEntry) -> Result<Vec<u8>, SpoolError> {
        tokio::fs::read(&entry.path)
            .await
            .map_err(io("read", &entry.path))
    }

    /// Removes an entry the coordinator has confirmed (gone already is fine).
    pub async fn remove(&self, entry: &SpoolEntry) -> Result<(), SpoolError> {
        match tokio::fs::remove_file(&entry.path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io("remove", &entry.path)(e)),
        }
    }
}

fn write_durably(dir: &Path, tmp: &Path, path: &Path, bytes: &[u8]) -> Result<(), SpoolError> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(tmp)
        .map_err(io("create", tmp))?;
    file.write_all(bytes).map_err(io("write", tmp))?;
    file.sync_all().map_err(io("sync", tmp))?;
    drop(file);
    std::fs::rename(tmp, path).map_err(io("rename", path))?;
    // The rename itself is durable once the directory is synced.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn parse(name: &str, path: PathBuf) -> Option<SpoolEntry> {
    let stem = name.strip_suffix(SUFFIX)?;
    let mut parts = stem.split('.');
    let (run, attempt, sha256) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || sha256.len() != 64
        || !sha256.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    Some(SpoolEntry {
        run_id: RunId::parse("run_id", run).ok()?,
        attempt: attempt.parse().ok()?,
        sha256: sha256.to_owned(),
        path,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn entries_are_private_durable_and_listed_until_removed() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("spool");
        let spool = Spool::open(&dir).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        let run = RunId::new();
        let a = spool.put(run, 2, b"{\"serial\":3}").await.unwrap();
        // The same file again is the same entry.
        assert_eq!(spool.put(run, 2, b"{\"serial\":3}").await.unwrap(), a);
        let b = spool.put(run, 2, b"{\"serial\":4}").await.unwrap();
        assert_eq!(mode(&a.path), 0o600);
        std::fs::write(dir.join("not-an-entry"), b"x").unwrap();
        std::fs::write(dir.join(".leftover.tmp"), b"x").unwrap();
        let listed = spool.list().await.unwrap();
        assert_eq!(listed.len(), 2, "{listed:?}");
        assert!(listed.contains(&a) && listed.contains(&b));
        assert_eq!((a.run_id, a.attempt), (run, 2));
        assert_eq!(spool.read(&a).await.unwrap(), b"{\"serial\":3}");
        assert!(!dir.join(".leftover.tmp").exists());
        spool.remove(&a).await.unwrap();
        spool.remove(&a).await.unwrap();
        assert_eq!(spool.list().await.unwrap(), vec![b]);
        // Reopening keeps what is there and restricts the directory again.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let again = Spool::open(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(again.list().await.unwrap().len(), 1);
    }
}
