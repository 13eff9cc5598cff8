//! Validated names: tenant slugs, emails, target and service account names, credential
//! reference names and display names.
use super::Invalid;

fn is_label(s: &str, first_letter: bool, max: usize) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let first_ok = if first_letter {
        first.is_ascii_lowercase()
    } else {
        first.is_ascii_lowercase() || first.is_ascii_digit()
    };
    first_ok
        && s.len() <= max
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A tenant's unique slug: a lowercase letter, then 1..62 lowercase letters, digits or `-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slug(String);

impl Slug {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        if s.len() >= 2 && is_label(s, true, 63) {
            Ok(Slug(s.to_owned()))
        } else {
            Err(Invalid::new(
                "slug must be 2..63 lowercase letters, digits or '-', starting with a letter",
            ))
        }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An email address, lowercased. Only its shape is checked (one `@`, non-empty parts, a dot
/// in the domain, no whitespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email(String);

impl Email {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let s = s.trim().to_lowercase();
        let ok = s.len() <= 254
            && !s.chars().any(|c| c.is_whitespace() || c.is_control())
            && match s.split_once('@') {
                Some((local, domain)) => {
                    !local.is_empty()
                        && !domain.contains('@')
                        && domain.contains('.')
                        && !domain.starts_with('.')
                        && !domain.ends_with('.')
                }
                None => false,
            };
        if ok {
            Ok(Email(s))
        } else {
            Err(Invalid::new("email is not an email address"))
        }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A target name, unique per tenant: 1..63 lowercase letters, digits or `-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetName(String);

impl TargetName {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        if is_label(s, false, 63) {
            Ok(TargetName(s.to_owned()))
        } else {
            Err(Invalid::new(
                "target name must be 1..63 lowercase letters, digits or '-'",
            ))
        }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A service account name: a lowercase letter, then up to 62 lowercase letters, digits, `-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountName(String);

impl ServiceAccountName {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        if is_label(s, true, 63) {
            Ok(ServiceAccountName(s.to_owned()))
        } else {
            Err(Invalid::new(
                "service account name must be lowercase letters, digits or '-', starting with a letter",
            ))
        }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The *name* of a credential reference (resolved by the runner-side registry): 1..128 of
/// ASCII letters, digits, `_`, `.`, `-`, starting with a letter or digit. A name, so it can
/// never hold a secret with spaces, `=` or `/` in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialRef(String);

impl CredentialRef {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let mut chars = s.chars();
        let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
            && s.len() <= 128
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if ok {
            Ok(CredentialRef(s.to_owned()))
        } else {
            Err(Invalid::new(
                "credential_ref must be a reference name (letters, digits, '_', '.', '-')",
            ))
        }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A display name or token name: 1..200 characters, no control characters.
pub fn display_name(field: &str, s: &str) -> Result<String, Invalid> {
    let s = s.trim();
    if s.is_empty() || s.chars().count() > 200 || s.chars().any(char::is_control) {
        Err(Invalid(format!(
            "{field} must be 1..200 characters without control characters"
        )))
    } else {
        Ok(s.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert!(Slug::parse("acme").is_ok());
        assert!(Slug::parse("a-1").is_ok());
        for bad in ["", "a", "1abc", "Acme", "ac_me", "ac.me", &"a".repeat(64)] {
            assert!(Slug::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn emails_are_lowercased_and_checked() {
        assert_eq!(
            Email::parse(" Ann@Example.COM ").map(|e| e.0),
            Ok("ann@example.com".to_owned())
        );
        for bad in [
            "",
            "ann",
            "ann@",
            "@x.io",
            "a@b",
            "a b@x.io",
            "a@x.io@y.io",
            "a@.io",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn credential_refs_are_names() {
        assert!(CredentialRef::parse("aws-prod_1.main").is_ok());
        for bad in ["", "-x", "a b", "AKIA/xyz", "k=v", &"a".repeat(129)] {
            assert!(CredentialRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn target_and_service_names() {
        assert!(TargetName::parse("1prod").is_ok());
        assert!(TargetName::parse("Prod").is_err());
        assert!(ServiceAccountName::parse("workflow").is_ok());
        assert!(ServiceAccountName::parse("1x").is_err());
    }
}
