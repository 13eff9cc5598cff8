//! Tracing for tests: installed once per test binary, silent unless `TEST_LOG=1`.

use std::sync::Once;

use crate::filter;

/// Call at the start of every test that wants logs. With `TEST_LOG=1` (or `true`) it installs
/// a human-readable subscriber that writes through the test harness (so output is shown only
/// for failing tests, or with `--nocapture`), filtered by `RUST_LOG` (default `info`).
/// Otherwise it installs nothing and tracing stays a no-op.
///
/// # Panics
/// When `TEST_LOG` is on and `RUST_LOG` does not parse.
pub fn init_for_tests() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if !test_log_enabled(std::env::var("TEST_LOG").ok().as_deref()) {
            return;
        }
        let filter = match filter::from_env() {
            Ok(filter) => filter,
            Err(error) => panic!("TEST_LOG is set but {error}"),
        };
        // Another subscriber (a test's own) may already be installed; that one then wins.
        let _already_installed = tracing_subscriber::fmt()
            .pretty()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}

pub(crate) fn test_log_enabled(value: Option<&str>) -> bool {
    matches!(value.map(str::trim), Some("1" | "true"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_1_or_true_turns_test_logs_on() {
        assert!(test_log_enabled(Some("1")));
        assert!(test_log_enabled(Some("true")));
        assert!(!test_log_enabled(None));
        assert!(!test_log_enabled(Some("")));
        assert!(!test_log_enabled(Some("0")));
        assert!(!test_log_enabled(Some("false")));
    }
}
