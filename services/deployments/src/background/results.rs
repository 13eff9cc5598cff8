//! The one durable consumer of `cairn.runres.*` (shared by the replicas): writes each run
//! result into its step's run row — the first full result of a run wins — and wakes the
//! workflow's waiter of that run in this process. Results of runs this service did not
//! start are acknowledged and dropped.
use std::sync::Arc;
use std::time::Duration;

use cairn_bus::{Consumer, Namespace, StreamKind};
use cairn_proto::runner::RunResult;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::app::workflow::result_row;
use crate::app::workflow::wakers::RunWakers;
use crate::store::runs;

pub const DURABLE: &str = "deployments-runres";

pub async fn bind(
    js: &async_nats::jetstream::Context,
    ns: &Namespace,
    ack_wait: Duration,
) -> Result<Consumer, cairn_bus::BusError> {
    Consumer::new(
        js,
        &ns.runres_stream(),
        DURABLE,
        &ns.stream_subject(StreamKind::RunRes),
        ack_wait,
    )
    .await
}

pub async fn run(
    consumer: Consumer,
    pool: PgPool,
    wakers: Arc<RunWakers>,
    cancel: CancellationToken,
) {
    let handler = async move |msg: &async_nats::jetstream::Message| {
        let result: RunResult = cairn_bus::decode(msg)?;
        let Ok(run_id) = Uuid::parse_str(&result.run_id) else {
            return Ok::<_, cairn_bus::BusError>(());
        };
        let row = result_row(&result);
        // A database error is the bus error's own kind (transient or not by its type); the
        // message is redelivered either way.
        let mut conn = pool.acquire().await?;
        let written = runs::run_result(&mut conn, run_id, &row).await?;
        if written {
            tracing::info!(%run_id, attempt = result.attempt, outcome = %row.outcome, "run result recorded");
            wakers.wake(run_id);
        }
        Ok(())
    };
    if let Err(err) = consumer.run_raw(handler, cancel).await {
        tracing::error!(error = %cairn_bus::Chain(&err), "the run result consumer stopped");
    }
}
