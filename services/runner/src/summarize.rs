//! `cairn-runner summarize-plan`: the summary and risk of a plan JSON file, as JSON.

use std::path::{Path, PathBuf};

/// Why a plan file could not be summarised. A file that is not a plan is not an error: its
/// summary says the risk is unknown.
#[derive(Debug, thiserror::Error)]
pub enum SummarizeError {
    #[error("read plan file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The summary of the plan JSON (`tofu show -json PLANFILE`) in `bytes`, as one line of JSON:
/// `{"add":N,"change":N,"destroy":N,"replace":[…],"risk":"low|high|unknown","resources":[…]}`.
pub fn summary_json(bytes: &[u8]) -> String {
    cairn_tofu::summarize_plan(bytes).to_json()
}

/// Reads the plan JSON at `path` and prints its summary to stdout.
pub fn print_plan_summary(path: &Path) -> Result<(), SummarizeError> {
    let bytes = std::fs::read(path).map_err(|source| SummarizeError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    println!("{}", summary_json(&bytes));
    Ok(())
}
