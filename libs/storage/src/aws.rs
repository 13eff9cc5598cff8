//! AWS SDK configuration shared by the S3 and KMS clients, and the translation of SDK
//! failures into a short text that names the cause.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use aws_config::meta::region::RegionProviderChain;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::Credentials;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

/// Region used when neither the settings nor the environment name one.
pub const DEFAULT_REGION: &str = "us-east-1";

/// How to reach AWS (or an emulator such as moto).
#[derive(Clone, Debug, Default)]
pub struct AwsSettings {
    /// Custom endpoint URL (emulator, VPC endpoint). S3 then uses path-style addressing.
    pub endpoint: Option<String>,
    /// Region; when `None`, the environment's region or [`DEFAULT_REGION`].
    pub region: Option<String>,
    /// Explicit credentials; when `None`, the SDK's default provider chain (environment,
    /// profile, web identity, container, instance metadata).
    pub static_credentials: Option<StaticCredentials>,
    /// Attempts per call, retries included; `None` keeps the SDK's standard retry (3).
    pub max_attempts: Option<u32>,
}

impl AwsSettings {
    /// Settings that take credentials and region from the environment.
    pub fn from_env(endpoint: Option<String>) -> Self {
        Self {
            endpoint,
            region: None,
            static_credentials: None,
            max_attempts: None,
        }
    }

    /// Settings with explicit credentials and region, independent of the process
    /// environment (tests against an emulator).
    pub fn with_static_credentials(
        endpoint: impl Into<String>,
        region: impl Into<String>,
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
    ) -> Self {
        Self {
            endpoint: Some(endpoint.into()),
            region: Some(region.into()),
            static_credentials: Some(StaticCredentials {
                access_key_id: access_key_id.into(),
                secret_access_key: secret_access_key.into(),
            }),
            max_attempts: None,
        }
    }
}

/// An access key pair. `Debug` never shows the secret.
#[derive(Clone)]
pub struct StaticCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

/// Loads an SDK configuration for `settings`, with bounded connect and attempt timeouts.
pub async fn sdk_config(settings: &AwsSettings) -> SdkConfig {
    let region = RegionProviderChain::first_try(settings.region.clone().map(Region::new))
        .or_default_provider()
        .or_else(Region::new(DEFAULT_REGION));
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .operation_attempt_timeout(Duration::from_secs(120))
        .build();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(region)
        .timeout_config(timeouts);
    if let Some(endpoint) = &settings.endpoint {
        loader = loader.endpoint_url(endpoint.clone());
    }
    if let Some(attempts) = settings.max_attempts {
        loader = loader.retry_config(RetryConfig::standard().with_max_attempts(attempts.max(1)));
    }
    if let Some(creds) = &settings.static_credentials {
        loader = loader.credentials_provider(Credentials::new(
            creds.access_key_id.clone(),
            creds.secret_access_key.clone(),
            None,
            None,
            "cairn-static",
        ));
    }
    loader.load().await
}

/// An S3 client for `config`; path-style addressing when a custom endpoint is set.
pub fn s3_client(config: &SdkConfig) -> aws_sdk_s3::Client {
    let builder =
        aws_sdk_s3::config::Builder::from(config).force_path_style(config.endpoint_url().is_some());
    aws_sdk_s3::Client::from_conf(builder.build())
}

/// A KMS client for `config`.
pub fn kms_client(config: &SdkConfig) -> aws_sdk_kms::Client {
    aws_sdk_kms::Client::new(config)
}

/// What went wrong with one SDK call, reduced to what classification needs.
#[derive(Debug)]
pub(crate) enum SdkFailure {
    /// The service answered with an error.
    Service {
        status: u16,
        code: Option<String>,
        message: Option<String>,
    },
    /// No usable answer: connection refused, timeout, unreadable response. The text names
    /// the cause.
    Transport(String),
}

impl SdkFailure {
    /// Reduces an SDK error to a status/code pair or a transport cause.
    pub(crate) fn from_sdk<E>(err: &SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + StdError + 'static,
    {
        match err {
            SdkError::ServiceError(service) => {
                let status = err
                    .raw_response()
                    .map(|raw| raw.status().as_u16())
                    .unwrap_or_default();
                let inner = service.err();
                SdkFailure::Service {
                    status,
                    code: inner.code().map(str::to_owned),
                    message: inner.message().map(str::to_owned),
                }
            }
            SdkError::TimeoutError(_) => SdkFailure::Transport("timed out".to_owned()),
            SdkError::DispatchFailure(dispatch) => {
                if dispatch.is_timeout() {
                    SdkFailure::Transport("timed out".to_owned())
                } else {
                    SdkFailure::Transport(root_cause(err))
                }
            }
            SdkError::ResponseError(_) => {
                SdkFailure::Transport(format!("unreadable response: {}", root_cause(err)))
            }
            SdkError::ConstructionFailure(_) => {
                SdkFailure::Transport(format!("request could not be built: {}", root_cause(err)))
            }
            _ => SdkFailure::Transport(root_cause(err)),
        }
    }

    /// The service error code, if the service answered with one.
    pub(crate) fn code(&self) -> Option<&str> {
        match self {
            SdkFailure::Service { code, .. } => code.as_deref(),
            SdkFailure::Transport(_) => None,
        }
    }

    /// The HTTP status, if the service answered.
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            SdkFailure::Service { status, .. } => Some(*status),
            SdkFailure::Transport(_) => None,
        }
    }

    /// Text for an unavailable-error message, e.g. `"S3 unreachable: connection refused"` or
    /// `"S3 error SlowDown (HTTP 503): Please reduce your request rate"`.
    pub(crate) fn describe(&self, service: &str) -> String {
        match self {
            SdkFailure::Transport(cause) => format!("{service} unreachable: {cause}"),
            SdkFailure::Service {
                status,
                code,
                message,
            } => {
                let code = code.as_deref().unwrap_or("(no error code)");
                match message.as_deref().filter(|m| !m.is_empty()) {
                    Some(message) => {
                        format!("{service} error {code} (HTTP {status}): {message}")
                    }
                    None => format!("{service} error {code} (HTTP {status})"),
                }
            }
        }
    }
}

/// The innermost cause of an error chain, with the common I/O cases named plainly.
fn root_cause(err: &(dyn StdError + 'static)) -> String {
    let mut current: &(dyn StdError + 'static) = err;
    let mut last_text = current.to_string();
    loop {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
                std::io::ErrorKind::ConnectionReset => "connection reset".to_owned(),
                std::io::ErrorKind::TimedOut => "timed out".to_owned(),
                _ => io.to_string(),
            };
        }
        match current.source() {
            Some(next) => {
                let text = next.to_string();
                if !text.is_empty() {
                    last_text = text;
                }
                current = next;
            }
            None => return last_text,
        }
    }
}
