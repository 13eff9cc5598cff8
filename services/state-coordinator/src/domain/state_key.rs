//! The state key of a resource, confined to `cairn/<physical-name>.tfstate`.

/// The state key of a resource: `cairn/<physical-name>.tfstate`.
pub fn state_key(physical_name: &str) -> Result<String, InvalidPhysicalName> {
    let ok = !physical_name.is_empty()
        && physical_name.len() <= 200
        && physical_name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !physical_name.starts_with('-');
    if ok {
        Ok(format!("cairn/{physical_name}.tfstate"))
    } else {
        Err(InvalidPhysicalName)
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("physical_name must be 1-200 characters of [a-z0-9_-] not starting with '-'")]
pub struct InvalidPhysicalName;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys_are_confined() {
        assert_eq!(state_key("db-main").unwrap(), "cairn/db-main.tfstate");
        for bad in ["", "../x", "A", "a/b", "-x", "a b", "a.b"] {
            assert!(state_key(bad).is_err(), "{bad}");
        }
    }
}
