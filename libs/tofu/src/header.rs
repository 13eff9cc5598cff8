//! The identity of a state snapshot: serial, lineage and format version.

use crate::error::{DocumentKind, StateError};
use crate::fields::TopLevel;

/// What the state coordinator needs to order snapshots: OpenTofu refuses a write with another
/// lineage, and the serial only grows within a lineage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateHeader {
    /// Incremented by OpenTofu on every write that changes the state.
    pub serial: u64,
    /// Identifies the history a snapshot belongs to (a UUID written with the first snapshot).
    /// Never empty.
    pub lineage: String,
    /// The state format version (3 or 4); `None` for an encrypted envelope, whose format
    /// version is inside the ciphertext.
    pub version: Option<u32>,
}

/// Reads the plaintext `"version"` field.
pub(crate) fn read_version(top: &TopLevel<'_>) -> Result<u64, StateError> {
    top.decode::<u64>("version", DocumentKind::Plain)?
        .ok_or(StateError::MissingVersion)
}

/// Reads `"serial"` and a non-empty `"lineage"`.
pub(crate) fn read_serial_and_lineage(
    top: &TopLevel<'_>,
    kind: DocumentKind,
) -> Result<(u64, String), StateError> {
    let serial = top
        .decode::<u64>("serial", kind)?
        .ok_or(StateError::MissingSerial { kind })?;
    let lineage = top
        .decode::<String>("lineage", kind)?
        .ok_or(StateError::MissingLineage { kind })?;
    if lineage.is_empty() {
        return Err(StateError::EmptyLineage { kind });
    }
    Ok((serial, lineage))
}
