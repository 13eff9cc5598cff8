//! Pure values of the service: how a version is named in requests.

/// A version as a request names it: its number or its content hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionRef {
    Number(i32),
    Hash(String),
}

impl VersionRef {
    /// `"3"` → number 3; 64 lowercase hex digits → content hash.
    pub fn parse(s: &str) -> Option<VersionRef> {
        if s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Some(VersionRef::Hash(s.to_owned()));
        }
        match s.parse::<i32>() {
            Ok(n) if n > 0 => Some(VersionRef::Number(n)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numbers_and_hashes() {
        assert_eq!(VersionRef::parse("3"), Some(VersionRef::Number(3)));
        assert_eq!(VersionRef::parse("0"), None);
        assert_eq!(VersionRef::parse("-1"), None);
        let h = "a".repeat(64);
        assert_eq!(VersionRef::parse(&h), Some(VersionRef::Hash(h.clone())));
        assert_eq!(VersionRef::parse(&"A".repeat(64)), None);
        assert_eq!(VersionRef::parse("latest"), None);
    }
}
