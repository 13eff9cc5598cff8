//! Physical names: deterministic, unique per tenant and instance, and safe for cloud
//! naming rules (lowercase letters, digits and `-`, starting with a letter, at most 63
//! characters, always ending in a hash of tenant, instance and resource).
use crate::hash::sha256_hex;

/// Longest physical name.
pub const MAX_PHYSICAL_NAME: usize = 63;
const SUFFIX_LEN: usize = 8;

/// `<instance>-<resource>` made safe and cut to fit, then `-<8 hex of
/// sha256(tenant, instance id, resource)>`. The suffix keeps names unique across tenants
/// and instances even when sanitizing or cutting makes two bases equal.
pub fn physical_name(
    tenant_id: &str,
    instance_id: &str,
    instance_name: &str,
    resource: &str,
) -> String {
    let mut base = String::new();
    for c in format!("{instance_name}-{resource}").chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            base.push(c);
        } else if !base.ends_with('-') {
            base.push('-');
        }
    }
    let mut base = base.trim_matches('-').to_owned();
    if !base.starts_with(|c: char| c.is_ascii_lowercase()) {
        base.insert_str(0, "r-");
    }
    base.truncate(MAX_PHYSICAL_NAME - SUFFIX_LEN - 1);
    let base = base.trim_end_matches('-');
    let digest = sha256_hex(format!("{tenant_id}\0{instance_id}\0{resource}").as_bytes());
    format!("{base}-{}", &digest[..SUFFIX_LEN])
}

/// The state key of a resource.
pub fn state_key(physical_name: &str) -> String {
    format!("cairn/{physical_name}.tfstate")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_bounded_and_unique() {
        let a = physical_name("t1", "i1", "My App!!", "db");
        assert!(a.starts_with("my-app-db-"), "{a}");
        assert_eq!(a, physical_name("t1", "i1", "My App!!", "db"));
        assert_ne!(a, physical_name("t2", "i1", "My App!!", "db"));
        assert_ne!(a, physical_name("t1", "i2", "My App!!", "db"));
        let long = physical_name("t", "i", &"x".repeat(200), "resource");
        assert_eq!(long.len(), MAX_PHYSICAL_NAME);
        assert!(
            long.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        let digits = physical_name("t", "i", "1", "_");
        assert!(digits.starts_with("r-1-"), "{digits}");
    }
}
