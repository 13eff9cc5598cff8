//! A target's settings: its provider (local directory or AWS role), the credential
//! reference name, its concurrency limit and whether it is enabled; and its external id.
use std::path::Path;

use aws_lc_rs::rand::{SecureRandom, SystemRandom};

use super::Invalid;
use super::api_token::RandomFailed;
use super::names::CredentialRef;

/// The external id of a target: random, generated when the target is created and never
/// changed. An AWS target's role names it in its trust policy (`sts:ExternalId`) and the
/// runner sends it with every AssumeRole, so a tenant cannot have Cairn assume a role that
/// trusts Cairn's account on someone else's behalf (the confused deputy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalId(String);

impl ExternalId {
    /// `cairn-` and 128 random bits in hex (within STS's 2..1224 characters of
    /// `[\w+=,.@:/-]`).
    pub fn generate() -> Result<Self, RandomFailed> {
        let mut bytes = [0u8; 16];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| RandomFailed)?;
        Ok(Self(format!("cairn-{}", hex::encode(bytes))))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where a target deploys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provider {
    /// A local directory (demos and tests): absolute, without `..`.
    Local { base_dir: String },
    /// An AWS account reached by assuming `role_arn` in `region`.
    Aws { region: String, role_arn: String },
}

impl Provider {
    pub fn local(base_dir: &str) -> Result<Self, Invalid> {
        let path = Path::new(base_dir);
        let ok = path.is_absolute()
            && base_dir.len() <= 1024
            && !base_dir.chars().any(char::is_control)
            && base_dir.split('/').all(|part| part != "." && part != "..");
        if ok {
            Ok(Provider::Local {
                base_dir: base_dir.to_owned(),
            })
        } else {
            Err(Invalid::new(
                "local.base_dir must be an absolute path without '.' or '..'",
            ))
        }
    }

    pub fn aws(region: &str, role_arn: &str) -> Result<Self, Invalid> {
        if !is_aws_region(region) {
            return Err(Invalid::new(
                "aws.region is not an AWS region (e.g. eu-west-1)",
            ));
        }
        if !is_role_arn(role_arn) {
            return Err(Invalid::new(
                "aws.role_arn must be an IAM role ARN (arn:aws:iam::<12 digits>:role/<name>)",
            ));
        }
        Ok(Provider::Aws {
            region: region.to_owned(),
            role_arn: role_arn.to_owned(),
        })
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Provider::Local { .. } => "local",
            Provider::Aws { .. } => "aws",
        }
    }
}

/// `xx-name-N`, `xx-gov-name-N` and the like.
fn is_aws_region(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() >= 3
        && s.len() <= 32
        && parts[0].len() == 2
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase()))
        && parts[parts.len() - 1].chars().all(|c| c.is_ascii_digit())
        && !parts[parts.len() - 1].is_empty()
}

/// `arn:<partition>:iam::<account>:role/<path/name>`.
fn is_role_arn(s: &str) -> bool {
    let parts: Vec<&str> = s.splitn(6, ':').collect();
    let [arn, partition, service, region, account, resource] = parts.as_slice() else {
        return false;
    };
    let name = resource.strip_prefix("role/").unwrap_or_default();
    *arn == "arn"
        && partition.starts_with("aws")
        && partition
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '-')
        && *service == "iam"
        && region.is_empty()
        && account.len() == 12
        && account.chars().all(|c| c.is_ascii_digit())
        && !name.is_empty()
        && name.len() <= 512
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-/".contains(c))
}

/// Everything about a target except its id, tenant and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSpec {
    pub provider: Provider,
    pub credential_ref: CredentialRef,
    pub max_concurrent_deployments: u32,
    pub enabled: bool,
}

/// The largest concurrency a target may allow.
pub const MAX_CONCURRENCY: u32 = 1000;

impl TargetSpec {
    pub fn new(
        provider: Provider,
        credential_ref: CredentialRef,
        max_concurrent_deployments: u32,
        enabled: bool,
    ) -> Result<Self, Invalid> {
        if max_concurrent_deployments == 0 || max_concurrent_deployments > MAX_CONCURRENCY {
            return Err(Invalid(format!(
                "max_concurrent_deployments must be 1..{MAX_CONCURRENCY}"
            )));
        }
        Ok(TargetSpec {
            provider,
            credential_ref,
            max_concurrent_deployments,
            enabled,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths() {
        assert!(Provider::local("/srv/cairn/acme").is_ok());
        for bad in ["", "relative/dir", "/srv/../etc", "/srv/./x", "/a\nb"] {
            assert!(Provider::local(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn aws_regions_and_arns() {
        assert!(Provider::aws("eu-west-1", "arn:aws:iam::123456789012:role/cairn-deploy").is_ok());
        assert!(
            Provider::aws("us-gov-west-1", "arn:aws-us-gov:iam::123456789012:role/a/b").is_ok()
        );
        assert!(Provider::aws("euwest1", "arn:aws:iam::123456789012:role/x").is_err());
        assert!(Provider::aws("eu-west-1", "arn:aws:iam::12345:role/x").is_err());
        assert!(Provider::aws("eu-west-1", "arn:aws:iam::123456789012:user/x").is_err());
        assert!(Provider::aws("eu-west-1", "arn:aws:s3:::bucket").is_err());
    }

    #[test]
    fn external_ids_are_random_and_fit_sts() {
        let a = ExternalId::generate().unwrap();
        let b = ExternalId::generate().unwrap();
        assert_ne!(a, b);
        let hex = a.as_str().strip_prefix("cairn-").unwrap();
        assert_eq!(hex.len(), 32);
        assert!(hex.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn concurrency_bounds() {
        let p = Provider::local("/x").unwrap();
        let c = CredentialRef::parse("c").unwrap();
        assert!(TargetSpec::new(p.clone(), c.clone(), 0, true).is_err());
        assert!(TargetSpec::new(p.clone(), c.clone(), 1001, true).is_err());
        assert!(TargetSpec::new(p, c, 4, false).is_ok());
    }
}
