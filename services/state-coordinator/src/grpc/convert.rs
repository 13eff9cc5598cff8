//! Conversions between protobuf messages and the coordinator's domain and store types.
use cairn_contract::{InvalidId, RunKind, TenantId};
use cairn_proto::state as pb;
use cairn_service::BaseError;
use chrono::{DateTime, Utc};
use tonic::Status;

use crate::domain::{ExecutionContext, Outcome};
use crate::error::Error;
use crate::store::states::StateRow;

pub fn ts(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// An id field that does not parse: INVALID_ARGUMENT naming the field
/// (`RunId::parse("run_id", &r.run_id).map_err(invalid)?`).
pub fn invalid(err: InvalidId) -> Status {
    BaseError::from(err).into()
}

/// An optional id field: empty is none, anything else must parse.
pub fn optional<T>(
    s: &str,
    parse: impl FnOnce(&str) -> Result<T, InvalidId>,
) -> Result<Option<T>, Status> {
    if s.is_empty() {
        Ok(None)
    } else {
        parse(s).map(Some).map_err(invalid)
    }
}

pub fn attempt(n: u32) -> Result<i32, Error> {
    match i32::try_from(n) {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(Error::invalid_argument(
            "attempt must be a positive number".to_owned(),
        )),
    }
}

pub fn gen_u64(g: i64) -> u64 {
    u64::try_from(g).unwrap_or(0)
}

pub fn state(row: &StateRow) -> pb::State {
    pb::State {
        state_id: row.state_id.to_string(),
        tenant_id: row.tenant_id.to_string(),
        instance_id: row.instance_id.to_string(),
        key: row.key.clone(),
        status: if row.fenced() {
            pb::StateStatus::RecoveryRequired as i32
        } else {
            pb::StateStatus::Healthy as i32
        },
        current_generation: gen_u64(row.current_generation),
        fence_reason: row.fence_reason.clone().unwrap_or_default(),
        created_at: Some(ts(row.created_at)),
    }
}

pub fn kind_from_pb(k: i32) -> Result<RunKind, Error> {
    match pb::RunKind::try_from(k) {
        Ok(pb::RunKind::Plan) => Ok(RunKind::Plan),
        Ok(pb::RunKind::Apply) => Ok(RunKind::Apply),
        Ok(pb::RunKind::Destroy) => Ok(RunKind::Destroy),
        Ok(pb::RunKind::Preview) => Ok(RunKind::Preview),
        Ok(pb::RunKind::Drift) => Ok(RunKind::Drift),
        Ok(pb::RunKind::Unspecified) | Err(_) => Err(Error::invalid_argument(
            "kind must be plan, apply, destroy, preview or drift".to_owned(),
        )),
    }
}

pub fn kind_to_pb(k: RunKind) -> i32 {
    (match k {
        RunKind::Plan => pb::RunKind::Plan,
        RunKind::Apply => pb::RunKind::Apply,
        RunKind::Destroy => pb::RunKind::Destroy,
        RunKind::Preview => pb::RunKind::Preview,
        RunKind::Drift => pb::RunKind::Drift,
    }) as i32
}

pub fn outcome_from_pb(o: i32) -> Result<Outcome, Error> {
    match pb::RunOutcome::try_from(o) {
        Ok(pb::RunOutcome::Succeeded) => Ok(Outcome::Succeeded),
        Ok(pb::RunOutcome::Failed) => Ok(Outcome::Failed),
        Ok(pb::RunOutcome::Cancelled) => Ok(Outcome::Cancelled),
        Ok(pb::RunOutcome::TimedOut) => Ok(Outcome::TimedOut),
        Ok(pb::RunOutcome::Interrupted) => Ok(Outcome::Interrupted),
        Ok(pb::RunOutcome::Unspecified) | Err(_) => {
            Err(Error::invalid_argument("outcome is required".to_owned()))
        }
    }
}

pub fn context_from_pb(c: Option<pb::ExecutionContext>) -> Result<ExecutionContext, Error> {
    let c = c.ok_or_else(|| Error::invalid_argument("context is required".to_owned()))?;
    TenantId::parse("context.tenant_id", &c.tenant_id)?;
    if c.target_id.is_empty() {
        return Err(Error::invalid_argument(
            "context.target_id is required".to_owned(),
        ));
    }
    Ok(ExecutionContext {
        tenant_id: c.tenant_id,
        target_id: c.target_id,
        target_settings: c.target_settings.into_iter().collect(),
        credential_ref: c.credential_ref,
        sensitive_variable_refs: c.sensitive_variable_refs.into_iter().collect(),
    })
}

pub fn context_to_pb(c: ExecutionContext) -> pb::ExecutionContext {
    pb::ExecutionContext {
        tenant_id: c.tenant_id,
        target_id: c.target_id,
        target_settings: c.target_settings.into_iter().collect(),
        credential_ref: c.credential_ref,
        sensitive_variable_refs: c.sensitive_variable_refs.into_iter().collect(),
    }
}
