//! The `webhook_subscriptions` table. Sequences are allocated here: `next_sequence` is
//! bumped by an UPDATE, whose row lock orders concurrent allocations for one subscription.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct SubscriptionRow {
    pub subscription_id: Uuid,
    pub tenant_id: Uuid,
    pub url: String,
    pub event_types: Vec<String>,
    pub description: String,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub disabled_at: Option<DateTime<Utc>>,
    pub consecutive_failures: i32,
    pub created_at: DateTime<Utc>,
}

/// Never the secret: it is read only by the sender, with the delivery it signs.
const COLS: &str = "subscription_id, tenant_id, url, event_types, description, enabled, \
                    disabled_reason, disabled_at, consecutive_failures, created_at";

pub struct NewSubscription<'a> {
    pub subscription_id: Uuid,
    pub tenant_id: Uuid,
    pub url: &'a str,
    pub event_types: Vec<String>,
    pub secret: &'a str,
    pub description: &'a str,
}

pub async fn subscription_insert(
    conn: &mut PgConnection,
    s: &NewSubscription<'_>,
) -> sqlx::Result<SubscriptionRow> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO webhook_subscriptions (subscription_id, tenant_id, url, event_types, secret,
                                            description)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLS}"
    )))
    .bind(s.subscription_id)
    .bind(s.tenant_id)
    .bind(s.url)
    .bind(&s.event_types)
    .bind(s.secret)
    .bind(s.description)
    .fetch_one(conn)
    .await
}

pub async fn subscription_get(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    subscription_id: Uuid,
) -> sqlx::Result<Option<SubscriptionRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM webhook_subscriptions WHERE tenant_id = $1 AND subscription_id = $2"
    )))
    .bind(tenant_id)
    .bind(subscription_id)
    .fetch_optional(conn)
    .await
}

pub async fn subscription_list(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<SubscriptionRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM webhook_subscriptions
         WHERE tenant_id = $1 AND ($2::uuid IS NULL OR subscription_id > $2)
         ORDER BY subscription_id LIMIT $3"
    )))
    .bind(tenant_id)
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// Deletes a subscription with its deliveries and their attempts (cascade).
pub async fn subscription_delete(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    subscription_id: Uuid,
) -> sqlx::Result<Option<SubscriptionRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "DELETE FROM webhook_subscriptions WHERE tenant_id = $1 AND subscription_id = $2
         RETURNING {COLS}"
    )))
    .bind(tenant_id)
    .bind(subscription_id)
    .fetch_optional(conn)
    .await
}

/// Allocates the next sequence of every enabled subscription of `tenant_id` that names
/// `event_type`: `(subscription id, sequence)`.
pub async fn sequences_for_event(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    event_type: &str,
) -> sqlx::Result<Vec<(Uuid, i64)>> {
    sqlx::query_as(
        "UPDATE webhook_subscriptions SET next_sequence = next_sequence + 1
         WHERE tenant_id = $1 AND enabled AND $2 = ANY (event_types)
         RETURNING subscription_id, next_sequence - 1",
    )
    .bind(tenant_id)
    .bind(event_type)
    .fetch_all(conn)
    .await
}

/// Allocates the next sequence of one subscription (the Test RPC's ping); `None` when the
/// tenant has no such subscription.
pub async fn sequence_allocate(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    subscription_id: Uuid,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar(
        "UPDATE webhook_subscriptions SET next_sequence = next_sequence + 1
         WHERE tenant_id = $1 AND subscription_id = $2 RETURNING next_sequence - 1",
    )
    .bind(tenant_id)
    .bind(subscription_id)
    .fetch_optional(conn)
    .await
}

/// A successful attempt: the failure streak ends.
pub async fn subscription_succeeded(
    conn: &mut PgConnection,
    subscription_id: Uuid,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE webhook_subscriptions SET consecutive_failures = 0
         WHERE subscription_id = $1 AND consecutive_failures <> 0",
    )
    .bind(subscription_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// A failed attempt: the streak grows; at `limit` an enabled subscription is disabled (a
/// compare-and-set on `enabled`). Returns the row when this call disabled it.
pub async fn subscription_failed(
    conn: &mut PgConnection,
    subscription_id: Uuid,
    limit: i32,
    reason: &str,
) -> sqlx::Result<Option<SubscriptionRow>> {
    let streak: Option<(i32, bool)> = sqlx::query_as(
        "UPDATE webhook_subscriptions SET consecutive_failures = consecutive_failures + 1
         WHERE subscription_id = $1 RETURNING consecutive_failures, enabled",
    )
    .bind(subscription_id)
    .fetch_optional(&mut *conn)
    .await?;
    match streak {
        Some((n, true)) if n >= limit => {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "UPDATE webhook_subscriptions
                 SET enabled = false, disabled_at = now(), disabled_reason = $2
                 WHERE subscription_id = $1 AND enabled RETURNING {COLS}"
            )))
            .bind(subscription_id)
            .bind(reason)
            .fetch_optional(conn)
            .await
        }
        _ => Ok(None),
    }
}
