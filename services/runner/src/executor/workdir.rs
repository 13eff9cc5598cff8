//! The per-run work directories on the runner's side: `<root>/<instance>/<run_id>`.

use std::path::{Path, PathBuf};

use super::error::ExecutorError;
use super::spec::{RunId, RunnerInstance};

/// Where the work directories of one runner instance live.
#[derive(Debug, Clone)]
pub(crate) struct WorkDirs {
    base: PathBuf,
}

impl WorkDirs {
    pub(crate) fn new(root: &Path, instance: &RunnerInstance) -> Self {
        Self {
            base: root.join(instance.as_str()),
        }
    }

    pub(crate) fn path(&self, run_id: &RunId) -> PathBuf {
        self.base.join(run_id.to_string())
    }

    /// Creates the run's directory empty (mode 0700), removing a leftover one first.
    pub(crate) async fn create_empty(&self, run_id: &RunId) -> Result<PathBuf, ExecutorError> {
        let dir = self.path(run_id);
        remove_if_present(&dir).await?;
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(ExecutorError::io("create work directory", &dir))?;
        set_private(&dir).await?;
        Ok(dir)
    }

    /// Removes the run's directory if it exists.
    pub(crate) async fn remove(&self, run_id: &RunId) -> Result<(), ExecutorError> {
        remove_if_present(&self.path(run_id)).await
    }

    /// Removes every work directory of the instance.
    pub(crate) async fn remove_all(&self) -> Result<(), ExecutorError> {
        remove_if_present(&self.base).await
    }

    /// Fails unless the run's directory exists.
    pub(crate) async fn existing(&self, run_id: &RunId) -> Result<PathBuf, ExecutorError> {
        let dir = self.path(run_id);
        match tokio::fs::metadata(&dir).await {
            Ok(m) if m.is_dir() => Ok(dir),
            _ => Err(ExecutorError::NotPrepared(run_id.to_string())),
        }
    }
}

async fn set_private(dir: &Path) -> Result<(), ExecutorError> {
    use std::os::unix::fs::PermissionsExt;
    tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .await
        .map_err(ExecutorError::io("restrict work directory", dir))
}

async fn remove_if_present(dir: &Path) -> Result<(), ExecutorError> {
    match tokio::fs::remove_dir_all(dir).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ExecutorError::io("remove work directory", dir)(e)),
    }
}
