//! Domain events of instances and deployments, written to the outbox in the change's
//! transaction (ids, names and counts only: never parameter values).
use cairn_bus::{Aggregate, ServiceRole};
use cairn_proto::events::{DeploymentChange, InstanceChange, event::Payload};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::deployments::DeploymentRow;
use crate::store::instances::InstanceRow;
use crate::store::steps::StepRow;

async fn write(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    aggregate: Aggregate,
    aggregate_id: Uuid,
    event_type: &str,
    actor: &str,
    payload: Payload,
) -> Result<()> {
    let event = cairn_bus::new_event(
        ServiceRole::Deployments,
        tenant_id,
        aggregate,
        aggregate_id,
        event_type,
        actor,
        payload,
    )
    .map_err(|e| Error::internal(format!("{aggregate} event: {e}")))?;
    Ok(cairn_bus::outbox_insert(conn, &event).await?)
}

/// `instance.<event_type>` (created, updated, deleted).
pub async fn instance(
    conn: &mut PgConnection,
    row: &InstanceRow,
    event_type: &str,
    actor: &str,
) -> Result<()> {
    let payload = Payload::Instance(InstanceChange {
        instance_id: row.instance_id.to_string(),
        name: row.name.clone(),
        template_id: row.template_id.to_string(),
        template_version: u32::try_from(row.template_version).unwrap_or(0),
        target_id: row.target_id.to_string(),
        environment: row.environment.clone(),
        status: row.status.clone(),
    });
    write(
        conn,
        row.tenant_id,
        Aggregate::Instance,
        row.instance_id,
        event_type,
        actor,
        payload,
    )
    .await
}

/// `deployment.<event_type>` (requested, cancelled, …) with the steps' counts.
pub async fn deployment(
    conn: &mut PgConnection,
    row: &DeploymentRow,
    steps: &[StepRow],
    event_type: &str,
    actor: &str,
) -> Result<()> {
    let count = |status: &str| {
        u32::try_from(steps.iter().filter(|s| s.status == status).count()).unwrap_or(u32::MAX)
    };
    let payload = Payload::Deployment(DeploymentChange {
        deployment_id: row.deployment_id.to_string(),
        instance_id: row.instance_id.to_string(),
        instance_name: row.instance_name.clone(),
        kind: row.kind.clone(),
        status: row.status.clone(),
        target_id: row.target_id.to_string(),
        environment: row.environment.clone(),
        steps: u32::try_from(steps.len()).unwrap_or(u32::MAX),
        succeeded: count("succeeded"),
        failed: count("failed"),
        skipped: count("skipped"),
        plan_set_hash: row.plan_set_hash.clone(),
        summary: row.summary.clone(),
    });
    write(
        conn,
        row.tenant_id,
        Aggregate::Deployment,
        row.deployment_id,
        event_type,
        actor,
        payload,
    )
    .await
}

/// `resource.<event_type>` (applied, destroyed): what drift and webhooks consume.
pub async fn resource(
    conn: &mut PgConnection,
    d: &DeploymentRow,
    resource: &str,
    state_id: Uuid,
    run_id: Uuid,
    event_type: &str,
) -> Result<()> {
    let payload = Payload::Resource(cairn_proto::events::ResourceChange {
        instance_id: d.instance_id.to_string(),
        resource: resource.to_owned(),
        state_id: state_id.to_string(),
        run_id: run_id.to_string(),
        target_id: d.target_id.to_string(),
        environment: d.environment.clone(),
        deployment_id: d.deployment_id.to_string(),
    });
    write(
        conn,
        d.tenant_id,
        Aggregate::Resource,
        d.instance_id,
        event_type,
        "svc:deployments",
        payload,
    )
    .await
}
