//! The coordinator-wide after-restore switch. Every switch bumps `epoch`, so that a
//! VerifyAll pass ends the mode only when nobody switched it since the pass began.
use sqlx::PgConnection;

pub async fn after_restore(conn: &mut PgConnection) -> sqlx::Result<bool> {
    sqlx::query_scalar("SELECT after_restore FROM coordinator_flags WHERE singleton")
        .fetch_one(conn)
        .await
}

/// The switch's epoch (bumped by every `set_after_restore`).
pub async fn epoch(conn: &mut PgConnection) -> sqlx::Result<i64> {
    sqlx::query_scalar("SELECT epoch FROM coordinator_flags WHERE singleton")
        .fetch_one(conn)
        .await
}

pub async fn set_after_restore(
    conn: &mut PgConnection,
    on: bool,
    reason: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE coordinator_flags
         SET after_restore = $1, reason = $2, changed_at = now(), epoch = epoch + 1
         WHERE singleton",
    )
    .bind(on)
    .bind(reason)
    .execute(conn)
    .await?;
    Ok(())
}

/// Ends after-restore mode if it is on and nobody switched it since `seen_epoch` (the epoch
/// when the VerifyAll pass that passed began); true when it ended.
pub async fn end_after_restore_if_unchanged(
    conn: &mut PgConnection,
    seen_epoch: i64,
    reason: &str,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "UPDATE coordinator_flags
         SET after_restore = false, reason = $2, changed_at = now(), epoch = epoch + 1
         WHERE singleton AND after_restore AND epoch = $1",
    )
    .bind(seen_epoch)
    .bind(reason)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}
