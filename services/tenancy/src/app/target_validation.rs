//! Target validation (ARCHITECTURE §3, §5): only a runner holds the base credentials, so
//! tenancy does not check a role itself. `ValidateTarget` records a pending validation on
//! the target and, in the same transaction, writes the request to the message outbox for
//! the target's validation subject (`cairn.runq.<target id>.validate`, on the run queue
//! stream; `Nats-Msg-Id` = the validation id; tenancy's NATS user may publish there but not
//! run requests on `cairn.runq.<target id>`). The
//! runner serving the target answers with `target.validated` on the events stream, which
//! tenancy's events consumer stores with [`record_answer`] — only while it answers the
//! target's newest request.
//!
//! The request carries the references the runner needs (credential reference, region, role
//! ARN, external id), read here in the transaction that records the validation: the runner
//! has no other source of a target's settings (runs get theirs from the coordinator's
//! registered context), and it checks exactly what was recorded for this validation, not
//! settings that changed in between. Messages carry references only, never a credential.
use cairn_auth::{Principal, Role};
use cairn_bus::Aggregate;
use cairn_proto::events::Event;
use cairn_proto::events::event::Payload;
use cairn_proto::runner as rpb;
use prost::Message;
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::App;
use super::access;
use super::changes::{self, Change};
use crate::domain::ids::{TargetId, TenantId};
use crate::domain::names::TargetName;
use crate::domain::validation::ValidationOutcome;
use crate::error::{Error, Result};
use crate::store::target_validations::{self as store, ValidationRow};
use crate::store::targets::{self, TargetRow};

/// A target named by id or by name in its tenant.
#[derive(Debug, Clone)]
pub enum TargetRef {
    Id(TargetId),
    Name(TargetName),
}

impl TargetRef {
    /// A UUID is an id; anything else must be a valid name.
    pub fn parse(field: &'static str, s: &str) -> Result<Self> {
        if s.is_empty() {
            return Err(Error::invalid_argument(format!("{field} is required")));
        }
        if let Ok(id) = TargetId::parse(field, s) {
            return Ok(TargetRef::Id(id));
        }
        Ok(TargetRef::Name(TargetName::parse(s)?))
    }
}

/// The request asking the runner to validate `target`.
fn request_of(target: &TargetRow, validation_id: Uuid) -> Result<rpb::TargetValidationRequest> {
    let (Some(region), Some(role_arn)) = (&target.aws_region, &target.aws_role_arn) else {
        return Err(Error::failed_precondition(format!(
            "target {:?} is a {} target: only an AWS target has a role to validate",
            target.name, target.provider_kind
        )));
    };
    Ok(rpb::TargetValidationRequest {
        validation_id: validation_id.to_string(),
        tenant_id: target.tenant_id.to_string(),
        target_id: target.target_id.to_string(),
        credential_ref: target.credential_ref.clone(),
        region: region.clone(),
        role_arn: role_arn.clone(),
        external_id: target.external_id.clone(),
    })
}

impl App {
    /// Queues a validation of an AWS target and answers with it, pending. Admins only (like
    /// an update); another tenant's target is NOT_FOUND.
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant))]
    pub async fn validate_target(
        &self,
        who: &Principal,
        tenant: TenantId,
        target: TargetRef,
    ) -> Result<(TargetRow, ValidationRow)> {
        access::member(who, tenant, Role::Admin, "target")?;
        let validation_id = Uuid::new_v4();
        let done = cairn_db::transaction!(&self.pool, |conn| {
            let row = match &target {
                TargetRef::Id(id) => targets::target_get(conn, tenant.uuid(), id.uuid()).await?,
                TargetRef::Name(name) => {
                    targets::target_get_by_name(conn, tenant.uuid(), name.as_str()).await?
                }
            }
            .ok_or_else(|| Error::not_found("target".to_owned()))?;
            let request = request_of(&row, validation_id)?;
            let validation =
                store::validation_request(conn, tenant.uuid(), row.target_id, validation_id)
                    .await?;
            let subject = cairn_bus::Namespace::root()
                .runq_validate(&row.target_id.to_string())
                .map_err(|e| Error::internal(format!("validation request subject: {e}")))?;
            cairn_bus::message_outbox_insert(
                conn,
                &subject,
                &validation_id.to_string(),
                &request.encode_to_vec(),
            )
            .await?;
            changes::record(
                conn,
                Change {
                    tenant_id: Some(tenant.uuid()),
                    actor: &who.subject,
                    object_type: Aggregate::Target,
                    object_id: row.target_id.to_string(),
                    event: "validation_requested",
                    detail: json!({
                        "name": row.name,
                        "validation_id": validation_id,
                        "role_arn": row.aws_role_arn,
                        "credential_ref": row.credential_ref,
                    }),
                },
            )
            .await?;
            Ok::<_, Error>((row, validation))
        })?;
        self.committed();
        self.queued();
        tracing::info!(%validation_id, target_id = %done.0.target_id, "target validation queued");
        Ok(done)
    }
}

/// Stores a runner's `target.validated` answer (inside the events consumer's transaction,
/// next to the event id's idempotency key). Kept only if it answers the target's pending
/// validation of that tenant; anything else (another event, an older request's late answer,
/// a target since deleted, ids that are not UUIDs) changes nothing. Returns whether it was
/// stored.
pub async fn record_answer(conn: &mut PgConnection, event: &Event) -> Result<bool> {
    let Some(Payload::TargetValidated(answer)) = &event.payload else {
        return Ok(false);
    };
    let ids = (
        Uuid::parse_str(&event.tenant_id),
        Uuid::parse_str(&answer.target_id),
        Uuid::parse_str(&answer.validation_id),
    );
    let (Ok(tenant), Ok(target), Ok(validation)) = ids else {
        // No validation tenancy asked for has such ids: nothing to store, nothing to retry.
        tracing::warn!(
            event_id = event.event_id,
            "target.validated names no valid tenant, target or validation id; ignored"
        );
        return Ok(false);
    };
    let outcome = ValidationOutcome {
        ok: answer.ok,
        account_id: answer.account_id.clone(),
        arn: answer.arn.clone(),
        error: answer.error.clone(),
        transient: answer.transient,
        runner_instance: answer.runner_instance.clone(),
    };
    let stored = store::validation_finish(conn, tenant, target, validation, &outcome).await?;
    if stored {
        tracing::info!(%tenant, %target, %validation, ok = outcome.ok, "target validation answered");
    } else {
        tracing::info!(%tenant, %target, %validation, "target validation answer ignored: not the target's pending validation");
    }
    Ok(stored)
}
