//! The one entry point the state coordinator uses: identify a state document written by
//! OpenTofu (plaintext or encrypted) and read what the coordinator needs from it.

use crate::envelope;
use crate::error::{DocumentKind, StateError};
use crate::fields::TopLevel;
use crate::header::{StateHeader, read_serial_and_lineage, read_version};
use crate::outputs::{self, OutputValue, PublicOutput};

/// A state document as the coordinator sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum StateDocument {
    /// A plaintext state (format version 3 or 4) with its root module outputs.
    Plain {
        header: StateHeader,
        outputs: Vec<OutputValue>,
    },
    /// An OpenTofu native encryption envelope: only serial and lineage are visible.
    Encrypted(StateHeader),
}

impl StateDocument {
    pub fn header(&self) -> &StateHeader {
        match self {
            StateDocument::Plain { header, .. } | StateDocument::Encrypted(header) => header,
        }
    }

    /// Root module outputs ordered by name; empty for an encrypted document.
    pub fn outputs(&self) -> &[OutputValue] {
        match self {
            StateDocument::Plain { outputs, .. } => outputs,
            StateDocument::Encrypted(_) => &[],
        }
    }

    /// [`Self::outputs`] with sensitive values removed.
    pub fn public_outputs(&self) -> Vec<PublicOutput> {
        outputs::public_outputs(self.outputs())
    }

    pub fn is_encrypted(&self) -> bool {
        matches!(self, StateDocument::Encrypted(_))
    }
}

/// Reads serial, lineage and outputs from a state document.
///
/// Accepts plaintext states of format version 3 and 4 and `v0` encryption envelopes. The
/// serial must be a non-negative integer and the lineage a non-empty string: OpenTofu always
/// writes both when it persists a state remotely. Resources are scanned for well-formed JSON
/// but not decoded.
pub fn inspect_state(bytes: &[u8]) -> Result<StateDocument, StateError> {
    let top = TopLevel::parse(bytes)?;
    if envelope::is_envelope(&top) {
        return envelope::read_header(&top).map(StateDocument::Encrypted);
    }
    let version = read_version(&top)?;
    type ReadOutputs = fn(&TopLevel<'_>) -> Result<Vec<OutputValue>, StateError>;
    let (version, read_outputs): (u32, ReadOutputs) = match version {
        4 => (4, outputs::read_v4),
        3 => (3, outputs::read_v3),
        other => return Err(StateError::UnsupportedVersion { version: other }),
    };
    let (serial, lineage) = read_serial_and_lineage(&top, DocumentKind::Plain)?;
    let outputs = read_outputs(&top)?;
    Ok(StateDocument::Plain {
        header: StateHeader {
            serial,
            lineage,
            version: Some(version),
        },
        outputs,
    })
}
