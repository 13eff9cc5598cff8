//! Conversions between protobuf messages and domain values or store rows.
use cairn_proto::tenancy as pb;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::domain::Invalid;
use crate::domain::names::CredentialRef;
use crate::domain::target::{Provider, TargetSpec};
use crate::domain::validation::ValidationStatus;
use crate::error::Error;
use crate::store::audit::AuditRow;
use crate::store::target_validations::ValidationRow;
use crate::store::targets::TargetRow;
use crate::store::tenants::TenantRow;
use crate::store::tokens::TokenRow;
use crate::store::users::MemberRow;

pub fn ts(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

pub fn from_ts(field: &str, t: &prost_types::Timestamp) -> Result<DateTime<Utc>, Error> {
    DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap_or(u32::MAX))
        .ok_or_else(|| Error::invalid_argument(format!("{field} is not a valid time")))
}

/// An optional UUID page token.
pub fn page_token(s: &str) -> Result<Option<Uuid>, Error> {
    if s.is_empty() {
        return Ok(None);
    }
    Uuid::parse_str(s)
        .map(Some)
        .map_err(|_| Error::invalid_argument("page_token is not valid".to_owned()))
}

/// The next page token: the last id when the page was full.
pub fn next_token<T>(rows: &[T], limit: i64, id: impl Fn(&T) -> String) -> String {
    if i64::try_from(rows.len()).unwrap_or(i64::MAX) >= limit {
        rows.last().map(id).unwrap_or_default()
    } else {
        String::new()
    }
}

pub fn tenant(r: &TenantRow) -> pb::Tenant {
    pb::Tenant {
        tenant_id: r.tenant_id.to_string(),
        slug: r.slug.clone(),
        display_name: r.display_name.clone(),
        created_at: Some(ts(r.created_at)),
    }
}

pub fn member(r: &MemberRow) -> pb::Member {
    pb::Member {
        user_id: r.user_id.to_string(),
        tenant_id: r.tenant_id.to_string(),
        email: r.email.clone(),
        display_name: r.display_name.clone(),
        role: r.role.clone(),
        added_at: Some(ts(r.created_at)),
    }
}

pub fn api_token(r: &TokenRow) -> pb::ApiToken {
    pb::ApiToken {
        token_id: r.token_id.to_string(),
        tenant_id: r.tenant_id.map(|t| t.to_string()).unwrap_or_default(),
        user_id: r.user_id.map(|t| t.to_string()).unwrap_or_default(),
        name: r.name.clone(),
        role: r.role.clone(),
        scopes: r.scopes.clone(),
        created_at: Some(ts(r.created_at)),
        expires_at: r.expires_at.map(ts),
        revoked_at: r.revoked_at.map(ts),
        last_used_at: r.last_used_at.map(ts),
    }
}

pub fn target(r: &TargetRow) -> pb::Target {
    let provider = match (
        r.provider_kind.as_str(),
        &r.local_base_dir,
        &r.aws_region,
        &r.aws_role_arn,
    ) {
        ("local", Some(base_dir), _, _) => {
            Some(pb::target_spec::Provider::Local(pb::LocalProvider {
                base_dir: base_dir.clone(),
            }))
        }
        ("aws", _, Some(region), Some(role_arn)) => {
            Some(pb::target_spec::Provider::Aws(pb::AwsProvider {
                region: region.clone(),
                role_arn: role_arn.clone(),
                external_id: r.external_id.clone(),
            }))
        }
        _ => None,
    };
    pb::Target {
        target_id: r.target_id.to_string(),
        tenant_id: r.tenant_id.to_string(),
        name: r.name.clone(),
        spec: Some(pb::TargetSpec {
            provider,
            credential_ref: r.credential_ref.clone(),
            max_concurrent_deployments: u32::try_from(r.max_concurrent_deployments).unwrap_or(0),
            enabled: r.enabled,
        }),
        created_at: Some(ts(r.created_at)),
        updated_at: Some(ts(r.updated_at)),
        last_validation: r.validation.row().as_ref().map(validation),
    }
}

pub fn validation(v: &ValidationRow) -> pb::TargetValidation {
    let status = match v.status() {
        Some(ValidationStatus::Pending) => pb::TargetValidationStatus::Pending,
        Some(ValidationStatus::Succeeded) => pb::TargetValidationStatus::Succeeded,
        Some(ValidationStatus::Failed) => pb::TargetValidationStatus::Failed,
        None => pb::TargetValidationStatus::Unspecified,
    };
    pb::TargetValidation {
        validation_id: v.validation_id.to_string(),
        status: status as i32,
        account_id: v.account_id.clone().unwrap_or_default(),
        arn: v.arn.clone().unwrap_or_default(),
        error: v.error.clone().unwrap_or_default(),
        transient: v.transient,
        requested_at: Some(ts(v.requested_at)),
        finished_at: v.finished_at.map(ts),
        runner_instance: v.runner_instance.clone().unwrap_or_default(),
    }
}

impl TryFrom<Option<pb::TargetSpec>> for TargetSpec {
    type Error = Invalid;

    fn try_from(spec: Option<pb::TargetSpec>) -> Result<Self, Invalid> {
        let spec = spec.ok_or_else(|| Invalid::new("spec is required"))?;
        let provider = match spec.provider {
            Some(pb::target_spec::Provider::Local(l)) => Provider::local(&l.base_dir)?,
            Some(pb::target_spec::Provider::Aws(a)) => Provider::aws(&a.region, &a.role_arn)?,
            None => return Err(Invalid::new("spec.provider is required (local or aws)")),
        };
        TargetSpec::new(
            provider,
            CredentialRef::parse(&spec.credential_ref)?,
            spec.max_concurrent_deployments,
            spec.enabled,
        )
    }
}

pub fn audit_entry(r: &AuditRow) -> pb::AuditEntry {
    pb::AuditEntry {
        entry_id: r.entry_id.to_string(),
        tenant_id: r.tenant_id.map(|t| t.to_string()).unwrap_or_default(),
        actor: r.actor.clone(),
        action: r.action.clone(),
        object_type: r.object_type.clone(),
        object_id: r.object_id.clone(),
        occurred_at: Some(ts(r.occurred_at)),
        recorded_at: Some(ts(r.recorded_at)),
        source: r.source.clone(),
        detail_json: r.detail.to_string(),
    }
}
