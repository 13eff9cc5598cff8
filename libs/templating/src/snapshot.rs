//! `ResolvedInfrastructure`: the immutable result of resolving a template version for one
//! instance, environment and target; what the workflow applies exactly as previewed.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hash::{canonical_json, sha256_hex};

/// Version of the snapshot format (part of the hash).
pub const SNAPSHOT_FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub format: u32,
    pub template: String,
    /// The content hash of the template version.
    pub template_version: String,
    pub environment: String,
    pub tenant_id: String,
    pub instance_id: String,
    pub instance_name: String,
    /// Fingerprint of the module library the snapshot was resolved against.
    pub module_library: String,
    /// In dependency order: every resource comes after the ones it depends on.
    pub resources: Vec<ResolvedResource>,
    /// The instance's outputs, in document order. Left out of the JSON when there are none,
    /// so a snapshot of a template without outputs keeps the hash it had before outputs
    /// existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<InstanceOutput>,
}

/// An output of the instance: the value of one module output of one resource, read from
/// that resource's state after a deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceOutput {
    pub name: String,
    pub description: String,
    pub resource: String,
    pub output: String,
    /// Declared sensitive, or the module output is: its value is never shown.
    pub sensitive: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedResource {
    pub name: String,
    /// `<family>/<kind dir>`: the root config's source is `./modules/<module>`.
    pub module: String,
    /// The module's logical kind.
    pub kind: String,
    pub physical_name: String,
    /// `cairn/<physical-name>.tfstate`.
    pub state_key: String,
    pub depends_on: Vec<String>,
    pub inputs: BTreeMap<String, Binding>,
    /// Root variable name → the reference the runner resolves into `TF_VAR_<name>`.
    pub sensitive_variables: BTreeMap<String, String>,
    /// Module outputs re-exported by the root config → whether sensitive.
    pub outputs: BTreeMap<String, bool>,
}

/// Where a module input's value comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum Binding {
    /// A value known at resolve time (written escaped by the renderer).
    Literal { value: serde_json::Value },
    /// One output of an upstream resource, filled at run time.
    Output { resource: String, output: String },
    /// The listed (non-sensitive) outputs of an upstream resource as one object.
    Outputs {
        resource: String,
        outputs: Vec<String>,
    },
    /// A sensitive root variable (`var.<variable>`), its value from `TF_VAR_<variable>`.
    Sensitive { variable: String },
}

/// Why a stored snapshot cannot be read back.
#[derive(Debug, thiserror::Error)]
#[error("snapshot document: {0}")]
pub struct SnapshotDecodeError(#[from] serde_json::Error);

impl Snapshot {
    /// The canonical JSON of the snapshot (sorted keys, no whitespace).
    pub fn canonical_json(&self) -> String {
        // Serializing these plain structs cannot fail: every map key is a string.
        let v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        canonical_json(&v)
    }

    /// sha256 of the canonical JSON: equal inputs give equal hashes on any machine.
    pub fn hash(&self) -> String {
        sha256_hex(self.canonical_json().as_bytes())
    }

    pub fn from_json(text: &str) -> Result<Snapshot, SnapshotDecodeError> {
        Ok(serde_json::from_str(text)?)
    }

    pub fn resource(&self, name: &str) -> Option<&ResolvedResource> {
        self.resources.iter().find(|r| r.name == name)
    }
}
