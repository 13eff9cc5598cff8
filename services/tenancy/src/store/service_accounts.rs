//! The `service_accounts` table.
use sqlx::PgConnection;
use uuid::Uuid;

/// The id of the service account `name`, created if needed; and whether it was created.
pub async fn service_account_ensure(
    conn: &mut PgConnection,
    name: &str,
) -> sqlx::Result<(Uuid, bool)> {
    let inserted: Option<Uuid> = sqlx::query_scalar(
        "INSERT INTO service_accounts (service_account_id, name) VALUES ($1, $2)
         ON CONFLICT (name) DO NOTHING RETURNING service_account_id",
    )
    .bind(Uuid::now_v7())
    .bind(name)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(id) = inserted {
        return Ok((id, true));
    }
    let id = sqlx::query_scalar("SELECT service_account_id FROM service_accounts WHERE name = $1")
        .bind(name)
        .fetch_one(conn)
        .await?;
    Ok((id, false))
}

pub async fn service_account_name(
    conn: &mut PgConnection,
    service_account_id: Uuid,
) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar("SELECT name FROM service_accounts WHERE service_account_id = $1")
        .bind(service_account_id)
        .fetch_optional(conn)
        .await
}
