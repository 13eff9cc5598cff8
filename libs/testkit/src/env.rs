//! The addresses of the test services (PostgreSQL, NATS, moto), read from the environment
//! that `deploy/local/start.sh` prints.

/// Superuser URL of the test PostgreSQL cluster.
pub const DATABASE_URL_VAR: &str = "CAIRN_TEST_DATABASE_URL";
/// URL of the test NATS server (JetStream enabled).
pub const NATS_URL_VAR: &str = "CAIRN_TEST_NATS_URL";
/// Endpoint of the S3 + KMS emulator (moto).
pub const AWS_ENDPOINT_VAR: &str = "CAIRN_TEST_AWS_ENDPOINT";

/// The value of `var`; panics, naming the variable and how to set it, when it is unset or
/// empty. Tests that need a real service must fail, not skip, when it is not configured.
#[track_caller]
pub fn require(var: &str) -> String {
    match std::env::var(var) {
        Ok(value) if !value.trim().is_empty() => value,
        Ok(_) | Err(std::env::VarError::NotPresent) => panic!(
            "{var} is not set: start the test services and export their addresses with \
             `eval \"$(deploy/local/start.sh)\"` (run from the repository root)"
        ),
        Err(std::env::VarError::NotUnicode(_)) => panic!("{var} is not valid UTF-8"),
    }
}

/// `CAIRN_TEST_DATABASE_URL`: a PostgreSQL superuser URL.
#[track_caller]
pub fn database_url() -> String {
    require(DATABASE_URL_VAR)
}

/// `CAIRN_TEST_NATS_URL`.
#[track_caller]
pub fn nats_url() -> String {
    require(NATS_URL_VAR)
}

/// `CAIRN_TEST_AWS_ENDPOINT`: the moto endpoint for S3 and KMS.
#[track_caller]
pub fn aws_endpoint() -> String {
    require(AWS_ENDPOINT_VAR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "CAIRN_TEST_NO_SUCH_VARIABLE is not set: start the test services")]
    fn missing_variable_panics_with_its_name_and_the_fix() {
        require("CAIRN_TEST_NO_SUCH_VARIABLE");
    }

    #[test]
    fn present_variable_is_returned() {
        // PATH is set in every test environment and never empty.
        assert!(!require("PATH").is_empty());
    }
}
