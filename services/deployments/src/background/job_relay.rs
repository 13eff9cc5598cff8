//! Publishes the job outbox to its work queues: wakes on a notify (after a commit that
//! enqueued a job) or every poll interval, publishes each unsent job with its message id
//! as `Nats-Msg-Id` (a crash between publishing and marking produces no duplicate inside
//! the stream's window), and marks what JetStream acknowledged. Catches up on start.
//!
//! cairn-bus's `OutboxRelay` publishes domain events only (it derives the subject from the
//! event); queue messages need their subject from the row, hence this small relay. It
//! belongs in cairn-bus once a second service needs it (drift's run requests).
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::message::PublishMessage;
use bytes::Bytes;
use cairn_bus::Namespace;
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::store::jobs as store;

const BATCH: i64 = 100;
const RETENTION: Duration = Duration::from_secs(24 * 3600);

pub struct JobRelay {
    pub pool: PgPool,
    pub js: jetstream::Context,
    pub ns: Namespace,
    pub notify: Arc<Notify>,
    pub poll_interval: Duration,
}

impl JobRelay {
    /// Runs until `cancel` fires. Errors are logged (ids only) and retried at the next wake.
    pub async fn run(self, cancel: CancellationToken) {
        let mut since_prune = 0u32;
        while !cancel.is_cancelled() {
            loop {
                match self.relay_batch().await {
                    Ok(n) if n == BATCH as usize => continue,
                    Ok(_) => break,
                    Err(err) => {
                        tracing::warn!(error = %cairn_bus::Chain(&err), "relaying jobs failed; retrying later");
                        break;
                    }
                }
            }
            since_prune += 1;
            if since_prune >= 300 {
                since_prune = 0;
                if let Err(err) = self.prune().await {
                    tracing::warn!(error = %cairn_bus::Chain(&err), "pruning sent jobs failed");
                }
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => {}
                () = self.notify.notified() => {}
                () = tokio::time::sleep(self.poll_interval) => {}
            }
        }
    }

    fn subject(&self, row: &store::JobRow) -> Result<String> {
        match row.queue.as_str() {
            "deployq" => Ok(self.ns.deployq()),
            other => Err(Error::internal(format!(
                "job {} names unknown queue {other:?}",
                row.msg_id
            ))),
        }
    }

    /// Publishes one batch and marks what was acknowledged; returns how many were sent.
    pub async fn relay_batch(&self) -> Result<usize> {
        let js = self.js.clone();
        cairn_db::transaction!(&self.pool, |conn| {
            let rows = store::jobs_unsent_locked(conn, BATCH).await?;
            let mut sent = Vec::with_capacity(rows.len());
            let mut failure = None;
            for row in &rows {
                let subject = self.subject(row)?;
                let published = async {
                    js.send_publish(
                        subject.clone(),
                        PublishMessage::build()
                            .payload(Bytes::from(row.payload.clone()))
                            .message_id(row.msg_id.to_string()),
                    )
                    .await
                    .map_err(|e| e.to_string())?
                    .await
                    .map_err(|e| e.to_string())
                };
                match published.await {
                    Ok(_) => sent.push(row.seq),
                    Err(e) => {
                        failure = Some(Error::unavailable(format!(
                            "NATS: publish to {subject}: {e}"
                        )));
                        break;
                    }
                }
            }
            if !sent.is_empty() {
                store::jobs_mark_sent(conn, &sent).await?;
            }
            match failure {
                // What was acknowledged stays marked: the error is reported after commit.
                Some(err) if sent.is_empty() => Err(err),
                Some(err) => {
                    tracing::warn!(error = %err, sent = sent.len(), "published part of a job batch");
                    Ok::<_, Error>(sent.len())
                }
                None => Ok(sent.len()),
            }
        })
    }

    async fn prune(&self) -> Result<u64> {
        let mut conn = self.pool.acquire().await?;
        Ok(store::jobs_prune_sent(&mut conn, RETENTION.as_secs_f64()).await?)
    }
}
