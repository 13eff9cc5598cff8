//! The coordinator-wide after-restore switch.
use sqlx::PgConnection;

pub async fn after_restore(conn: &mut PgConnection) -> sqlx::Result<bool> {
    sqlx::query_scalar("SELECT after_restore FROM coordinator_flags WHERE singleton")
        .fetch_one(conn)
        .await
}

pub async fn set_after_restore(
    conn: &mut PgConnection,
    on: bool,
    reason: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE coordinator_flags SET after_restore = $1, reason = $2, changed_at = now()
         WHERE singleton",
    )
    .bind(on)
    .bind(reason)
    .execute(conn)
    .await?;
    Ok(())
}
