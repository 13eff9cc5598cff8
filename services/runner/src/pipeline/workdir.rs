//! The files of a run's work directory that the runner itself writes and reads: the root
//! config and a saved plan going in; the plan, the provider lock file and an
//! `errored.tfstate` coming out.

use std::path::Path;

use super::PipelineError;
use crate::executor::ExecutorError;

/// The root config file name in the work directory.
pub const ROOT_CONFIG_FILE: &str = "main.tf.json";
/// The saved plan file name in the work directory.
pub const PLAN_FILE: &str = "plan.tfplan";
/// The provider lock file tofu reads and writes.
pub const LOCK_FILE: &str = ".terraform.lock.hcl";
/// The state tofu leaves behind when it cannot persist it.
pub const ERRORED_STATE_FILE: &str = "errored.tfstate";

/// Writes `bytes` to `path`.
pub(super) async fn write(path: &Path, bytes: &[u8]) -> Result<(), PipelineError> {
    tokio::fs::write(path, bytes)
        .await
        .map_err(ExecutorError::io("write", path))
        .map_err(PipelineError::from)
}

/// Reads `path`, which must exist.
pub(super) async fn read(path: &Path) -> Result<Vec<u8>, PipelineError> {
    tokio::fs::read(path)
        .await
        .map_err(ExecutorError::io("read", path))
        .map_err(PipelineError::from)
}

/// Reads `path`; `None` when it does not exist.
pub(super) async fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, PipelineError> {
    match tokio::fs::read(path).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ExecutorError::io("read", path)(e).into()),
    }
}
