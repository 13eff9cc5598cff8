//! The durable consumer of `cairn.runlog.*` (stream CAIRN_RUNLOG, which keeps lines only an
//! hour): every line of a step's run is stored for the step and becomes an event of its
//! deployment (see `app::logs`); a line of a run no step has is acknowledged and dropped,
//! a line that cannot be decoded too. The lines that have arrived are handled together, up
//! to [`BATCH`] in one transaction; a database failure redelivers them.
use std::time::Duration;

use async_nats::jetstream;
use cairn_bus::{Consumer, Namespace};
use cairn_contract::RunId;
use cairn_proto::runner::RunLogLine;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::app::App;
use crate::app::logs::{IncomingLine, Ingested, LogBound};
use crate::error::Error;

/// The durable consumer's name (shared by every replica).
pub const DURABLE: &str = "deployments-runlog";

/// The most lines handled in one transaction (and asked for per pull).
pub const BATCH: usize = 256;

/// How long a batch waits for more lines after its first. Lines come in bursts (a run's
/// first and last lines, while its neighbours in the wave start and end too): a burst is
/// stored in one or two transactions instead of one per runner's few lines, which took
/// the database's and this service's CPU from the hops of the workflow beside them. A
/// watcher sees a line that much later.
pub const LINGER: Duration = Duration::from_millis(100);

pub struct LogConsumer {
    pub app: App,
    pub js: jetstream::Context,
    pub ns: Namespace,
    /// `CAIRN_STEP_LOG_LINES`.
    pub step_log_lines: usize,
    pub ack_wait: Duration,
}

impl LogConsumer {
    /// Creates (or binds to) the durable consumer; then [`LogConsumer::run`] handles lines.
    pub async fn bind(&self) -> Result<Consumer, cairn_bus::BusError> {
        Consumer::with_options(
            &self.js,
            &self.ns.runlog_stream(),
            DURABLE,
            &self.ns.stream_subject(cairn_bus::StreamKind::RunLog),
            cairn_bus::ConsumerOptions {
                batch: BATCH,
                linger: LINGER,
                ..cairn_bus::ConsumerOptions::new(self.ack_wait)
            },
        )
        .await
    }

    /// Handles lines until `cancel` fires.
    pub async fn run(self, consumer: Consumer, cancel: CancellationToken) {
        let app = self.app;
        let bound = LogBound::new(self.step_log_lines);
        let span = tracing::info_span!("log_consumer", durable = DURABLE);
        let handled = consumer
            .run_raw_batched(
                BATCH,
                async move |msgs: &[jetstream::Message]| handle(&app, bound, msgs).await,
                cancel,
            )
            .instrument(span)
            .await;
        if let Err(err) = handled {
            tracing::error!(error = %cairn_bus::Chain(&err), "the run log consumer stopped");
        }
    }
}

async fn handle(app: &App, bound: LogBound, msgs: &[jetstream::Message]) -> Result<(), Error> {
    let mut lines = Vec::with_capacity(msgs.len());
    for msg in msgs {
        let line: RunLogLine = match cairn_bus::decode(msg) {
            Ok(line) => line,
            Err(err) => {
                tracing::warn!(subject = %msg.subject, error = %cairn_bus::Chain(&err), "not a run log line; dropped");
                continue;
            }
        };
        let Ok(run_id) = RunId::parse("run_id", &line.run_id) else {
            tracing::warn!(subject = %msg.subject, "run log line without a valid run id; dropped");
            continue;
        };
        lines.push(IncomingLine {
            run_id,
            attempt: line.attempt,
            seq: line.seq,
            stream: line.stream,
            text: line.text,
        });
    }
    if lines.is_empty() {
        return Ok(());
    }
    let answers = app.log_lines_ingest(&lines, bound).await?;
    for (line, answer) in lines.iter().zip(answers) {
        let run_id = line.run_id;
        match answer {
            Ok(Ingested::UnknownRun) => {
                tracing::debug!(%run_id, "log line of a run no step has; dropped");
            }
            Ok(Ingested::Duplicate) => {
                tracing::debug!(%run_id, seq = line.seq, "log line received before");
            }
            Ok(Ingested::Event { position, stored }) => {
                tracing::trace!(%run_id, seq = line.seq, position, stored, "log line stored");
            }
            // A line that can never be stored (its numbers do not fit) is dropped, not retried.
            Err(err) => {
                tracing::warn!(%run_id, error = %cairn_bus::Chain(&err), "run log line dropped");
            }
        }
    }
    Ok(())
}
