//! AWS targets: the role a run's commands act as, and the STS calls that turn the platform's
//! base credentials (from the credential registry) into a session of that role.
//!
//! A target whose settings carry `aws_role_arn` is an AWS target. Its credential reference
//! resolves to base credentials of the platform's account (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, optionally `AWS_SESSION_TOKEN`); they are used only here, to call
//! `AssumeRole` before each tofu command (session `cairn-<run id>`, the target's external id,
//! a duration of the command's timeout plus [`SESSION_MARGIN`] within STS's limits), and never
//! reach a container: the container gets the session's credentials and `AWS_REGION`.
//! [`Sts::validate`] assumes the role and asks `GetCallerIdentity`, for target validation.
//!
//! No error here carries or displays a credential.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_sts::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sts::error::{ProvideErrorMetadata, SdkError};

use crate::executor::{RunId, Secret};

/// The runner variable that overrides the STS endpoint (an emulator, a VPC endpoint); unset,
/// the SDK's regional endpoint is used.
pub const ENDPOINT_ENV: &str = "CAIRN_STS_ENDPOINT";

/// Added to a command's timeout for its session: the grace period in which tofu persists
/// state after SIGINT, and clock skew.
pub const SESSION_MARGIN: Duration = Duration::from_secs(5 * 60);
/// The shortest session STS grants.
pub const MIN_SESSION: Duration = Duration::from_secs(900);
/// The longest session STS grants (a role's `MaxSessionDuration` may be lower: STS then
/// refuses the call, and the error says so).
pub const MAX_SESSION: Duration = Duration::from_secs(43_200);

/// The target settings of an AWS target (copied by the workflow from tenancy's target).
pub const SETTING_REGION: &str = "aws_region";
/// The role to assume.
pub const SETTING_ROLE_ARN: &str = "aws_role_arn";
/// The external id the role's trust policy requires.
pub const SETTING_EXTERNAL_ID: &str = "aws_external_id";

/// The base credential variables an AWS target's registry entry may hold.
const BASE_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
const BASE_SECRET: &str = "AWS_SECRET_ACCESS_KEY";
const BASE_TOKEN: &str = "AWS_SESSION_TOKEN";

/// The session of a command lasts its timeout plus [`SESSION_MARGIN`], within
/// [`MIN_SESSION`]..=[`MAX_SESSION`].
pub fn session_duration(command_timeout: Duration) -> Duration {
    command_timeout
        .saturating_add(SESSION_MARGIN)
        .clamp(MIN_SESSION, MAX_SESSION)
}

/// `cairn-<run id>`: CloudTrail shows which run acted.
pub fn session_name(run_id: &RunId) -> String {
    format!("cairn-{run_id}")
}

/// The role an AWS target's commands act as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsRole {
    /// The region (`AWS_REGION` of the container, and STS's region).
    pub region: String,
    /// The role to assume.
    pub role_arn: String,
    /// Sent with every `AssumeRole`.
    pub external_id: String,
}

impl AwsRole {
    /// The role of a target with `aws_role_arn` in its settings; `None` for other targets.
    pub fn from_target_settings(
        settings: &BTreeMap<String, String>,
    ) -> Result<Option<Self>, StsError> {
        let Some(role_arn) = settings.get(SETTING_ROLE_ARN) else {
            return Ok(None);
        };
        let get = |key: &str| {
            settings
                .get(key)
                .filter(|v| !v.is_empty())
                .cloned()
                .ok_or_else(|| {
                    StsError::Target(format!(
                        "the AWS target's settings have {SETTING_ROLE_ARN} but no {key}"
                    ))
                })
        };
        Ok(Some(Self {
            region: get(SETTING_REGION)?,
            role_arn: role_arn.clone(),
            external_id: get(SETTING_EXTERNAL_ID)?,
        }))
    }
}

/// The platform account's credentials that may assume the targets' roles.
pub struct BaseCredentials {
    access_key_id: Secret,
    secret_access_key: Secret,
    session_token: Option<Secret>,
}

impl std::fmt::Debug for BaseCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BaseCredentials(***)")
    }
}

impl BaseCredentials {
    /// The base credentials of a resolved registry entry: exactly `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY`, and optionally `AWS_SESSION_TOKEN` (anything else would be
    /// dropped silently, or handed to the container beside the session: both refused).
    pub fn from_vars(reference: &str, vars: Vec<(String, Secret)>) -> Result<Self, StsError> {
        let mut key_id = None;
        let mut secret = None;
        let mut token = None;
        for (name, value) in vars {
            match name.as_str() {
                BASE_KEY_ID => key_id = Some(value),
                BASE_SECRET => secret = Some(value),
                BASE_TOKEN => token = Some(value),
                other => {
                    return Err(StsError::Target(format!(
                        "credential {reference:?} of an AWS target may hold only \
                         {BASE_KEY_ID}, {BASE_SECRET} and {BASE_TOKEN}, not {other}"
                    )));
                }
            }
        }
        match (key_id, secret) {
            (Some(access_key_id), Some(secret_access_key)) => Ok(Self {
                access_key_id,
                secret_access_key,
                session_token: token,
            }),
            _ => Err(StsError::Target(format!(
                "credential {reference:?} of an AWS target needs {BASE_KEY_ID} and {BASE_SECRET}"
            ))),
        }
    }

    fn sdk(&self) -> Credentials {
        Credentials::new(
            self.access_key_id.expose(),
            self.secret_access_key.expose(),
            self.session_token.as_ref().map(|t| t.expose().to_owned()),
            None,
            "cairn-credential-registry",
        )
    }
}

/// The credentials of one assumed-role session.
pub struct SessionCredentials {
    access_key_id: Secret,
    secret_access_key: Secret,
    session_token: Secret,
}

impl std::fmt::Debug for SessionCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionCredentials(***)")
    }
}

impl SessionCredentials {
    /// The container's secret variables: the session's key id, secret and token.
    pub fn container_env(&self) -> Vec<(String, Secret)> {
        vec![
            (BASE_KEY_ID.to_owned(), self.access_key_id.clone()),
            (BASE_SECRET.to_owned(), self.secret_access_key.clone()),
            (BASE_TOKEN.to_owned(), self.session_token.clone()),
        ]
    }

    fn sdk(&self) -> Credentials {
        Credentials::new(
            self.access_key_id.expose(),
            self.secret_access_key.expose(),
            Some(self.session_token.expose().to_owned()),
            None,
            "cairn-assumed-role",
        )
    }
}

/// Who a validated target's session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerIdentity {
    /// The account the role is in.
    pub account_id: String,
    /// The session's ARN (`arn:aws:sts::<account>:assumed-role/<role>/cairn-…`).
    pub arn: String,
}

/// Why a role could not be assumed (or a session not identified). Names the role, never a
/// credential.
#[derive(Debug, thiserror::Error)]
pub enum StsError {
    /// The target's settings or its credential entry cannot be used.
    #[error("{0}")]
    Target(String),
    /// STS denied the call: the role does not trust the platform's account, requires another
    /// external id, or the base credentials may not assume it. Retrying does not help.
    #[error(
        "STS refused to let the platform's credentials assume {role_arn} (AccessDenied): the \
         role's trust policy must trust the platform's account and require the target's \
         external id"
    )]
    AccessDenied {
        /// The role.
        role_arn: String,
    },
    /// STS refused the call for another lasting reason (invalid base credentials, a duration
    /// above the role's maximum, a region where STS is disabled, a malformed request).
    #[error("STS refused to let the platform's credentials assume {role_arn} ({code})")]
    Refused {
        /// The role.
        role_arn: String,
        /// STS's error code.
        code: String,
    },
    /// STS could not be reached, timed out, failed or throttled the call: worth retrying.
    #[error("STS is unavailable for assuming {role_arn}")]
    Unavailable {
        /// The role.
        role_arn: String,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StsError {
    /// Worth retrying later: STS was unreachable, failing or throttling.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }

    /// The error and its causes, `: `-separated, for a run's message. Holds no credential.
    pub fn chain(&self) -> String {
        cairn_telemetry::Chain(self).to_string()
    }
}

/// What an STS error code and HTTP status say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    AccessDenied,
    Transient,
    Refused,
}

/// Service errors by code; an unknown code is transient on 429 and 5xx, refused otherwise.
fn failure_of(code: Option<&str>, status: u16) -> Failure {
    match code {
        Some("AccessDenied" | "AccessDeniedException") => Failure::AccessDenied,
        Some(
            "Throttling"
            | "ThrottlingException"
            | "RequestLimitExceeded"
            | "TooManyRequestsException"
            | "InternalFailure"
            | "ServiceUnavailable"
            | "IDPCommunicationError"
            | "RequestTimeout",
        ) => Failure::Transient,
        _ if status == 429 || status >= 500 => Failure::Transient,
        _ => Failure::Refused,
    }
}

fn classify<E>(role_arn: &str, err: SdkError<E>) -> StsError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let role_arn = role_arn.to_owned();
    let (code, status) = match &err {
        SdkError::ServiceError(ctx) => (
            ctx.err().code().map(str::to_owned),
            ctx.raw().status().as_u16(),
        ),
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => {
            return StsError::Unavailable {
                role_arn,
                source: Box::new(err),
            };
        }
        // A reply that could not be read may hold credentials: keep none of it.
        SdkError::ResponseError(_) => {
            return StsError::Unavailable {
                role_arn,
                source: "the reply could not be read".into(),
            };
        }
        _ => (None, 0),
    };
    match failure_of(code.as_deref(), status) {
        Failure::AccessDenied => StsError::AccessDenied { role_arn },
        Failure::Transient => StsError::Unavailable {
            role_arn,
            source: Box::new(err),
        },
        Failure::Refused => StsError::Refused {
            role_arn,
            code: code.unwrap_or_else(|| "request not sent".to_owned()),
        },
    }
}

/// STS, at its regional endpoint or at [`ENDPOINT_ENV`]'s.
#[derive(Debug, Clone, Default)]
pub struct Sts {
    endpoint: Option<String>,
}

impl Sts {
    /// STS at `endpoint` when given, else the SDK's regional endpoint.
    pub fn new(endpoint: Option<String>) -> Self {
        Self { endpoint }
    }

    fn client(&self, credentials: Credentials, region: &str) -> aws_sdk_sts::Client {
        let mut builder = aws_sdk_sts::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(region.to_owned()))
            .credentials_provider(credentials);
        if let Some(endpoint) = &self.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        aws_sdk_sts::Client::from_conf(builder.build())
    }

    /// Assumes `role` with `base` for one command: session `session_name`, `duration`
    /// (clamp it with [`session_duration`]), the role's external id.
    pub async fn assume_role(
        &self,
        base: &BaseCredentials,
        role: &AwsRole,
        session_name: &str,
        duration: Duration,
    ) -> Result<SessionCredentials, StsError> {
        let seconds = i32::try_from(duration.as_secs()).unwrap_or(i32::MAX);
        let request = self
            .client(base.sdk(), &role.region)
            .assume_role()
            .role_arn(&role.role_arn)
            .role_session_name(session_name)
            .external_id(&role.external_id)
            .duration_seconds(seconds)
            .send();
        // Boxed: the SDK's future is deep, and the runner's serve loop awaits it.
        let out = Box::pin(request)
            .await
            .map_err(|e| classify(&role.role_arn, e))?;
        let Some(c) = out.credentials else {
            return Err(StsError::Refused {
                role_arn: role.role_arn.clone(),
                code: "no credentials in the answer".to_owned(),
            });
        };
        Ok(SessionCredentials {
            access_key_id: Secret::new(c.access_key_id),
            secret_access_key: Secret::new(c.secret_access_key),
            session_token: Secret::new(c.session_token),
        })
    }

    /// Target validation: assumes `role` (a short session named `session_name`) and asks
    /// `GetCallerIdentity` as that session.
    pub async fn validate(
        &self,
        base: &BaseCredentials,
        role: &AwsRole,
        session_name: &str,
    ) -> Result<CallerIdentity, StsError> {
        let session = self
            .assume_role(base, role, session_name, MIN_SESSION)
            .await?;
        let request = self
            .client(session.sdk(), &role.region)
            .get_caller_identity()
            .send();
        let out = Box::pin(request)
            .await
            .map_err(|e| classify(&role.role_arn, e))?;
        Ok(CallerIdentity {
            account_id: out.account.unwrap_or_default(),
            arn: out.arn.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_durations_are_the_timeout_plus_margin_within_sts_limits() {
        let d = |s| session_duration(Duration::from_secs(s)).as_secs();
        assert_eq!(d(45 * 60), 50 * 60);
        assert_eq!(d(60), 900, "STS's minimum");
        assert_eq!(d(0), 900);
        assert_eq!(d(24 * 3600), 43_200, "STS's maximum");
        assert_eq!(
            session_duration(Duration::MAX).as_secs(),
            43_200,
            "no overflow"
        );
    }

    #[test]
    fn session_names_fit_sts() {
        let id = RunId::from(uuid::Uuid::nil());
        let name = session_name(&id);
        assert!(name.starts_with("cairn-"));
        assert!(name.len() <= 64, "{name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c)),
            "{name}"
        );
    }

    #[test]
    fn aws_roles_come_from_target_settings() {
        let settings = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            AwsRole::from_target_settings(&settings(&[("base_dir", "/x")])).unwrap(),
            None
        );
        let role = AwsRole::from_target_settings(&settings(&[
            ("aws_region", "eu-west-1"),
            ("aws_role_arn", "arn:aws:iam::123456789012:role/r"),
            ("aws_external_id", "cairn-abc"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(role.external_id, "cairn-abc");
        for missing in ["aws_region", "aws_external_id"] {
            let mut s = settings(&[
                ("aws_region", "eu-west-1"),
                ("aws_role_arn", "arn:aws:iam::123456789012:role/r"),
                ("aws_external_id", "cairn-abc"),
            ]);
            s.remove(missing);
            let err = AwsRole::from_target_settings(&s).unwrap_err();
            assert!(err.to_string().contains(missing), "{err}");
            assert!(!err.is_transient());
        }
    }

    #[test]
    fn base_credentials_hold_exactly_the_aws_keys() {
        let v = |pairs: &[(&str, &str)]| -> Vec<(String, Secret)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Secret::new(*v)))
                .collect()
        };
        let ok = BaseCredentials::from_vars(
            "r",
            v(&[
                ("AWS_ACCESS_KEY_ID", "AKIA"),
                ("AWS_SECRET_ACCESS_KEY", "canary-base-secret"),
            ]),
        )
        .unwrap();
        assert!(!format!("{ok:?}").contains("canary"));
        assert!(BaseCredentials::from_vars("r", v(&[("AWS_ACCESS_KEY_ID", "AKIA")])).is_err());
        let err = BaseCredentials::from_vars(
            "r",
            v(&[
                ("AWS_ACCESS_KEY_ID", "AKIA"),
                ("AWS_SECRET_ACCESS_KEY", "s"),
                ("GITHUB_TOKEN", "t"),
            ]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("GITHUB_TOKEN"), "{err}");
    }

    #[test]
    fn classifies_sts_errors() {
        for (code, status, want) in [
            (Some("AccessDenied"), 403, Failure::AccessDenied),
            (Some("Throttling"), 400, Failure::Transient),
            (Some("ServiceUnavailable"), 503, Failure::Transient),
            (None, 500, Failure::Transient),
            (Some("SomethingNew"), 429, Failure::Transient),
            (Some("InvalidClientTokenId"), 403, Failure::Refused),
            (Some("ValidationError"), 400, Failure::Refused),
            (Some("RegionDisabledException"), 403, Failure::Refused),
            (None, 0, Failure::Refused),
        ] {
            assert_eq!(failure_of(code, status), want, "{code:?} {status}");
        }
    }
}
