//! The `target_slots` table: a target's deployment slots (`max_concurrent_deployments`),
//! taken by a running deployment and released in the transaction that parks or ends it.
use sqlx::PgConnection;
use uuid::Uuid;

/// Takes a free slot of `target_id` (1..=`max`) for the deployment, unless a deployment of
/// the target that was requested earlier is still waiting for one (they go in order).
/// Returns true when the deployment holds a slot (also when it already did).
pub async fn slot_take(
    conn: &mut PgConnection,
    target_id: Uuid,
    deployment_id: Uuid,
    max: i32,
) -> sqlx::Result<bool> {
    let held: Option<i32> =
        sqlx::query_scalar("SELECT slot FROM target_slots WHERE deployment_id = $1")
            .bind(deployment_id)
            .fetch_optional(&mut *conn)
            .await?;
    if held.is_some() {
        return Ok(true);
    }
    // Earlier requests of this target still waiting for a slot go first.
    let ahead: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM deployments d
          WHERE d.target_id = $1 AND d.kind <> 'preview' AND d.status = 'queued'
            AND d.deployment_id < $2 AND d.cancel_requested_at IS NULL
            AND NOT EXISTS (SELECT 1 FROM target_slots s WHERE s.deployment_id = d.deployment_id)",
    )
    .bind(target_id)
    .bind(deployment_id)
    .fetch_one(&mut *conn)
    .await?;
    let used: i64 = sqlx::query_scalar("SELECT count(*) FROM target_slots WHERE target_id = $1")
        .bind(target_id)
        .fetch_one(&mut *conn)
        .await?;
    if used + ahead >= i64::from(max) {
        return Ok(false);
    }
    let taken = sqlx::query(
        "INSERT INTO target_slots (target_id, slot, deployment_id)
         SELECT $1, s, $2 FROM generate_series(1, $3) AS s
          WHERE NOT EXISTS (SELECT 1 FROM target_slots t WHERE t.target_id = $1 AND t.slot = s)
          ORDER BY s LIMIT 1
         ON CONFLICT DO NOTHING",
    )
    .bind(target_id)
    .bind(deployment_id)
    .bind(max)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(taken == 1)
}

/// Releases the deployment's slot, if it holds one.
pub async fn slot_release(conn: &mut PgConnection, deployment_id: Uuid) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM target_slots WHERE deployment_id = $1")
        .bind(deployment_id)
        .execute(conn)
        .await?;
    Ok(())
}
