//! The `webhook_deliveries` outbox and its `webhook_attempts` log. A sender claims due
//! deliveries that are the head (lowest pending sequence) of their subscription with
//! `FOR UPDATE SKIP LOCKED` and a lease; only the lease holder settles one (compare-and-set
//! on `lease_owner`), and a lease that runs out lets another sender take the delivery over.
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

#[derive(Debug, Clone, FromRow)]
pub struct DeliveryRow {
    pub delivery_id: Uuid,
    pub subscription_id: Uuid,
    pub tenant_id: Uuid,
    pub sequence: i64,
    pub event_id: Uuid,
    pub event_type: String,
    pub occurred_at: DateTime<Utc>,
    pub data: serde_json::Value,
    pub status: String,
    pub attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

const COLS: &str = "delivery_id, subscription_id, tenant_id, sequence, event_id, event_type, \
                    occurred_at, data, status, attempts, next_attempt_at, created_at, finished_at";

/// A delivery claimed for sending, with what the sender needs from its subscription.
#[derive(Debug, Clone, FromRow)]
pub struct ClaimedRow {
    #[sqlx(flatten)]
    pub delivery: DeliveryRow,
    pub url: String,
    pub secret: String,
}

#[derive(Debug, Clone, FromRow)]
pub struct AttemptRow {
    pub delivery_id: Uuid,
    pub attempt: i32,
    pub started_at: DateTime<Utc>,
    pub latency_ms: Option<i64>,
    pub response_code: Option<i32>,
    pub outcome: String,
    pub error: Option<String>,
}

pub struct NewDelivery<'a> {
    pub subscription_id: Uuid,
    pub tenant_id: Uuid,
    pub sequence: i64,
    pub event_id: Uuid,
    pub event_type: &'a str,
    pub occurred_at: DateTime<Utc>,
    pub data: &'a serde_json::Value,
}

pub async fn delivery_insert(
    conn: &mut PgConnection,
    d: &NewDelivery<'_>,
) -> sqlx::Result<DeliveryRow> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO webhook_deliveries (delivery_id, subscription_id, tenant_id, sequence,
                                         event_id, event_type, occurred_at, data)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {COLS}"
    )))
    .bind(Uuid::now_v7())
    .bind(d.subscription_id)
    .bind(d.tenant_id)
    .bind(d.sequence)
    .bind(d.event_id)
    .bind(d.event_type)
    .bind(d.occurred_at)
    .bind(d.data)
    .fetch_one(conn)
    .await
}

/// Claims up to `limit` due deliveries for `owner` for `lease`: each the head of its
/// enabled subscription, not held by another sender. Counts the attempt and opens its log
/// row (`in_flight`); an earlier attempt left `in_flight` by a sender that lost its lease
/// is marked `abandoned`.
pub async fn deliveries_claim(
    conn: &mut PgConnection,
    owner: Uuid,
    lease: Duration,
    limit: i64,
) -> sqlx::Result<Vec<ClaimedRow>> {
    let cols = COLS
        .split(", ")
        .map(|c| format!("d.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    let claimed: Vec<ClaimedRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "WITH picked AS (
             SELECT d.delivery_id FROM webhook_deliveries d
             JOIN webhook_subscriptions s ON s.subscription_id = d.subscription_id
             WHERE d.status = 'pending' AND d.next_attempt_at <= now()
               AND (d.lease_until IS NULL OR d.lease_until < now())
               AND s.enabled
               AND NOT EXISTS (
                   SELECT 1 FROM webhook_deliveries e
                   WHERE e.subscription_id = d.subscription_id AND e.status = 'pending'
                     AND e.sequence < d.sequence)
             ORDER BY d.next_attempt_at, d.sequence
             LIMIT $3
             FOR UPDATE OF d SKIP LOCKED)
         UPDATE webhook_deliveries d
         SET lease_owner = $1, lease_until = now() + make_interval(secs => $2),
             attempts = d.attempts + 1
         FROM picked, webhook_subscriptions s
         WHERE d.delivery_id = picked.delivery_id AND s.subscription_id = d.subscription_id
         RETURNING {cols}, s.url, s.secret"
    )))
    .bind(owner)
    .bind(lease.as_secs_f64())
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    for c in &claimed {
        sqlx::query(
            "UPDATE webhook_attempts SET outcome = 'abandoned'
             WHERE delivery_id = $1 AND outcome = 'in_flight'",
        )
        .bind(c.delivery.delivery_id)
        .execute(&mut *conn)
        .await?;
        sqlx::query(
            "INSERT INTO webhook_attempts (delivery_id, attempt, outcome)
             VALUES ($1, $2, 'in_flight')",
        )
        .bind(c.delivery.delivery_id)
        .bind(c.delivery.attempts)
        .execute(&mut *conn)
        .await?;
    }
    Ok(claimed)
}

/// How a delivery is left after an attempt.
pub enum Settle {
    Delivered,
    RetryAt(DateTime<Utc>),
    Failed,
    /// The sender stopped before an answer: try again now, elsewhere.
    Released,
}

/// The attempt's log entry.
pub struct AttemptResult<'a> {
    pub latency_ms: Option<i64>,
    pub response_code: Option<i32>,
    pub error: Option<&'a str>,
}

/// Settles a claimed delivery and its attempt log row; `false` when `owner` no longer
/// holds the lease (another sender took it over; nothing is changed).
pub async fn delivery_settle(
    conn: &mut PgConnection,
    delivery_id: Uuid,
    attempt: i32,
    owner: Uuid,
    settle: &Settle,
    result: &AttemptResult<'_>,
) -> sqlx::Result<bool> {
    let (status, next, outcome): (&str, Option<DateTime<Utc>>, &str) = match settle {
        Settle::Delivered => ("delivered", None, "delivered"),
        Settle::RetryAt(at) => ("pending", Some(*at), "retry"),
        Settle::Failed => ("failed", None, "failed"),
        Settle::Released => ("pending", Some(Utc::now()), "abandoned"),
    };
    let done = sqlx::query(
        "UPDATE webhook_deliveries
         SET status = $3, next_attempt_at = COALESCE($4, next_attempt_at),
             lease_owner = NULL, lease_until = NULL,
             finished_at = CASE WHEN $3 = 'pending' THEN NULL ELSE now() END
         WHERE delivery_id = $1 AND lease_owner = $2 AND status = 'pending'",
    )
    .bind(delivery_id)
    .bind(owner)
    .bind(status)
    .bind(next)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    sqlx::query(
        "UPDATE webhook_attempts SET outcome = $3, latency_ms = $4, response_code = $5, error = $6
         WHERE delivery_id = $1 AND attempt = $2",
    )
    .bind(delivery_id)
    .bind(attempt)
    .bind(outcome)
    .bind(result.latency_ms)
    .bind(result.response_code)
    .bind(result.error)
    .execute(conn)
    .await?;
    Ok(true)
}

/// A subscription's deliveries, newest (highest sequence) first, before `before_sequence`.
pub async fn delivery_list(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    subscription_id: Uuid,
    before_sequence: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<DeliveryRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLS} FROM webhook_deliveries
         WHERE tenant_id = $1 AND subscription_id = $2
           AND ($3::bigint IS NULL OR sequence < $3)
         ORDER BY sequence DESC LIMIT $4"
    )))
    .bind(tenant_id)
    .bind(subscription_id)
    .bind(before_sequence)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// The attempt logs of `deliveries`, in attempt order.
pub async fn attempts_of(
    conn: &mut PgConnection,
    deliveries: &[Uuid],
) -> sqlx::Result<Vec<AttemptRow>> {
    sqlx::query_as(
        "SELECT delivery_id, attempt, started_at, latency_ms, response_code, outcome, error
         FROM webhook_attempts WHERE delivery_id = ANY ($1) ORDER BY delivery_id, attempt",
    )
    .bind(deliveries)
    .fetch_all(conn)
    .await
}
