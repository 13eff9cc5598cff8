//! The object key rules shared by every store, so that a key valid for S3 is valid for a
//! local directory and the other way round: [`validate_key`] for every call, and for a key
//! written anew ([`validate_new_key`], `put_new`) also the file store's own reservation, so a
//! key scheme that only the file store would refuse fails on S3 as well (in tests, before it
//! reaches a deployment on the embedded default).

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

/// Length of a file-store version id: 32 lowercase hex digits (16 random bytes).
pub(crate) const VERSION_ID_LEN: usize = 32;

/// True when `name` has the shape of a file-store version id.
pub(crate) fn is_version_id(name: &str) -> bool {
    name.len() == VERSION_ID_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The reason a key with a version-id-shaped component is refused.
pub(crate) const VERSION_ID_COMPONENT: &str =
    "has a path component of 32 hex digits, which the file store reserves for version ids";

/// [`validate_key`] plus the rule every store applies to a key written anew: no path
/// component of 32 lowercase hex digits (the file store keeps a key's versions as files of
/// that name inside the key's directory, so such a component would collide with them). Use
/// the hyphenated form of a UUID in keys (`Uuid`'s `Display`), never `simple()`.
pub fn validate_new_key(key: &str) -> Result<(), ObjectError> {
    validate_key(key)?;
    if key.split('/').any(is_version_id) {
        return Err(ObjectError::InvalidKey {
            key: key.to_owned(),
            reason: VERSION_ID_COMPONENT,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_keys_refuse_version_id_components_on_every_store() {
        let simple = "0123456789abcdef0123456789abcdef";
        for key in [
            format!("plans/state/{simple}"),
            format!("{simple}/x"),
            simple.to_owned(),
        ] {
            assert!(validate_key(&key).is_ok(), "{key}");
            assert!(
                matches!(validate_new_key(&key), Err(ObjectError::InvalidKey { .. })),
                "{key}"
            );
        }
        for key in [
            "plans/0b8e2f5e-8d43-4a8e-9d5c-2f0f4b0c9a11/0190f6a4-7c2e-7b3d-9a51-6f8c1d2e3f40",
            "cairn/web.tfstate/g000000000001-0123456789abcdef0123456789abcdef",
            "0123456789ABCDEF0123456789ABCDEF",
            "0123456789abcdef0123456789abcde",
        ] {
            assert!(validate_new_key(key).is_ok(), "{key}");
        }
    }
}
