//! OpenTofu native state encryption as it travels over the wire:
//! `{"serial":N,"lineage":"…","meta":{…},"encrypted_data":"<base64>","encryption_version":"v0"}`.
//!
//! OpenTofu copies `serial` and `lineage` out of the plaintext state next to the ciphertext;
//! they are all a server can see. Releases that predate this pass-through write envelopes
//! without them, which [`crate::inspect_state`] reports as a missing serial.

use serde_json::{Map, Value};

use crate::error::{DocumentKind, StateError};
use crate::fields::TopLevel;
use crate::header::{StateHeader, read_serial_and_lineage};

/// The only envelope version OpenTofu writes and reads.
pub const ENCRYPTION_VERSION: &str = "v0";

const KIND: DocumentKind = DocumentKind::Encrypted;

/// An envelope is recognised by either of its own fields; OpenTofu itself keys on
/// `encryption_version`, the brief for the coordinator on `encrypted_data`.
pub(crate) fn is_envelope(top: &TopLevel<'_>) -> bool {
    top.contains("encrypted_data") || top.contains("encryption_version")
}

/// Validates the envelope's own fields and reads the plaintext serial and lineage.
pub(crate) fn read_header(top: &TopLevel<'_>) -> Result<StateHeader, StateError> {
    let version =
        top.decode::<String>("encryption_version", KIND)?
            .ok_or(StateError::MissingField {
                kind: KIND,
                field: "encryption_version",
            })?;
    if version != ENCRYPTION_VERSION {
        return Err(StateError::UnsupportedEncryptionVersion { version });
    }
    let data = top
        .decode::<String>("encrypted_data", KIND)?
        .ok_or(StateError::MissingField {
            kind: KIND,
            field: "encrypted_data",
        })?;
    check_base64(&data)?;
    // Key provider metadata: real OpenTofu writes base64 strings, hand-made samples objects.
    top.decode::<Map<String, Value>>("meta", KIND)?;
    let (serial, lineage) = read_serial_and_lineage(top, KIND)?;
    Ok(StateHeader {
        serial,
        lineage,
        version: None,
    })
}

/// `encrypted_data` is a Go `[]byte`, which `encoding/json` writes as padded standard base64.
fn check_base64(data: &str) -> Result<(), StateError> {
    let invalid = |message: &str| StateError::InvalidField {
        kind: KIND,
        field: "encrypted_data",
        message: message.to_owned(),
    };
    if data.is_empty() {
        return Err(invalid("empty"));
    }
    if !data.len().is_multiple_of(4) {
        return Err(invalid("base64 length is not a multiple of 4"));
    }
    let body = data.trim_end_matches('=');
    if data.len() - body.len() > 2 {
        return Err(invalid("too much base64 padding"));
    }
    if !body
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    {
        return Err(invalid("not standard base64"));
    }
    Ok(())
}
