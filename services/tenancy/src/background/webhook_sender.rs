//! The webhook sender: claims due deliveries (each the head of its subscription, so a
//! subscription's deliveries go out one at a time, in sequence order), POSTs each signed
//! body, logs the attempt, and settles the delivery — delivered, retried later, or failed —
//! together with the subscription's failure streak, disabling it (audit entry and
//! `webhook.disabled` through the outbox) when the streak reaches the limit.
//!
//! Replicas share the work through the database: a claim is a `FOR UPDATE SKIP LOCKED`
//! lease, only the holder settles. A sender that stops hands its in-flight deliveries back;
//! one that dies leaves them to be taken over when their lease runs out, so nothing is lost
//! and a confirmed delivery is never sent again.
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use chrono::Utc;
use serde_json::json;
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use crate::app::changes::{self, Change};
use crate::domain::webhook::body::{Body, timestamp};
use crate::domain::webhook::retry::{Next, Response, RetryPolicy};
use crate::domain::webhook::signature::HEADER;
use crate::domain::webhook::{AddressPolicy, WebhookSecret, WebhookUrl};
use crate::error::{Error, Result};
use crate::store::webhook_deliveries::{
    AttemptResult, ClaimedRow, Settle, deliveries_claim, delivery_settle,
};
use crate::store::webhooks::{subscription_failed, subscription_succeeded};
use crate::webhook_config::WebhookArgs;
use crate::webhook_http;

/// The actor of changes the sender makes (disabling a subscription).
pub const ACTOR: &str = "cairn-tenancy";

/// One sender (one per replica; several may run against one database).
#[derive(Clone)]
pub struct Sender {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    client: reqwest::Client,
    /// This sender's lease owner id.
    owner: Uuid,
    concurrency: usize,
    lease: Duration,
    poll: Duration,
    policy: AddressPolicy,
    retry: RetryPolicy,
    disable_after: i32,
    /// Wakes this sender (new deliveries).
    wake: Arc<Notify>,
    /// Wakes the outbox relay (a `webhook.disabled` event was written).
    outbox: Arc<Notify>,
}

impl Sender {
    pub fn new(
        pool: PgPool,
        args: &WebhookArgs,
        wake: Arc<Notify>,
        outbox: Arc<Notify>,
    ) -> reqwest::Result<Self> {
        let policy = args.address_policy();
        Ok(Sender {
            inner: Arc::new(Inner {
                pool,
                client: webhook_http::client(policy, args.webhook_timeout)?,
                owner: Uuid::new_v4(),
                concurrency: args.webhook_concurrency,
                lease: args.webhook_lease,
                poll: args.webhook_poll_interval,
                policy,
                retry: args.retry_policy(),
                disable_after: i32::try_from(args.webhook_disable_after).unwrap_or(i32::MAX),
                wake,
                outbox,
            }),
        })
    }

    /// Runs until `cancel` fires, then hands back what is in flight and returns.
    pub fn spawn(self, cancel: CancellationToken) -> JoinHandle<()> {
        let span = tracing::info_span!("webhook_sender", owner = %self.inner.owner);
        tokio::spawn(self.run(cancel).instrument(span))
    }

    async fn run(self, cancel: CancellationToken) {
        let inner = &self.inner;
        let mut in_flight: JoinSet<()> = JoinSet::new();
        while !cancel.is_cancelled() {
            let free = inner.concurrency.saturating_sub(in_flight.len());
            let mut claimed = 0;
            if free > 0 {
                match self.claim(free).await {
                    Ok(rows) => {
                        claimed = rows.len();
                        for row in rows {
                            let me = self.clone();
                            let cancel = cancel.clone();
                            let span = tracing::info_span!("webhook_delivery",
                                delivery_id = %row.delivery.delivery_id,
                                webhook_id = %row.delivery.subscription_id,
                                tenant_id = %row.delivery.tenant_id);
                            in_flight.spawn(me.deliver(row, cancel).instrument(span));
                        }
                    }
                    Err(err) => tracing::warn!(error = %err, "claiming webhook deliveries failed"),
                }
            }
            if claimed > 0 && claimed == free {
                // Every free slot was filled: wait for one to come back.
                tokio::select! {
                    () = cancel.cancelled() => break,
                    _ = in_flight.join_next() => {}
                }
                continue;
            }
            tokio::select! {
                () = cancel.cancelled() => break,
                () = inner.wake.notified() => {}
                () = tokio::time::sleep(inner.poll) => {}
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
            }
        }
        // In-flight deliveries see the cancellation and hand their leases back.
        while in_flight.join_next().await.is_some() {}
    }

    async fn claim(&self, limit: usize) -> Result<Vec<ClaimedRow>> {
        let inner = &self.inner;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(cairn_db::transaction!(&inner.pool, |conn| {
            Ok::<_, Error>(deliveries_claim(conn, inner.owner, inner.lease, limit).await?)
        })?)
    }

    /// Sends one claimed delivery and settles it.
    async fn deliver(self, row: ClaimedRow, cancel: CancellationToken) {
        let attempt = row.delivery.attempts;
        let started = Instant::now();
        let response = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            r = self.send(&row) => Some(r),
        };
        let latency_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let error = response.as_ref().and_then(Response::error);
        let (settle, streak, result) = match &response {
            // Stopped before an answer: handed back, not counted against the subscription.
            None => (
                Settle::Released,
                None,
                AttemptResult {
                    latency_ms: None,
                    response_code: None,
                    error: Some("the sender stopped"),
                },
            ),
            Some(response) => {
                let n = u32::try_from(attempt).unwrap_or(u32::MAX);
                let next = self.inner.retry.next(n, response, jitter(), Utc::now());
                let settle = match next {
                    Next::Delivered => Settle::Delivered,
                    Next::RetryIn(delay) => Settle::RetryAt(
                        Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default(),
                    ),
                    Next::Failed => Settle::Failed,
                };
                let result = AttemptResult {
                    latency_ms: Some(latency_ms),
                    response_code: response.code().map(i32::from),
                    error: error.as_deref(),
                };
                (settle, Some(next == Next::Delivered), result)
            }
        };
        match self.settle(&row, attempt, &settle, &result, streak).await {
            Ok(true) => {
                let outcome = match settle {
                    Settle::Delivered => "delivered",
                    Settle::RetryAt(_) => "retry",
                    Settle::Failed => "failed",
                    Settle::Released => "released",
                };
                metrics::counter!(crate::metrics::WEBHOOK_DELIVERIES, "result" => outcome)
                    .increment(1);
                tracing::debug!(attempt, error = ?result.error, "webhook attempt settled");
            }
            Ok(false) => tracing::warn!(
                attempt,
                "webhook delivery lease lost before settling; another sender has it"
            ),
            Err(err) => tracing::warn!(
                attempt,
                error = %err,
                "settling a webhook delivery failed; it is retried when its lease runs out"
            ),
        }
    }

    /// POSTs the delivery; what happened, as the retry policy sees it.
    async fn send(&self, row: &ClaimedRow) -> Response {
        let inner = &self.inner;
        let d = &row.delivery;
        // Checked again at every attempt: the policy may have changed since the URL was
        // accepted; names are checked by the client's resolver as it connects.
        let url = match WebhookUrl::parse(&row.url, inner.policy) {
            Ok(url) => url,
            Err(why) => return Response::Refused(why.0),
        };
        let body = Body {
            event_id: d.event_id.to_string(),
            event_type: &d.event_type,
            tenant: d.tenant_id.to_string(),
            occurred_at: timestamp(d.occurred_at),
            sequence: d.sequence,
            webhook_id: d.subscription_id.to_string(),
            data: &d.data,
        }
        .to_bytes();
        let secret = WebhookSecret::from_stored(row.secret.clone());
        let signature = secret.sign(Utc::now().timestamp(), &body);
        let sent = inner
            .client
            .post(url.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(HEADER, signature)
            .header("Cairn-Event-Id", d.event_id.to_string())
            .header("Cairn-Delivery-Id", d.delivery_id.to_string())
            .body(body)
            .send()
            .await;
        match sent {
            Ok(resp) => Response::Status {
                code: resp.status().as_u16(),
                retry_after: resp
                    .headers()
                    .get(http::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
            },
            Err(err) => {
                if let Some(why) = webhook_http::refusal_of(&err) {
                    Response::Refused(why)
                } else if err.is_timeout() {
                    Response::Network("timeout".to_owned())
                } else if err.is_connect() {
                    Response::Network("connection failed".to_owned())
                } else {
                    Response::Network("request failed".to_owned())
                }
            }
        }
    }

    /// Settles the delivery and, for an attempt that got an outcome (`succeeded`: `Some`),
    /// the subscription's failure streak, in one transaction.
    async fn settle(
        &self,
        row: &ClaimedRow,
        attempt: i32,
        settle: &Settle,
        result: &AttemptResult<'_>,
        succeeded: Option<bool>,
    ) -> Result<bool> {
        let inner = &self.inner;
        let d = &row.delivery;
        let reason = format!("{} failed attempts in a row", inner.disable_after);
        let (settled, disabled) = cairn_db::transaction!(&inner.pool, |conn| {
            if !delivery_settle(conn, d.delivery_id, attempt, inner.owner, settle, result).await? {
                return Ok((false, false));
            }
            match succeeded {
                None => return Ok((true, false)),
                Some(true) => {
                    subscription_succeeded(conn, d.subscription_id).await?;
                    return Ok((true, false));
                }
                Some(false) => {}
            }
            let Some(sub) =
                subscription_failed(conn, d.subscription_id, inner.disable_after, &reason).await?
            else {
                return Ok((true, false));
            };
            changes::record(
                conn,
                Change {
                    tenant_id: Some(sub.tenant_id),
                    actor: ACTOR,
                    object_type: cairn_bus::Aggregate::Webhook,
                    object_id: sub.subscription_id.to_string(),
                    event: "disabled",
                    detail: json!({
                        "reason": reason,
                        "consecutive_failures": sub.consecutive_failures,
                    }),
                },
            )
            .await?;
            Ok::<_, Error>((true, true))
        })?;
        if disabled {
            tracing::warn!(webhook_id = %d.subscription_id, "webhook disabled after {reason}");
            inner.outbox.notify_one();
        }
        Ok(settled)
    }
}

/// A random fraction in [0, 1) for the backoff's jitter (0.5 if the random source fails).
fn jitter() -> f64 {
    let mut b = [0u8; 4];
    match SystemRandom::new().fill(&mut b) {
        Ok(()) => f64::from(u32::from_le_bytes(b)) / (f64::from(u32::MAX) + 1.0),
        Err(_) => 0.5,
    }
}
