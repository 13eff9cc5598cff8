//! The event filter: `RUST_LOG` directives, `info` when unset.

use tracing_subscriber::EnvFilter;

use crate::subscriber::TelemetryError;

/// Used when `RUST_LOG` is unset or blank.
pub(crate) const DEFAULT_DIRECTIVES: &str = "info";

/// Reads `RUST_LOG` from the environment.
pub(crate) fn from_env() -> Result<EnvFilter, TelemetryError> {
    match std::env::var("RUST_LOG") {
        Ok(value) => from_directives(Some(&value)),
        Err(std::env::VarError::NotPresent) => from_directives(None),
        Err(std::env::VarError::NotUnicode(value)) => Err(TelemetryError::InvalidFilter {
            value: value.to_string_lossy().into_owned(),
            message: "not valid UTF-8".to_owned(),
        }),
    }
}

/// Builds the filter from `RUST_LOG`'s value; invalid directives are an error rather than
/// being silently dropped, so a typo does not hide logs.
pub(crate) fn from_directives(value: Option<&str>) -> Result<EnvFilter, TelemetryError> {
    match value.map(str::trim) {
        None | Some("") => Ok(EnvFilter::new(DEFAULT_DIRECTIVES)),
        Some(directives) => {
            EnvFilter::try_new(directives).map_err(|error| TelemetryError::InvalidFilter {
                value: directives.to_owned(),
                message: error.to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn unset_or_blank_means_info() {
        for value in [None, Some(""), Some("   ")] {
            let filter = from_directives(value).unwrap();
            assert_eq!(filter.to_string(), "info", "{value:?}");
        }
    }

    #[test]
    fn directives_are_kept() {
        let filter = from_directives(Some("warn,cairn_state_coordinator=debug")).unwrap();
        let text = filter.to_string();
        assert!(text.contains("cairn_state_coordinator=debug"), "{text}");
        assert!(text.contains("warn"), "{text}");
    }

    #[test]
    fn invalid_directives_are_an_error_naming_the_value() {
        let error = from_directives(Some("cairn=loud")).unwrap_err();
        match &error {
            TelemetryError::InvalidFilter { value, .. } => assert_eq!(value, "cairn=loud"),
            other => panic!("{other:?}"),
        }
        assert!(
            error
                .to_string()
                .starts_with("RUST_LOG=\"cairn=loud\" is not a valid filter"),
            "{error}"
        );
    }
}
