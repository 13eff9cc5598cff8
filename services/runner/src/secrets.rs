//! Secret-manager lookups behind the credential registry's `secret_manager_arn` sources: the
//! [`SecretManager`] trait the registry calls, and its AWS Secrets Manager implementation.
//!
//! A fetched value is only ever held as a [`Secret`]; no error here carries or displays one.

use std::future::Future;
use std::pin::Pin;

use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_secretsmanager::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueError;

use crate::executor::Secret;

/// The runner variable that overrides the Secrets Manager endpoint (an emulator, a VPC
/// endpoint); unset, the SDK's regional endpoint is used.
pub const ENDPOINT_ENV: &str = "CAIRN_SECRETS_ENDPOINT";

/// The future of one [`SecretManager::fetch`].
pub type SecretFuture<'a> = Pin<Box<dyn Future<Output = Result<Secret, SecretError>> + Send + 'a>>;

/// A store of secrets addressed by ARN, shared by every run as `Arc<dyn SecretManager>`.
pub trait SecretManager: Send + Sync {
    /// The current string value of the secret `arn`.
    fn fetch<'a>(&'a self, arn: &'a str) -> SecretFuture<'a>;
}

/// Why a secret could not be fetched. Names the ARN, never a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// There is no such secret (or no current version of it).
    #[error("secret {arn} does not exist")]
    NotFound {
        /// The secret asked for.
        arn: String,
    },
    /// The runner's identity may not read the secret.
    #[error("the runner may not read secret {arn}")]
    AccessDenied {
        /// The secret asked for.
        arn: String,
    },
    /// The secret holds a binary value; only string secrets become variables.
    #[error("secret {arn} holds a binary value; only string secrets can be used")]
    Binary {
        /// The secret asked for.
        arn: String,
    },
    /// The secret has neither a string nor a binary value.
    #[error("secret {arn} has no value")]
    NoValue {
        /// The secret asked for.
        arn: String,
    },
    /// The secret manager refused the lookup for another lasting reason (a secret scheduled
    /// for deletion, a key it cannot decrypt with, an invalid request).
    #[error("the secret manager refused to read secret {arn} ({code})")]
    Refused {
        /// The secret asked for.
        arn: String,
        /// The service's error code.
        code: String,
    },
    /// The secret manager could not be reached, timed out, failed or throttled the lookup:
    /// worth retrying later.
    #[error("the secret manager could not serve secret {arn} now")]
    Unavailable {
        /// The secret asked for.
        arn: String,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl SecretError {
    /// Worth retrying: the failure says nothing lasting about the secret.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}

/// AWS Secrets Manager.
#[derive(Debug, Clone)]
pub struct AwsSecretManager {
    client: aws_sdk_secretsmanager::Client,
}

impl AwsSecretManager {
    /// A client configured by `config` (region, credentials, endpoint).
    pub fn new(config: &SdkConfig) -> Self {
        Self::with_endpoint(config, None)
    }

    /// As [`Self::new`], with Secrets Manager (only) at `endpoint` when given.
    pub fn with_endpoint(config: &SdkConfig, endpoint: Option<&str>) -> Self {
        let mut builder = aws_sdk_secretsmanager::config::Builder::from(config);
        if let Some(endpoint) = endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        Self {
            client: aws_sdk_secretsmanager::Client::from_conf(builder.build()),
        }
    }

    /// A client configured from the standard AWS environment (variables, profile files,
    /// container or instance credentials), with Secrets Manager at `endpoint` when given
    /// (the runner passes [`ENDPOINT_ENV`]).
    pub async fn from_env(endpoint: Option<&str>) -> Self {
        let config = aws_config::defaults(BehaviorVersion::latest()).load().await;
        Self::with_endpoint(&config, endpoint)
    }

    async fn get(&self, arn: &str) -> Result<Secret, SecretError> {
        let out = self
            .client
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|e| classify(arn, e))?;
        match (out.secret_string, out.secret_binary) {
            (Some(value), _) => Ok(Secret::new(value)),
            (None, Some(_)) => Err(SecretError::Binary {
                arn: arn.to_owned(),
            }),
            (None, None) => Err(SecretError::NoValue {
                arn: arn.to_owned(),
            }),
        }
    }
}

impl SecretManager for AwsSecretManager {
    fn fetch<'a>(&'a self, arn: &'a str) -> SecretFuture<'a> {
        Box::pin(self.get(arn))
    }
}

/// What an error code and HTTP status say about a failed lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    NotFound,
    AccessDenied,
    Transient,
    Refused,
}

/// Service errors by code; a code it does not know is transient on 429 and 5xx, refused
/// otherwise.
fn failure_of(code: Option<&str>, status: u16) -> Failure {
    match code {
        Some("ResourceNotFoundException") => Failure::NotFound,
        Some(
            "AccessDeniedException"
            | "AccessDenied"
            | "UnrecognizedClientException"
            | "InvalidClientTokenId"
            | "InvalidSignatureException"
            | "ExpiredTokenException",
        ) => Failure::AccessDenied,
        Some(
            "ThrottlingException"
            | "Throttling"
            | "TooManyRequestsException"
            | "RequestLimitExceeded"
            | "InternalServiceError"
            | "InternalFailure"
            | "ServiceUnavailable"
            | "RequestTimeout",
        ) => Failure::Transient,
        _ if status == 429 || status >= 500 => Failure::Transient,
        _ => Failure::Refused,
    }
}

fn classify(arn: &str, err: SdkError<GetSecretValueError>) -> SecretError {
    let arn = arn.to_owned();
    let (code, status) = match &err {
        SdkError::ServiceError(ctx) => (
            ctx.err().code().map(str::to_owned),
            ctx.raw().status().as_u16(),
        ),
        // The request never got an answer: no connection, a timeout.
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => {
            return SecretError::Unavailable {
                arn,
                source: Box::new(err),
            };
        }
        // A reply that could not be read may hold the value: keep none of it.
        SdkError::ResponseError(_) => {
            return SecretError::Unavailable {
                arn,
                source: "the reply could not be read".into(),
            };
        }
        // The request could not be built (e.g. no region): retrying will not help.
        _ => (None, 0),
    };
    match failure_of(code.as_deref(), status) {
        Failure::NotFound => SecretError::NotFound { arn },
        Failure::AccessDenied => SecretError::AccessDenied { arn },
        Failure::Transient => SecretError::Unavailable {
            arn,
            source: Box::new(err),
        },
        Failure::Refused => SecretError::Refused {
            arn,
            code: code.unwrap_or_else(|| "request not sent".to_owned()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_service_errors() {
        for (code, status, want) in [
            (Some("ResourceNotFoundException"), 400, Failure::NotFound),
            (Some("AccessDeniedException"), 400, Failure::AccessDenied),
            (
                Some("UnrecognizedClientException"),
                400,
                Failure::AccessDenied,
            ),
            (Some("ThrottlingException"), 400, Failure::Transient),
            (Some("InternalServiceError"), 500, Failure::Transient),
            (None, 503, Failure::Transient),
            (Some("SomethingNew"), 429, Failure::Transient),
            (Some("InvalidRequestException"), 400, Failure::Refused),
            (Some("DecryptionFailure"), 400, Failure::Refused),
            (None, 0, Failure::Refused),
        ] {
            assert_eq!(failure_of(code, status), want, "{code:?} {status}");
        }
    }

    #[test]
    fn only_unavailable_is_transient() {
        let arn = "arn:aws:secretsmanager:us-east-1:1:secret:x".to_owned();
        assert!(
            SecretError::Unavailable {
                arn: arn.clone(),
                source: "connection refused".into(),
            }
            .is_transient()
        );
        assert!(!SecretError::NotFound { arn: arn.clone() }.is_transient());
        assert!(!SecretError::AccessDenied { arn }.is_transient());
    }
}
