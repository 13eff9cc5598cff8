//! Redaction of a command's output: every secret value is masked before a line leaves the
//! executor, and tofu `-json` lines carrying a state dump are dropped.

use std::borrow::Cow;

use regex::{Regex, RegexBuilder};

/// Masks the secret values of one command in its output lines.
#[derive(Debug, Clone)]
pub struct Redactor {
    pattern: Option<Regex>,
}

/// What replaces a secret value.
pub const MASK: &str = "***";

/// Lines of a multi-line secret shorter than this are not masked on their own (they would mask
/// `{`, `-----` and the like everywhere); the whole value still is.
const MIN_PART_LEN: usize = 6;

impl Redactor {
    /// A redactor masking `secrets`: each value as is, as it appears inside a JSON string,
    /// and each line of a multi-line value. Empty values are ignored.
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Result<Self, regex::Error> {
        let mut needles: Vec<String> = Vec::new();
        for secret in secrets {
            if secret.is_empty() {
                continue;
            }
            needles.push(secret.to_owned());
            let json = serde_json::Value::String(secret.to_owned()).to_string();
            let json = &json[1..json.len() - 1];
            if json != secret {
                needles.push(json.to_owned());
            }
            if secret.contains('\n') {
                needles.extend(
                    secret
                        .lines()
                        .map(str::trim)
                        .filter(|l| l.len() >= MIN_PART_LEN)
                        .map(str::to_owned),
                );
            }
        }
        if needles.is_empty() {
            return Ok(Self { pattern: None });
        }
        // Longest first: at one position the regex takes the first alternative that matches,
        // so a secret containing another one is masked whole.
        needles.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        needles.dedup();
        let alternation = needles
            .iter()
            .map(|n| regex::escape(n))
            .collect::<Vec<_>>()
            .join("|");
        let pattern = RegexBuilder::new(&alternation)
            .size_limit(64 << 20)
            .build()?;
        Ok(Self {
            pattern: Some(pattern),
        })
    }

    /// `line` with every secret value replaced by `***` (`MASK`).
    pub fn redact<'a>(&self, line: &'a str) -> Cow<'a, str> {
        match &self.pattern {
            Some(p) => p.replace_all(line, MASK),
            None => Cow::Borrowed(line),
        }
    }

    /// The line to pass on: redacted, or `None` for a tofu `-json` line carrying a `state`
    /// dump (written when tofu could not persist the state), which must never be logged.
    pub fn filter(&self, line: &str) -> Option<String> {
        if is_state_dump(line) {
            return None;
        }
        Some(self.redact(line).into_owned())
    }
}

fn is_state_dump(line: &str) -> bool {
    let trimmed = line.trim_start();
    if !trimmed.starts_with('{') {
        return false;
    }
    match serde_json::from_str::<serde_json::Value>(trimmed) {
        Ok(serde_json::Value::Object(map)) => map.contains_key("state"),
        // A line that starts like JSON but is not complete JSON is not a `-json` message.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_every_occurrence_and_the_longest_secret_whole() {
        let r = Redactor::new(["abc123", "abc123-longer", ""]).unwrap();
        assert_eq!(
            r.redact("x=abc123 y=abc123-longer z=abc123"),
            "x=*** y=*** z=***"
        );
        assert_eq!(r.redact("nothing here"), "nothing here");
    }

    #[test]
    fn masks_json_escaped_and_multi_line_secrets() {
        let r = Redactor::new([
            "pa\"ss\\word",
            "-----BEGIN-----\nAAAABBBBCCCC\n-----END-----",
        ])
        .unwrap();
        assert_eq!(r.redact(r#"{"v":"pa\"ss\\word"}"#), r#"{"v":"***"}"#);
        assert_eq!(r.redact("key line AAAABBBBCCCC"), "key line ***");
        assert_eq!(r.redact("-----"), "-----");
    }

    #[test]
    fn regex_metacharacters_are_literal() {
        let r = Redactor::new(["a.b*c"]).unwrap();
        assert_eq!(r.redact("a.b*c axbbc"), "*** axbbc");
    }

    #[test]
    fn drops_state_dump_lines_only() {
        let r = Redactor::new(["s3cr3t"]).unwrap();
        let dump = r#"{"@level":"error","@message":"Failed to save state","state":{"version":4}}"#;
        assert_eq!(r.filter(dump), None);
        let other = r#"{"@level":"info","@message":"s3cr3t","type":"log"}"#;
        assert_eq!(
            r.filter(other).as_deref(),
            Some(r#"{"@level":"info","@message":"***","type":"log"}"#)
        );
        assert_eq!(r.filter("{ not json").as_deref(), Some("{ not json"));
    }

    #[test]
    fn no_secrets_changes_nothing() {
        let r = Redactor::new([]).unwrap();
        assert_eq!(r.filter("a line").as_deref(), Some("a line"));
    }
}
