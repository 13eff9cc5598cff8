//! The runner-side credential registry (`CAIRN_CREDENTIALS_FILE`): which credential a tenant's
//! run on a target may use, and where its values come from. Maintained by platform admins; a
//! reference not registered for exactly that (tenant, target) is refused.
//!
//! The file is JSON:
//!
//! ```json
//! {"entries": [{"tenant_id": "t1", "target_id": "aws-prod", "reference": "deploy",
//!   "vars": {"AWS_ACCESS_KEY_ID": {"env": "T1_AWS_KEY_ID"},
//!            "AWS_SECRET_ACCESS_KEY": {"file": "/run/secrets/t1-aws-secret"}}}]}
//! ```
//!
//! Each entry gives the tofu container's environment variables for one reference; each
//! variable's value comes from one source: an environment variable of the runner (`env`), a
//! file (`file`, trailing line ending removed) or a secret manager ARN (`secret_manager_arn`,
//! fetched when the run starts through the registry's [`SecretManager`]; ARNs are checked for
//! shape when the registry is loaded, so a typo fails at start rather than mid-run).
//! A reference is an opaque name: it is only ever looked up, never read as a variable name or
//! a path, so a tenant cannot name a runner variable or another tenant's credential.
//!
//! An AWS target's entry holds the platform account's base credentials (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, optionally `AWS_SESSION_TOKEN`); they are never given to a
//! container but used through the registry's [`Sts`] to assume the target's role
//! ([`crate::sts`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::executor::Secret;
use crate::secrets::{SecretError, SecretManager};
use crate::sts::{AwsRole, BaseCredentials, Sts, StsError};

/// Where one value of a credential comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CredentialSource {
    /// An environment variable of the runner process.
    Env(String),
    /// A file readable by the runner.
    File(PathBuf),
    /// A secret in a secret manager.
    SecretManagerArn(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    entries: Vec<EntryFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    tenant_id: String,
    target_id: String,
    reference: String,
    vars: BTreeMap<String, CredentialSource>,
}

/// Why the registry could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The file could not be read.
    #[error("read the credential registry {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid registry.
    #[error("the credential registry is not valid JSON of the expected shape")]
    Parse(#[source] serde_json::Error),
    /// An entry is unusable.
    #[error("credential registry entry {index}: {problem}")]
    Invalid {
        /// The entry's position in `entries`.
        index: usize,
        /// What is wrong.
        problem: String,
    },
}

/// Why a reference could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The reference is not registered for this tenant and target.
    #[error(
        "credential reference {reference:?} is not registered for tenant {tenant_id} on target {target_id}"
    )]
    NotRegistered {
        /// The tenant asking.
        tenant_id: String,
        /// The target.
        target_id: String,
        /// The reference asked for.
        reference: String,
    },
    /// A registered runner environment variable is not set.
    #[error("credential {reference:?}: the runner variable {runner_var} is not set")]
    RunnerVarMissing {
        /// The reference.
        reference: String,
        /// The runner's variable.
        runner_var: String,
    },
    /// A registered file could not be read.
    #[error("credential {reference:?}: read {}", path.display())]
    File {
        /// The reference.
        reference: String,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A sensitive variable's reference names an entry with more than one variable.
    #[error("reference {reference:?} holds several values; a sensitive variable needs one")]
    NotSingleValue {
        /// The reference.
        reference: String,
    },
    /// The value is in a secret manager and this runner has no secret manager client.
    #[error("credential {reference:?}: secret manager ARNs cannot be resolved by this runner")]
    SecretManagerUnavailable {
        /// The reference.
        reference: String,
    },
    /// The secret manager refused the lookup for good: no such secret, access denied, a binary
    /// secret. The source says which; neither holds the value.
    #[error("credential {reference:?}: the secret manager refused the lookup")]
    SecretRefused {
        /// The reference.
        reference: String,
        /// Why.
        #[source]
        source: SecretError,
    },
    /// The secret manager could not be reached, failed or throttled the lookup: worth retrying.
    #[error("credential {reference:?}: the secret manager is unavailable")]
    SecretManagerTransient {
        /// The reference.
        reference: String,
        /// Why.
        #[source]
        source: SecretError,
    },
    /// An AWS target's settings or base credentials cannot be used, or its role could not be
    /// assumed.
    #[error(transparent)]
    Aws(#[from] StsError),
    /// An AWS target names no credential reference: the runner has no base credentials.
    #[error(
        "the AWS target has no credential reference: the runner has no base credentials for it"
    )]
    AwsWithoutReference,
}

impl CredentialError {
    /// Worth retrying later: the secret manager or STS was unavailable.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::SecretManagerTransient { .. } => true,
            Self::Aws(e) => e.is_transient(),
            _ => false,
        }
    }

    /// The error and its causes, `: `-separated, for a run's message. Holds no value.
    pub fn chain(&self) -> String {
        cairn_telemetry::Chain(self).to_string()
    }

    fn from_secret(reference: &str, source: SecretError) -> Self {
        let reference = reference.to_owned();
        if source.is_transient() {
            Self::SecretManagerTransient { reference, source }
        } else {
            Self::SecretRefused { reference, source }
        }
    }
}

/// Container variables the runner sets itself; a credential may not override them.
const RESERVED_PREFIXES: &[&str] = &["TF_HTTP_", "TF_CLI_", "TF_VAR_", "CAIRN_"];
const RESERVED_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "TF_IN_AUTOMATION",
    "TF_INPUT",
    "TF_PLUGIN_CACHE_DIR",
    "TF_DATA_DIR",
    "TF_LOG",
    "TF_LOG_PATH",
    "TF_CLI_CONFIG_FILE",
];

type Key = (String, String, String);

/// The loaded registry, with the secret manager its `secret_manager_arn` sources are fetched
/// from (none: such sources fail with [`CredentialError::SecretManagerUnavailable`]).
#[derive(Default)]
pub struct CredentialRegistry {
    entries: HashMap<Key, BTreeMap<String, CredentialSource>>,
    secret_manager: Option<Arc<dyn SecretManager>>,
    sts: Sts,
}

impl fmt::Debug for CredentialRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialRegistry")
            .field("entries", &self.entries)
            .field("secret_manager", &self.secret_manager.is_some())
            .field("sts", &self.sts)
            .finish()
    }
}

impl CredentialRegistry {
    /// Loads the registry file.
    pub fn load(path: &Path) -> Result<Self, RegistryError> {
        let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Parses a registry and checks every entry.
    pub fn parse(text: &str) -> Result<Self, RegistryError> {
        let file: RegistryFile = serde_json::from_str(text).map_err(RegistryError::Parse)?;
        let mut entries = HashMap::new();
        for (index, e) in file.entries.into_iter().enumerate() {
            let invalid = |problem: String| RegistryError::Invalid { index, problem };
            if e.tenant_id.is_empty() || e.target_id.is_empty() || e.reference.is_empty() {
                return Err(invalid(
                    "tenant_id, target_id and reference must not be empty".into(),
                ));
            }
            if e.vars.is_empty() {
                return Err(invalid("vars must not be empty".into()));
            }
            for name in e.vars.keys() {
                if !is_env_name(name) {
                    return Err(invalid(format!("{name:?} is not a variable name")));
                }
                if is_reserved(name) {
                    return Err(invalid(format!("{name} is set by the runner itself")));
                }
            }
            for (name, source) in &e.vars {
                if let CredentialSource::SecretManagerArn(arn) = source
                    && !is_secret_arn(arn)
                {
                    return Err(invalid(format!(
                        "{name}: {arn:?} is not a Secrets Manager ARN (arn:…:secretsmanager:…)"
                    )));
                }
            }
            let key = (e.tenant_id, e.target_id, e.reference);
            if entries.insert(key, e.vars).is_some() {
                return Err(invalid(
                    "duplicate (tenant_id, target_id, reference)".into(),
                ));
            }
        }
        Ok(Self {
            entries,
            secret_manager: None,
            sts: Sts::default(),
        })
    }

    /// The registry assuming AWS targets' roles through `sts` (by default STS's regional
    /// endpoint).
    pub fn with_sts(mut self, sts: Sts) -> Self {
        self.sts = sts;
        self
    }

    /// The STS client AWS targets' roles are assumed through.
    pub fn sts(&self) -> &Sts {
        &self.sts
    }

    /// The registry fetching its `secret_manager_arn` sources from `manager`.
    pub fn with_secret_manager(mut self, manager: Arc<dyn SecretManager>) -> Self {
        self.secret_manager = Some(manager);
        self
    }

    /// Whether any value comes from a secret manager (the runner then needs a client).
    pub fn uses_secret_manager(&self) -> bool {
        self.entries
            .values()
            .flat_map(BTreeMap::values)
            .any(|source| matches!(source, CredentialSource::SecretManagerArn(_)))
    }

    /// The targets with at least one registered credential, sorted: the targets this runner
    /// serves.
    pub fn targets(&self) -> Vec<String> {
        let mut t: Vec<String> = self.entries.keys().map(|(_, t, _)| t.clone()).collect();
        t.sort();
        t.dedup();
        t
    }

    /// The container variables of `reference` for a run of `tenant_id` on `target_id`, with
    /// runner variables read from the process environment.
    pub async fn resolve(
        &self,
        tenant_id: &str,
        target_id: &str,
        reference: &str,
    ) -> Result<Vec<(String, Secret)>, CredentialError> {
        self.resolve_with(tenant_id, target_id, reference, |name| {
            std::env::var(name).ok()
        })
        .await
    }

    /// As [`Self::resolve`], reading runner variables through `runner_env`. A reference not
    /// registered for this tenant and target is refused before any source is read.
    pub async fn resolve_with(
        &self,
        tenant_id: &str,
        target_id: &str,
        reference: &str,
        runner_env: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, Secret)>, CredentialError> {
        let key = (
            tenant_id.to_owned(),
            target_id.to_owned(),
            reference.to_owned(),
        );
        let Some(vars) = self.entries.get(&key) else {
            return Err(CredentialError::NotRegistered {
                tenant_id: tenant_id.to_owned(),
                target_id: target_id.to_owned(),
                reference: reference.to_owned(),
            });
        };
        let mut out = Vec::with_capacity(vars.len());
        for (name, source) in vars {
            let value = match source {
                CredentialSource::Env(var) => Secret::new(runner_env(var).ok_or_else(|| {
                    CredentialError::RunnerVarMissing {
                        reference: reference.to_owned(),
                        runner_var: var.clone(),
                    }
                })?),
                CredentialSource::File(path) => {
                    let mut v =
                        std::fs::read_to_string(path).map_err(|source| CredentialError::File {
                            reference: reference.to_owned(),
                            path: path.clone(),
                            source,
                        })?;
                    let trimmed = v.trim_end_matches(['\r', '\n']).len();
                    v.truncate(trimmed);
                    Secret::new(v)
                }
                CredentialSource::SecretManagerArn(arn) => {
                    let Some(manager) = &self.secret_manager else {
                        return Err(CredentialError::SecretManagerUnavailable {
                            reference: reference.to_owned(),
                        });
                    };
                    manager
                        .fetch(arn)
                        .await
                        .map_err(|e| CredentialError::from_secret(reference, e))?
                }
            };
            out.push((name.clone(), value));
        }
        Ok(out)
    }
}

impl CredentialRegistry {
    /// The role and base credentials of an AWS target (settings with `aws_role_arn`), or
    /// `None` for another target. The base credentials are resolved like any credential,
    /// with runner variables read through `runner_env`.
    pub async fn resolve_aws_with(
        &self,
        tenant_id: &str,
        target_id: &str,
        reference: Option<&str>,
        settings: &BTreeMap<String, String>,
        runner_env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<(AwsRole, BaseCredentials)>, CredentialError> {
        let Some(role) = AwsRole::from_target_settings(settings)? else {
            return Ok(None);
        };
        let reference = reference
            .filter(|r| !r.is_empty())
            .ok_or(CredentialError::AwsWithoutReference)?;
        let vars = self
            .resolve_with(tenant_id, target_id, reference, runner_env)
            .await?;
        Ok(Some((role, BaseCredentials::from_vars(reference, vars)?)))
    }

    /// The value of a sensitive variable's reference: an entry with exactly one variable
    /// (whose name is ignored), looked up exactly like a credential.
    pub async fn resolve_value_with(
        &self,
        tenant_id: &str,
        target_id: &str,
        reference: &str,
        runner_env: impl Fn(&str) -> Option<String>,
    ) -> Result<Secret, CredentialError> {
        let mut vars = self
            .resolve_with(tenant_id, target_id, reference, runner_env)
            .await?;
        match (vars.pop(), vars.is_empty()) {
            (Some((_, value)), true) => Ok(value),
            _ => Err(CredentialError::NotSingleValue {
                reference: reference.to_owned(),
            }),
        }
    }
}

/// Whether `name` is a valid environment variable name.
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A light check of a Secrets Manager ARN's shape (`arn:PARTITION:secretsmanager:…`); the
/// secret manager itself says whether the secret exists.
fn is_secret_arn(arn: &str) -> bool {
    arn.starts_with("arn:") && arn.contains(":secretsmanager:")
}

fn is_reserved(name: &str) -> bool {
    RESERVED_NAMES.contains(&name) || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGISTRY: &str = r#"{"entries": [
        {"tenant_id": "t1", "target_id": "aws", "reference": "deploy",
         "vars": {"AWS_ACCESS_KEY_ID": {"env": "T1_KEY"}, "AWS_SECRET_ACCESS_KEY": {"env": "T1_SECRET"}}},
        {"tenant_id": "t2", "target_id": "aws", "reference": "other",
         "vars": {"AWS_ACCESS_KEY_ID": {"env": "T2_KEY"}}},
        {"tenant_id": "t2", "target_id": "gcp", "reference": "arn",
         "vars": {"GOOGLE_CREDENTIALS": {"secret_manager_arn": "arn:aws:secretsmanager:x"}}}
    ]}"#;

    fn env(name: &str) -> Option<String> {
        match name {
            "T1_KEY" => Some("AKIA1".into()),
            "T1_SECRET" => Some("s3cr3t".into()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn resolves_a_registered_reference_into_secret_vars() {
        let r = CredentialRegistry::parse(REGISTRY).unwrap();
        let vars = r.resolve_with("t1", "aws", "deploy", env).await.unwrap();
        let got: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.expose())).collect();
        assert_eq!(
            got,
            [
                ("AWS_ACCESS_KEY_ID", "AKIA1"),
                ("AWS_SECRET_ACCESS_KEY", "s3cr3t")
            ]
        );
        assert!(!format!("{vars:?}").contains("s3cr3t"));
        assert_eq!(r.targets(), ["aws", "gcp"]);
    }

    #[tokio::test]
    async fn refuses_other_tenants_targets_and_runner_variables() {
        let r = CredentialRegistry::parse(REGISTRY).unwrap();
        for (tenant, target, reference) in [
            ("t1", "aws", "other"),     // t2's reference
            ("t2", "aws", "deploy"),    // t1's reference
            ("t1", "gcp", "deploy"),    // registered on another target
            ("t1", "aws", "T1_SECRET"), // a runner variable named directly
            ("t1", "aws", "env:T1_SECRET"),
        ] {
            let err = r
                .resolve_with(tenant, target, reference, env)
                .await
                .unwrap_err();
            assert!(
                matches!(err, CredentialError::NotRegistered { .. }),
                "{tenant}/{target}/{reference}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn reads_files_and_reports_missing_sources() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "from-file\n").unwrap();
        let text = serde_json::json!({"entries": [
            {"tenant_id": "t", "target_id": "x", "reference": "f",
             "vars": {"TOKEN": {"file": path}}},
            {"tenant_id": "t", "target_id": "x", "reference": "missing",
             "vars": {"TOKEN": {"env": "NOT_SET_ANYWHERE"}}},
            {"tenant_id": "t", "target_id": "x", "reference": "gone",
             "vars": {"TOKEN": {"file": dir.path().join("nope")}}}
        ]})
        .to_string();
        let r = CredentialRegistry::parse(&text).unwrap();
        let vars = r.resolve_with("t", "x", "f", env).await.unwrap();
        assert_eq!(vars[0].1.expose(), "from-file");
        assert!(matches!(
            r.resolve_with("t", "x", "missing", env).await,
            Err(CredentialError::RunnerVarMissing { .. })
        ));
        assert!(matches!(
            r.resolve_with("t", "x", "gone", env).await,
            Err(CredentialError::File { .. })
        ));
        assert!(matches!(
            r.resolve_with("t2", "gcp", "arn", env).await,
            Err(CredentialError::NotRegistered { .. })
        ));
        let r = CredentialRegistry::parse(REGISTRY).unwrap();
        assert!(matches!(
            r.resolve_with("t2", "gcp", "arn", env).await,
            Err(CredentialError::SecretManagerUnavailable { .. })
        ));
    }

    #[tokio::test]
    async fn sensitive_variables_take_single_value_entries() {
        let r = CredentialRegistry::parse(REGISTRY).unwrap();
        assert!(matches!(
            r.resolve_value_with("t1", "aws", "deploy", env).await,
            Err(CredentialError::NotSingleValue { .. })
        ));
        let r = CredentialRegistry::parse(
            r#"{"entries": [{"tenant_id": "t1", "target_id": "aws", "reference": "db",
                "vars": {"VALUE": {"env": "T1_SECRET"}}}]}"#,
        )
        .unwrap();
        let v = r.resolve_value_with("t1", "aws", "db", env).await.unwrap();
        assert_eq!(v.expose(), "s3cr3t");
        assert!(matches!(
            r.resolve_value_with("t2", "aws", "db", env).await,
            Err(CredentialError::NotRegistered { .. })
        ));
    }

    #[test]
    fn rejects_bad_entries() {
        let entry = |name: &str| {
            format!(
                r#"{{"entries": [{{"tenant_id": "t", "target_id": "x", "reference": "r",
                    "vars": {{"{name}": {{"env": "A"}}}}}}]}}"#
            )
        };
        for bad in ["TF_HTTP_PASSWORD", "PATH", "TF_VAR_x", "1ABC", "A-B", ""] {
            assert!(
                matches!(
                    CredentialRegistry::parse(&entry(bad)),
                    Err(RegistryError::Invalid { .. })
                ),
                "{bad:?} accepted"
            );
        }
        assert!(CredentialRegistry::parse(&entry("AWS_REGION")).is_ok());
        let dup = r#"{"entries": [
            {"tenant_id": "t", "target_id": "x", "reference": "r", "vars": {"A": {"env": "A"}}},
            {"tenant_id": "t", "target_id": "x", "reference": "r", "vars": {"B": {"env": "B"}}}]}"#;
        assert!(matches!(
            CredentialRegistry::parse(dup),
            Err(RegistryError::Invalid { index: 1, .. })
        ));
        assert!(matches!(
            CredentialRegistry::parse(r#"{"entries": [{"tenant_id": "t"}]}"#),
            Err(RegistryError::Parse(_))
        ));
    }

    #[test]
    fn rejects_malformed_secret_arns_at_load() {
        let entry = |arn: &str| {
            serde_json::json!({"entries": [{"tenant_id": "t", "target_id": "x", "reference": "r",
                "vars": {"TOKEN": {"secret_manager_arn": arn}}}]})
            .to_string()
        };
        for bad in [
            "",
            "my-secret",
            "arn:aws:ssm:us-east-1:123456789012:parameter/x",
            "aws:secretsmanager:us-east-1:123456789012:secret:x",
            "arn:aws:secretsmanager",
        ] {
            let err = CredentialRegistry::parse(&entry(bad)).unwrap_err();
            assert!(
                matches!(err, RegistryError::Invalid { index: 0, .. }),
                "{bad:?}: {err}"
            );
        }
        for good in [
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:db-AbCdEf",
            "arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:db",
        ] {
            assert!(CredentialRegistry::parse(&entry(good)).is_ok(), "{good}");
        }
    }

    #[test]
    fn chain_names_the_cause_and_classifies() {
        let err = CredentialError::from_secret(
            "db",
            SecretError::NotFound {
                arn: "arn:aws:secretsmanager:us-east-1:1:secret:db".into(),
            },
        );
        assert!(!err.is_transient());
        assert_eq!(
            err.chain(),
            "credential \"db\": the secret manager refused the lookup: \
             secret arn:aws:secretsmanager:us-east-1:1:secret:db does not exist"
        );
        let err = CredentialError::from_secret(
            "db",
            SecretError::Unavailable {
                arn: "arn:aws:secretsmanager:us-east-1:1:secret:db".into(),
                source: "throttled".into(),
            },
        );
        assert!(err.is_transient());
        assert!(err.chain().ends_with(": throttled"), "{}", err.chain());
    }
}
