//! The object key rules shared by every store, so that a key valid for S3 is valid for a
//! local directory and the other way round.

use super::ObjectError;

/// Longest accepted key, in bytes (S3's limit).
pub const MAX_KEY_BYTES: usize = 1024;

/// Checks that `key` is a relative `/`-separated path of non-empty components, none of them
/// `.`/`..` or starting with `.`, without control characters or backslashes.
pub fn validate_key(key: &str) -> Result<(), ObjectError> {
    let invalid = |reason| {
        Err(ObjectError::InvalidKey {
            key: key.to_owned(),
            reason,
        })
    };
    if key.is_empty() {
        return invalid("empty");
    }
    if key.len() > MAX_KEY_BYTES {
        return invalid("longer than 1024 bytes");
    }
    if key.chars().any(|c| c.is_control() || c == '\\') {
        return invalid("contains a control character or a backslash");
    }
    for component in key.split('/') {
        if component.is_empty() {
            return invalid("has an empty path component (leading, trailing or double '/')");
        }
        if component.starts_with('.') {
            return invalid("has a path component starting with '.'");
        }
    }
    Ok(())
}
