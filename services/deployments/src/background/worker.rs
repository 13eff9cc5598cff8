//! The workflow worker: a durable JetStream consumer of `cairn.deployq` in every replica
//! (they share the one durable, so each job goes to one replica at a time). A job is worked
//! on while its ack deadline is kept alive; it is acknowledged when the deployment ended or
//! parked, delivered again later when its target's slots are taken, and redelivered after
//! the ack wait when the replica dies mid-way (the deployment then resumes).
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::AckKind;
use cairn_bus::{Consumer, ConsumerOptions, Namespace};
use cairn_proto::deployments::DeploymentJob;
use prost::Message;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use crate::app::App;
use crate::app::workflow::JobOutcome;

/// The durable consumer's name.
pub const DURABLE: &str = "deployments-worker";

pub struct Worker {
    pub app: App,
    /// Jobs worked on at once by this replica.
    pub jobs: usize,
    pub ack_wait: Duration,
}

impl Worker {
    /// Binds the durable consumer of the deployment queue.
    pub async fn bind(
        js: &async_nats::jetstream::Context,
        ns: &Namespace,
        ack_wait: Duration,
    ) -> Result<Consumer, cairn_bus::BusError> {
        let mut options = ConsumerOptions::new(ack_wait);
        options.batch = 1;
        Consumer::with_options(js, &ns.deployq_stream(), DURABLE, &ns.deployq(), options).await
    }

    /// Takes jobs until `cancel` fires; jobs in progress stop where they are (they are
    /// redelivered and resume).
    pub async fn run(self, consumer: Consumer, cancel: CancellationToken) {
        let slots = Arc::new(Semaphore::new(self.jobs.max(1)));
        let mut tasks = JoinSet::new();
        loop {
            let permit = tokio::select! {
                () = cancel.cancelled() => break,
                p = slots.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let msg = match consumer.next_message(&cancel).await {
                Ok(Some(msg)) => msg,
                Ok(None) => break,
                Err(err) => {
                    tracing::error!(error = %cairn_bus::Chain(&err), "the deployment queue consumer stopped");
                    break;
                }
            };
            while tasks.try_join_next().is_some() {}
            let app = self.app.clone();
            let cancel = cancel.clone();
            let heartbeat = self.ack_wait / 3;
            let job_span =
                tracing::info_span!(parent: &cairn_bus::message_span(&msg), "deployment_job");
            tasks.spawn(
                async move {
                    handle(app, msg, cancel, heartbeat).await;
                    drop(permit);
                }
                .instrument(job_span),
            );
        }
        tasks.shutdown().await;
    }
}

async fn handle(
    app: App,
    msg: async_nats::jetstream::Message,
    cancel: CancellationToken,
    heartbeat: Duration,
) {
    let id = DeploymentJob::decode(msg.payload.as_ref())
        .ok()
        .and_then(|j| Uuid::parse_str(&j.deployment_id).ok());
    let Some(id) = id else {
        tracing::error!(subject = %msg.subject, "a deployment job that is not one; dropped");
        let _ = msg.ack_with(AckKind::Term).await;
        return;
    };
    let work = app.run_job(id);
    tokio::pin!(work);
    let mut beat = tokio::time::interval(heartbeat.max(Duration::from_millis(100)));
    beat.tick().await;
    let outcome = loop {
        tokio::select! {
            // Stopping: leave the job unacknowledged; it is redelivered and resumes.
            () = cancel.cancelled() => return,
            r = &mut work => break r,
            _ = beat.tick() => {
                let _ = msg.ack_with(AckKind::Progress).await;
            }
        }
    };
    match outcome {
        Ok(JobOutcome::Done) => {
            if let Err(err) = msg.ack().await {
                tracing::warn!(deployment_id = %id, error = %err, "acknowledging a job failed");
            }
        }
        Ok(JobOutcome::Wait(after)) => {
            let _ = msg.ack_with(AckKind::Nak(Some(after))).await;
        }
        Err(err) => {
            tracing::warn!(deployment_id = %id, error = %cairn_bus::Chain(&err), "deployment job failed; it is tried again");
            let _ = msg
                .ack_with(AckKind::Nak(Some(Duration::from_secs(2))))
                .await;
        }
    }
}
