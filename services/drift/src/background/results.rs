//! The durable consumer `drift-results` of `cairn.runres.*` (a limits stream: it reads the
//! same results as the deployments service's own consumer, independently). Results of runs
//! that are not this service's open scans are acknowledged and ignored.
use std::time::Duration;

use cairn_bus::{BusError, Consumer, Namespace, StreamKind};
use cairn_proto::runner::RunResult;

use crate::app::App;

pub const DURABLE: &str = "drift-results";

pub async fn bind(
    js: &async_nats::jetstream::Context,
    ns: &Namespace,
    ack_wait: Duration,
) -> Result<Consumer, BusError> {
    Consumer::new(
        js,
        &ns.runres_stream(),
        DURABLE,
        &ns.stream_subject(StreamKind::RunRes),
        ack_wait,
    )
    .await
}

pub async fn run(consumer: Consumer, app: App, cancel: tokio_util::sync::CancellationToken) {
    let handler = async move |msg: &async_nats::jetstream::Message| {
        // The service's own error (a database or a peer's failure keeps its type); the
        // message is redelivered whatever failed.
        let result: RunResult = cairn_bus::decode(msg)?;
        app.on_result(&result).await?;
        Ok::<_, crate::error::Error>(())
    };
    if let Err(err) = consumer.run_raw(handler, cancel).await {
        tracing::error!(error = %cairn_bus::Chain(&err), "drift result consumer stopped");
    }
}
