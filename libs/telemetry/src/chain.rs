//! The one formatter of an error with its whole source chain (`a: b: c`), for log lines and
//! the message a binary prints when it refuses to start.
use std::fmt;

/// Displays an error followed by each of its sources, separated by `: `.
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(err) = source {
            write!(f, ": {err}")?;
            source = err.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("connect to PostgreSQL")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn prints_every_cause() {
        let err = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        assert_eq!(
            Chain(&err).to_string(),
            "connect to PostgreSQL: connection refused"
        );
    }
}
