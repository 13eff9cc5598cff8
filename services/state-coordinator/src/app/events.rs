//! Domain events written to the outbox in the same transaction as the change they describe.
use cairn_bus::{Aggregate, ServiceRole};
use cairn_proto::events::{self, event::Payload};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::{Error, Result};

/// Appends one event about a state to the outbox.
pub async fn record(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    state_id: Uuid,
    actor: &str,
    payload: Payload,
) -> Result<()> {
    let event_type = match &payload {
        Payload::GenerationCommitted(_) => "generation_committed",
        Payload::RecoveryRequired(_) => "recovery_required",
        Payload::Recovered(_) => "recovered",
        Payload::LockForced(_) => "lock_forced",
        Payload::RunAdmitted(_) => "run_admitted",
        Payload::RunFinished(_) => "run_finished",
        // Another service's payloads (deployments, drift, runner) are never a state's.
        Payload::Instance(_)
        | Payload::Deployment(_)
        | Payload::Resource(_)
        | Payload::Drift(_)
        | Payload::TargetValidated(_) => {
            return Err(Error::internal(
                "another service's payload is not a state event",
            ));
        }
    };
    let event = cairn_bus::new_event(
        ServiceRole::StateCoordinator,
        tenant_id,
        Aggregate::State,
        state_id,
        event_type,
        actor,
        payload,
    )
    .map_err(|e| Error::internal(format!("state event: {e}")))?;
    Ok(cairn_bus::outbox_insert(conn, &event).await?)
}

pub fn generation_committed(
    state_id: Uuid,
    generation: u64,
    run_id: Option<Uuid>,
    attempt: u32,
    serial: u64,
    recovered_from: u64,
) -> Payload {
    Payload::GenerationCommitted(events::GenerationCommitted {
        state_id: state_id.to_string(),
        generation,
        run_id: run_id.map(|r| r.to_string()).unwrap_or_default(),
        attempt,
        tofu_serial: i64::try_from(serial).unwrap_or(i64::MAX),
        recovered_from,
    })
}
