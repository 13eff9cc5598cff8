//! Streams a run's redacted log lines to `cairn.runlog.<run_id>`, numbered per attempt.
//! Lines arrive already redacted by the executor (credentials, sensitive values, the state
//! dump of `-json` output); losing the log stream never fails the run.

use std::time::{Duration, Instant};

use async_nats::jetstream;
use cairn_bus::{Chain, Namespace};
use cairn_proto::runner as pb;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::executor::{LogLine, OutputStream};

/// Lines buffered between the pipeline and the publisher.
const BUFFER: usize = 512;
/// How long lines are dropped after a failed publish.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The sending half given to the pipeline, and the task publishing what it receives; the
/// task ends once every sender is dropped.
pub fn spawn_publisher(
    js: jetstream::Context,
    ns: &Namespace,
    run_id: &str,
    attempt: u32,
) -> (mpsc::Sender<LogLine>, JoinHandle<u64>) {
    let (tx, mut rx) = mpsc::channel::<LogLine>(BUFFER);
    let subject = ns.runlog(run_id);
    let run_id = run_id.to_owned();
    let task = tokio::spawn(async move {
        let subject = match subject {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(run_id, error = %e, "no log subject for this run id");
                while rx.recv().await.is_some() {}
                return 0;
            }
        };
        let mut seq = 0u64;
        let mut failing = false;
        // After a failed publish, lines are dropped for a while rather than waited on: a slow
        // or absent NATS must never stall tofu's output.
        let mut skip_until = None::<Instant>;
        while let Some(line) = rx.recv().await {
            seq += 1;
            if skip_until.is_some_and(|t| Instant::now() < t) {
                continue;
            }
            let msg = pb::RunLogLine {
                run_id: run_id.clone(),
                attempt,
                seq,
                stream: match line.stream {
                    OutputStream::Stdout => "stdout",
                    OutputStream::Stderr => "stderr",
                }
                .to_owned(),
                text: line.text,
            };
            let msg_id = format!("{run_id}/{attempt}/{seq}");
            match cairn_bus::publish_msg(&js, &subject, &msg_id, &msg).await {
                Ok(()) => {
                    failing = false;
                    skip_until = None;
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(run_id, error = %Chain(&e), "cannot publish run log lines; dropping them for a while, the run goes on");
                    }
                    failing = true;
                    skip_until = Some(Instant::now() + RETRY_AFTER);
                }
            }
        }
        seq
    });
    (tx, task)
}
