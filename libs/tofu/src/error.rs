//! Errors from reading OpenTofu state documents.

use std::fmt;

/// Which kind of document an error was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    /// A plaintext state file (version 3 or 4).
    Plain,
    /// An OpenTofu native state encryption envelope.
    Encrypted,
}

impl fmt::Display for DocumentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DocumentKind::Plain => "state",
            DocumentKind::Encrypted => "encrypted state envelope",
        })
    }
}

/// Why a state document could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// The document is empty or only whitespace.
    #[error("state document is empty")]
    Empty,
    /// The bytes are not JSON. `line` and `column` are 1-based, as serde_json reports them
    /// (column 0 means the input ended before the value did).
    #[error("state is not valid JSON at line {line}, column {column}: {message}")]
    NotJson {
        line: usize,
        column: usize,
        message: String,
    },
    /// The document is JSON, but not an object.
    #[error("state must be a JSON object, found {found}")]
    NotAnObject { found: &'static str },
    /// A plaintext state without `"version"`.
    #[error("state has no \"version\" field")]
    MissingVersion,
    /// A state format version this crate does not read.
    #[error("state format version {version} is not supported (Cairn reads versions 3 and 4)")]
    UnsupportedVersion { version: u64 },
    /// `"serial"` is absent or null.
    #[error("{kind} has no \"serial\" field")]
    MissingSerial { kind: DocumentKind },
    /// `"lineage"` is absent or null.
    #[error("{kind} has no \"lineage\" field")]
    MissingLineage { kind: DocumentKind },
    /// `"lineage"` is the empty string.
    #[error("{kind} has an empty \"lineage\"")]
    EmptyLineage { kind: DocumentKind },
    /// Another required field is absent or null.
    #[error("{kind} has no \"{field}\" field")]
    MissingField {
        kind: DocumentKind,
        field: &'static str,
    },
    /// A field is present but has the wrong shape.
    #[error("field \"{field}\" of the {kind} is invalid: {message}")]
    InvalidField {
        kind: DocumentKind,
        field: &'static str,
        message: String,
    },
    /// An encryption envelope with an `encryption_version` other than `v0`.
    #[error(
        "encrypted state envelope has encryption_version {version:?}, only \"v0\" is supported"
    )]
    UnsupportedEncryptionVersion { version: String },
    /// The full v4 model was asked for, but the document is an encryption envelope.
    #[error("state is an encrypted envelope; its contents cannot be read without the key")]
    Encrypted,
    /// The document is a v4 state but does not match the v4 schema. `path` locates the
    /// offending part, e.g. `resources[2].instances[0]` or `outputs.name` (empty: top level).
    #[error("state does not match the version 4 schema at {}: {message}", if path.is_empty() { "the top level" } else { path })]
    Schema { path: String, message: String },
}

/// serde_json appends " at line L column C" to its messages; the position is reported in
/// separate fields, so it is removed from the text.
pub(crate) fn message_without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    match text.strip_suffix(&suffix) {
        Some(message) => message.to_owned(),
        None => text,
    }
}

/// Why a plan JSON document could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("plan document is empty")]
    Empty,
    /// `line` and `column` are 1-based, as serde_json reports them.
    #[error("plan is not valid JSON at line {line}, column {column}: {message}")]
    NotJson {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("plan must be a JSON object")]
    NotAnObject,
    #[error("plan has no \"format_version\" field")]
    MissingFormatVersion,
    /// A JSON document with a `format_version` but no `planned_values`, e.g. the JSON of a
    /// state: not a plan.
    #[error("document has no \"planned_values\" field, so it is not a plan")]
    MissingPlannedValues,
    #[error("plan format version {version:?} is not supported (Cairn reads 1.x)")]
    UnsupportedFormatVersion { version: String },
    #[error("plan does not match the plan JSON schema: {message}")]
    Schema { message: String },
}
