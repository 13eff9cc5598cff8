//! The local directory object store: each version is a file `<dir>/<key>/<version_id>`,
//! written to a temporary file, synced, then hard-linked into place so it is never
//! overwritten and never seen half-written.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use tokio::io::AsyncWriteExt;

use super::key::{VERSION_ID_LEN, is_version_id};
use super::{ObjectError, ObjectStore, ObjectVersion, validate_key, validate_new_key};
use crate::BoxFuture;

/// An [`ObjectStore`] in a local directory (the embedded default).
///
/// Creating a key is atomic within one process; several processes sharing a directory
/// must settle races elsewhere (as with S3, Postgres settles them).
#[derive(Debug)]
pub struct FileObjectStore {
    root: PathBuf,
    /// Serialises the check-then-create of `put_new` and the directory cleanup of
    /// `delete` within this process.
    write_lock: tokio::sync::Mutex<()>,
}

fn random_hex(bytes: usize) -> Result<String, ObjectError> {
    let mut buf = vec![0u8; bytes];
    aws_lc_rs::rand::fill(&mut buf).map_err(|_| {
        ObjectError::Unavailable("file store could not obtain random bytes".to_owned())
    })?;
    Ok(hex::encode(buf))
}

impl FileObjectStore {
    /// A store rooted at `dir`. Nothing is touched until the first call; `self_check`
    /// creates the directory.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            root: dir.into(),
            write_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Validates `key` for this store: the rules of a new key on every call (a component
    /// that looks like a version id would collide with the version files of a shorter key,
    /// so no such key can exist here).
    fn key_dir(&self, key: &str) -> Result<PathBuf, ObjectError> {
        validate_new_key(key)?;
        Ok(self.root.join(key))
    }

    fn io_unavailable(&self, err: &std::io::Error, doing: &str) -> ObjectError {
        ObjectError::Unavailable(format!("file store I/O error: {err} (while {doing})"))
    }

    /// Fails unless the root directory exists: a missing root (e.g. an unmounted volume) is
    /// an environment problem, never proof that an object is gone.
    async fn require_root(&self) -> Result<(), ObjectError> {
        match tokio::fs::metadata(&self.root).await {
            Ok(meta) if meta.is_dir() => Ok(()),
            Ok(_) => Err(ObjectError::Unavailable(format!(
                "file store path {} is not a directory",
                self.root.display()
            ))),
            Err(err) if err.kind() == ErrorKind::NotFound => {
                Err(ObjectError::Unavailable(format!(
                    "file store directory {} does not exist",
                    self.root.display()
                )))
            }
            Err(err) => {
                Err(self
                    .io_unavailable(&err, &format!("checking directory {}", self.root.display())))
            }
        }
    }

    /// True when `dir` holds at least one version file.
    async fn has_version(&self, dir: &Path) -> Result<bool, ObjectError> {
        let doing = || format!("reading directory {}", dir.display());
        let mut entries = match tokio::fs::read_dir(dir).await {
            Ok(entries) => entries,
            Err(err) if err.kind() == ErrorKind::NotFound => return Ok(false),
            Err(err) => return Err(self.io_unavailable(&err, &doing())),
        };
        while let Some(entry) = entries
            .next_entry()
            .await
            .map_err(|err| self.io_unavailable(&err, &doing()))?
        {
            let is_file = entry
                .file_type()
                .await
                .map_err(|err| self.io_unavailable(&err, &doing()))?
                .is_file();
            if is_file && entry.file_name().to_str().is_some_and(is_version_id) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn put_new_impl(&self, key: &str, body: Bytes) -> Result<ObjectVersion, ObjectError> {
        let dir = self.key_dir(key)?;
        let _guard = self.write_lock.lock().await;
        self.require_root().await?;
        if self.has_version(&dir).await? {
            return Err(ObjectError::AlreadyExists {
                key: key.to_owned(),
            });
        }
        let doing = || format!("writing {}", dir.display());
        tokio::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .await
            .map_err(|err| self.io_unavailable(&err, &doing()))?;

        let version_id = random_hex(VERSION_ID_LEN / 2)?;
        let temp = dir.join(format!(".tmp-{}", random_hex(8)?));
        let target = dir.join(&version_id);
        let written = async {
            let mut file = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)
                .await?;
            file.write_all(&body).await?;
            file.sync_all().await?;
            drop(file);
            tokio::fs::hard_link(&temp, &target).await?;
            tokio::fs::File::open(&dir).await?.sync_all().await
        }
        .await;
        let removed = tokio::fs::remove_file(&temp).await;
        written.map_err(|err| self.io_unavailable(&err, &doing()))?;
        if let Err(err) = removed
            && err.kind() != ErrorKind::NotFound
        {
            tracing::warn!(path = %temp.display(), error = %err, "could not remove temporary file");
        }
        tracing::debug!(key, version_id, size = body.len(), "stored file object");
        Ok(ObjectVersion {
            key: key.to_owned(),
            version_id,
        })
    }

    async fn get_impl(&self, key: &str, version_id: &str) -> Result<Bytes, ObjectError> {
        let dir = self.key_dir(key)?;
        let not_found = || ObjectError::NotFound {
            key: key.to_owned(),
            version_id: version_id.to_owned(),
        };
        if !is_version_id(version_id) {
            // The file store never hands out such an id, so no object can carry it.
            self.require_root().await?;
            return Err(not_found());
        }
        let path = dir.join(version_id);
        match tokio::fs::read(&path).await {
            Ok(bytes) => Ok(Bytes::from(bytes)),
            Err(err) if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                self.require_root().await?;
                tracing::warn!(key, version_id, "file object version is missing");
                Err(not_found())
            }
            Err(err) => Err(self.io_unavailable(&err, &format!("reading {}", path.display()))),
        }
    }

    async fn confirm_impl(&self, key: &str, version_id: &str, len: u64) -> bool {
        let Ok(dir) = self.key_dir(key) else {
            return false;
        };
        if !is_version_id(version_id) {
            return false;
        }
        tokio::fs::metadata(dir.join(version_id))
            .await
            .is_ok_and(|meta| meta.is_file() && meta.len() == len)
    }

    async fn delete_impl(&self, key: &str, version_id: &str) -> Result<(), ObjectError> {
        let dir = self.key_dir(key)?;
        let _guard = self.write_lock.lock().await;
        self.require_root().await?;
        if !is_version_id(version_id) {
            return Ok(());
        }
        let path = dir.join(version_id);
        match tokio::fs::remove_file(&path).await {
            Ok(()) => tracing::debug!(key, version_id, "deleted file object version"),
            Err(err) if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {}
            Err(err) => {
                return Err(self.io_unavailable(&err, &format!("deleting {}", path.display())));
            }
        }
        // Drop the key's directory and emptied parents; a non-empty one stays.
        let mut current = Some(dir.as_path());
        while let Some(candidate) = current {
            if candidate == self.root || tokio::fs::remove_dir(candidate).await.is_err() {
                break;
            }
            current = candidate.parent();
        }
        Ok(())
    }

    async fn list_impl(&self, prefix: &str) -> Result<Vec<ObjectVersion>, ObjectError> {
        self.require_root().await?;
        // Start at the deepest directory the prefix fully names, when it is a valid key.
        let start = match prefix.rsplit_once('/') {
            Some((dir, _)) if validate_key(dir).is_ok() => self.root.join(dir),
            _ => self.root.clone(),
        };
        let mut found = Vec::new();
        let mut pending = vec![start];
        while let Some(dir) = pending.pop() {
            let doing = || format!("listing {}", dir.display());
            let mut entries = match tokio::fs::read_dir(&dir).await {
                Ok(entries) => entries,
                Err(err)
                    if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) =>
                {
                    continue;
                }
                Err(err) => return Err(self.io_unavailable(&err, &doing())),
            };
            while let Some(entry) = entries
                .next_entry()
                .await
                .map_err(|err| self.io_unavailable(&err, &doing()))?
            {
                let file_type = entry
                    .file_type()
                    .await
                    .map_err(|err| self.io_unavailable(&err, &doing()))?;
                let path = entry.path();
                if file_type.is_dir() {
                    pending.push(path);
                    continue;
                }
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                if !file_type.is_file() || !is_version_id(&name) {
                    continue;
                }
                let Some(key) = dir
                    .strip_prefix(&self.root)
                    .ok()
                    .and_then(|rel| rel.to_str())
                    .map(str::to_owned)
                else {
                    continue;
                };
                if !key.is_empty() && key.starts_with(prefix) {
                    found.push(ObjectVersion {
                        key,
                        version_id: name,
                    });
                }
            }
        }
        found.sort();
        Ok(found)
    }

    /// Removes `.tmp-*` (a put killed before it linked its version) and `.self-check-*`
    /// files whose last change is older than `older_than`, then the key directories that
    /// left empty. Under the write lock, so no put of this process is between creating a
    /// key's directory and its temporary file.
    async fn sweep_partial_impl(
        &self,
        older_than: std::time::Duration,
    ) -> Result<usize, ObjectError> {
        let _guard = self.write_lock.lock().await;
        self.require_root().await?;
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        let mut emptied: Vec<PathBuf> = Vec::new();
        let mut pending = vec![self.root.clone()];
        while let Some(dir) = pending.pop() {
            let doing = || format!("sweeping {}", dir.display());
            let mut entries = match tokio::fs::read_dir(&dir).await {
                Ok(entries) => entries,
                Err(err) if err.kind() == ErrorKind::NotFound => continue,
                Err(err) => return Err(self.io_unavailable(&err, &doing())),
            };
            while let Some(entry) = entries
                .next_entry()
                .await
                .map_err(|err| self.io_unavailable(&err, &doing()))?
            {
                let meta = match entry.metadata().await {
                    Ok(meta) => meta,
                    Err(err) if err.kind() == ErrorKind::NotFound => continue,
                    Err(err) => return Err(self.io_unavailable(&err, &doing())),
                };
                let path = entry.path();
                if meta.is_dir() {
                    pending.push(path);
                    continue;
                }
                let partial = entry
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(".tmp-") || n.starts_with(".self-check-"));
                let old = meta
                    .modified()
                    .ok()
                    .and_then(|m| now.duration_since(m).ok())
                    .is_some_and(|age| age >= older_than);
                if !(meta.is_file() && partial && old) {
                    continue;
                }
                match tokio::fs::remove_file(&path).await {
                    Ok(()) => {
                        tracing::info!(path = %path.display(), "removed a partial file left by an interrupted write");
                        removed += 1;
                        emptied.push(dir.clone());
                    }
                    Err(err) if err.kind() == ErrorKind::NotFound => {}
                    Err(err) => {
                        return Err(
                            self.io_unavailable(&err, &format!("removing {}", path.display()))
                        );
                    }
                }
            }
        }
        // Drop the directories (and emptied parents) that only held partial files.
        for dir in emptied {
            let mut current = Some(dir.as_path());
            while let Some(candidate) = current {
                if candidate == self.root || tokio::fs::remove_dir(candidate).await.is_err() {
                    break;
                }
                current = candidate.parent();
            }
        }
        Ok(removed)
    }

    async fn self_check_impl(&self) -> Result<(), ObjectError> {
        let doing = || format!("checking that {} is writable", self.root.display());
        tokio::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.root)
            .await
            .map_err(|err| self.io_unavailable(&err, &doing()))?;
        let probe = self.root.join(format!(".self-check-{}", random_hex(8)?));
        let written = async {
            let mut file = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&probe)
                .await?;
            file.write_all(b"cairn self-check").await?;
            file.sync_all().await
        }
        .await;
        let removed = tokio::fs::remove_file(&probe).await;
        written.map_err(|err| self.io_unavailable(&err, &doing()))?;
        removed.map_err(|err| self.io_unavailable(&err, &doing()))?;
        Ok(())
    }
}

impl ObjectStore for FileObjectStore {
    fn put_new<'a>(
        &'a self,
        key: &'a str,
        body: Bytes,
    ) -> BoxFuture<'a, Result<ObjectVersion, ObjectError>> {
        Box::pin(self.put_new_impl(key, body))
    }

    fn get<'a>(
        &'a self,
        key: &'a str,
        version_id: &'a str,
    ) -> BoxFuture<'a, Result<Bytes, ObjectError>> {
        Box::pin(self.get_impl(key, version_id))
    }

    fn confirm<'a>(&'a self, key: &'a str, version_id: &'a str, len: u64) -> BoxFuture<'a, bool> {
        Box::pin(self.confirm_impl(key, version_id, len))
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        version_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ObjectError>> {
        Box::pin(self.delete_impl(key, version_id))
    }

    fn list<'a>(
        &'a self,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ObjectVersion>, ObjectError>> {
        Box::pin(self.list_impl(prefix))
    }

    fn self_check(&self) -> BoxFuture<'_, Result<(), ObjectError>> {
        Box::pin(self.self_check_impl())
    }

    fn sweep_partial(
        &self,
        older_than: std::time::Duration,
    ) -> BoxFuture<'_, Result<usize, ObjectError>> {
        Box::pin(self.sweep_partial_impl(older_than))
    }

    fn describe(&self) -> String {
        format!("file://{}", self.root.display())
    }
}
