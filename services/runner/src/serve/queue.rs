//! Run requests from `cairn.runq.<target>`: each is admitted at the coordinator, executed,
//! finished, and its result published on `cairn.runres.<run_id>` (`Nats-Msg-Id`
//! `<run_id>/<attempt>`); the request is acknowledged only after that publish is confirmed.
//! Target validation requests come on `cairn.runq.<target>.validate`, through a consumer of
//! their own ([`Requests::Validations`]): each is answered by [`super::validate`] with
//! `target.validated` on the events stream (`Nats-Msg-Id` = the validation id), acknowledged
//! likewise only after that publish is confirmed. The subject says what a message is.
//! While a run goes on, progress acknowledgements keep the request from being redelivered; a
//! runner that dies stops sending them, so the request comes back (to any runner of the
//! target) and the coordinator admits a new attempt once the old lease has expired.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use cairn_bus::{Chain, Consumer, Namespace};
use cairn_contract::{RefusalReason, RunId};
use cairn_proto::runner as pb;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use tracing::field::Empty;

use super::active::ActiveRuns;
use super::logs;
use super::report::{self, Attempt, Origin};
use super::validate;
use crate::coordinator::{CoordinatorClient, CoordinatorError, RunStatus};
use crate::credentials::CredentialRegistry;
use crate::executor::Executor;
use crate::pipeline::{
    AdmittedRun, BackendTls, ErrorClass, Pipeline, PipelineSettings, RunKind, RunOutcome,
};
use crate::run::{RunError, RunOptions, execute_admitted};
use crate::spool::Spool;

/// Publish attempts of a result before the request is handed back to the queue.
const RESULT_PUBLISH_TRIES: u32 = 5;

/// An attempt whose `FinishRun` was refused as superseded: a newer attempt reports the run,
/// and this one's result would win over it downstream (the first result of a run wins), so
/// none is published and the finish is not retried. The request goes back to the queue:
/// there it meets the newer attempt's live lease (and waits), its finished run (whose result
/// is published again), or, if the newer attempt's runner died too, a new attempt.
fn superseded(e: &(dyn std::error::Error + 'static)) -> Disposition {
    Disposition::Retry(format!(
        "this attempt was superseded; waiting for the newer attempt: {}",
        Chain(e)
    ))
}

/// What every run of this instance shares.
pub struct Worker {
    /// JetStream, for results and logs.
    pub js: jetstream::Context,
    /// Subjects.
    pub ns: Namespace,
    /// The coordinator.
    pub client: CoordinatorClient,
    /// Runs tofu.
    pub exec: Arc<dyn Executor>,
    /// Credentials.
    pub registry: Arc<CredentialRegistry>,
    /// The runs in flight.
    pub active: ActiveRuns,
    /// This instance's id.
    pub instance: String,
    /// The limit of each tofu command.
    pub timeout: Duration,
    /// Log lines that go with a result.
    pub log_tail: usize,
    /// The module library, for plan tags.
    pub module_library: PathBuf,
    /// `CAIRN_EXECUTOR_EXTRA_ENV`.
    pub extra_env: Vec<(String, String)>,
    /// What verifies the coordinator's https backend (every run's commands get it).
    pub backend_tls: BackendTls,
    /// The consumers' ack wait; progress is signalled three times per period.
    pub ack_wait: Duration,
    /// How long tofu gets after SIGINT (the lease is given up with at least this left).
    pub grace: Duration,
    /// Where an `errored.tfstate` waits for the coordinator's confirmation.
    pub spool: Spool,
}

/// What a consumer of the run queue stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requests {
    /// `cairn.runq.<target>`: run requests (`RunRequest`).
    Runs,
    /// `cairn.runq.<target>.validate`: target validation requests
    /// (`TargetValidationRequest`).
    Validations,
}

/// What to do with a request once handled.
#[derive(Debug)]
enum Disposition {
    /// Done (a result was published, or the request is void): remove it from the queue.
    Done,
    /// Not now: redeliver it after a growing delay.
    Retry(String),
}

impl Worker {
    /// Handles `target`'s `requests` from `consumer` one at a time until `cancel` fires; an
    /// in-flight run is finished first (SIGTERM lets runs end; a request not yet taken stays
    /// queued).
    pub async fn serve(
        self: Arc<Self>,
        consumer: Arc<Consumer>,
        target: String,
        requests: Requests,
        cancel: CancellationToken,
    ) {
        loop {
            let msg = match consumer.next_message(&cancel).await {
                Ok(Some(msg)) => msg,
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(target, error = %Chain(&e), "run queue consumer stopped");
                    return;
                }
            };
            if let (Requests::Runs, Ok(info)) = (requests, msg.info()) {
                crate::metrics::queue_delivery(&target, info.delivered, info.pending);
            }
            let disposition = self
                .keep_alive(&msg, self.handle(&target, requests, &msg, &cancel))
                .instrument(cairn_bus::message_span(&msg))
                .await;
            let ack = match disposition {
                Disposition::Done => AckKind::Ack,
                Disposition::Retry(why) => {
                    let delivered = msg.info().map(|i| i.delivered).unwrap_or(1);
                    let delay = consumer.options().retry_delay_after(delivered);
                    tracing::info!(target, why, retry_in = ?delay, "run request handed back to the queue");
                    AckKind::Nak(Some(delay))
                }
            };
            if let Err(e) = msg.ack_with(ack).await {
                tracing::warn!(target, error = %e, "acknowledging a run request failed; it will be redelivered");
            }
        }
    }

    /// Runs `work`, telling the server every third of the ack wait that the request is
    /// still being worked on.
    async fn keep_alive(
        &self,
        msg: &jetstream::Message,
        work: impl Future<Output = Disposition>,
    ) -> Disposition {
        let every = (self.ack_wait / 3).max(Duration::from_millis(100));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tokio::pin!(work);
        loop {
            tokio::select! {
                d = &mut work => return d,
                _ = ticks.tick() => {
                    if let Err(e) = msg.ack_with(AckKind::Progress).await {
                        tracing::warn!(error = %e, "progress acknowledgement failed");
                    }
                }
            }
        }
    }

    /// One request: a target validation is answered; a run is checked, run (unless this
    /// instance runs it already) and reported.
    #[tracing::instrument(
        name = "run_request",
        skip_all,
        fields(target = target, run_id = Empty, attempt = Empty, kind = Empty, validation_id = Empty)
    )]
    async fn handle(
        &self,
        target: &str,
        requests: Requests,
        msg: &jetstream::Message,
        stopping: &CancellationToken,
    ) -> Disposition {
        if requests == Requests::Validations {
            return match cairn_bus::decode::<pb::TargetValidationRequest>(msg) {
                Ok(validation) => self.validate_target(target, &validation).await,
                Err(e) => {
                    tracing::error!(subject = %msg.subject, error = %Chain(&e), "not a target validation request; dropping it");
                    Disposition::Done
                }
            };
        }
        let request = match cairn_bus::decode::<pb::RunRequest>(msg) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(subject = %msg.subject, error = %Chain(&e), "not a run request; dropping it");
                return Disposition::Done;
            }
        };
        if request.target_id != target || RunId::parse("run_id", &request.run_id).is_err() {
            tracing::error!(
                subject = %msg.subject,
                run_id = request.run_id,
                request_target = request.target_id,
                "run request names another target or no valid run id; dropping it"
            );
            return Disposition::Done;
        }
        tracing::Span::current().record("run_id", request.run_id.as_str());
        let cancel = CancellationToken::new();
        let Some(_guard) = self.active.begin(&request.run_id, target, cancel.clone()) else {
            return Disposition::Retry("this instance is running it already".into());
        };
        let origin = Origin {
            run_id: &request.run_id,
            target_id: target,
            instance: &self.instance,
        };
        self.execute(&origin, cancel, stopping).await
    }

    async fn execute(
        &self,
        origin: &Origin<'_>,
        cancel: CancellationToken,
        stopping: &CancellationToken,
    ) -> Disposition {
        let run_id = origin.run_id;
        let admission = match self.client.admit(run_id).await {
            Ok(a) => a,
            Err(e) => return self.refused(origin, e).await,
        };
        let attempt = admission.run.attempt;
        let kind = admission.config.kind;
        tracing::Span::current()
            .record("attempt", attempt)
            .record("kind", kind.as_str());
        self.active.admitted(run_id, attempt, kind.as_str());
        tracing::info!("run admitted");

        let (log_sink, log_task) =
            logs::spawn_publisher(self.js.clone(), &self.ns, run_id, attempt);
        let pipeline = Pipeline::new(
            &*self.exec,
            &self.registry,
            PipelineSettings {
                timeout: self.timeout,
                cancel,
                log_tail: self.log_tail,
                log_sink: Some(log_sink),
                module_library: self.module_library.clone(),
                extra_env: self.extra_env.clone(),
                backend_tls: self.backend_tls.clone(),
            },
        );
        let options = RunOptions {
            grace: self.grace,
            spool: Some(self.spool.clone()),
            stopping: stopping.clone(),
        };
        let report = execute_admitted(&self.client, &pipeline, &admission, &options).await;
        drop(pipeline);
        let lines = log_task.await.unwrap_or_default();

        let result = match report {
            Ok(report) => {
                crate::metrics::run_ended(
                    kind.as_str(),
                    crate::metrics::outcome_label(report.result.outcome),
                );
                tracing::info!(
                    outcome = ?report.result.outcome,
                    class = ?report.result.class,
                    generation = report.final_generation,
                    log_lines = lines,
                    "run finished"
                );
                report::from_report(origin, &report)
            }
            Err(e @ RunError::Superseded { .. }) => {
                crate::metrics::run_ended(kind.as_str(), "superseded");
                tracing::warn!(error = %Chain(&e), log_lines = lines, "attempt superseded; its result is dropped");
                return superseded(&e);
            }
            Err(e) => {
                // The runner could not drive the run (the executor or the coordinator
                // failed): finish the attempt as failed, so that the workflow hears of it now
                // rather than after the lease expires.
                crate::metrics::run_ended(kind.as_str(), "error");
                let message = format!("the runner could not complete the run: {}", Chain(&e));
                tracing::error!(error = %message, "run failed in the runner");
                return self
                    .fail_attempt(
                        origin,
                        &admission.run,
                        admission.admitted_at,
                        e.class(),
                        message,
                    )
                    .await;
            }
        };
        self.publish_result(&result).await
    }

    /// Finishes an admitted attempt as failed and publishes its result, so that the workflow
    /// hears of it now rather than after the lease expires.
    async fn fail_attempt(
        &self,
        origin: &Origin<'_>,
        run: &AdmittedRun,
        admitted_at: std::time::SystemTime,
        class: Option<ErrorClass>,
        message: String,
    ) -> Disposition {
        match self.client.finish(run, RunOutcome::Failed, &message).await {
            Ok((generation, _)) => {
                let attempt = Attempt {
                    attempt: run.attempt,
                    base_generation: run.base_generation,
                    started_at: Some(admitted_at),
                };
                let result = report::failure(
                    origin,
                    attempt,
                    RunOutcome::Failed,
                    class,
                    message,
                    generation,
                );
                self.publish_result(&result).await
            }
            Err(finish) if finish.refusal() == Some(RefusalReason::Superseded) => {
                tracing::warn!(error = %Chain(&finish), "attempt superseded; its result is dropped");
                superseded(&finish)
            }
            Err(finish) => Disposition::Retry(format!(
                "{message}; finishing the attempt failed too: {}",
                Chain(&finish)
            )),
        }
    }

    /// A refused admission: a finished run's result is published again (the first publish
    /// may have been lost with a runner), a fenced state gets a failed result, an admitted
    /// attempt whose config cannot be run is finished as a config failure, a run that does
    /// not exist is dropped, anything else is retried later.
    async fn refused(&self, origin: &Origin<'_>, e: CoordinatorError) -> Disposition {
        let run_id = origin.run_id;
        if let CoordinatorError::Unrunnable {
            run, admitted_at, ..
        } = &e
        {
            let message = Chain(&e).to_string();
            tracing::error!(error = %message, "the run's config cannot be run; failing the attempt");
            return self
                .fail_attempt(origin, run, *admitted_at, e.run_class(), message)
                .await;
        }
        match e.refusal() {
            Some(RefusalReason::RunFinished) => match self.client.get_run(run_id).await {
                Ok(run) => self.republish(origin, &run).await,
                Err(e) => {
                    Disposition::Retry(format!("cannot read the finished run: {}", Chain(&e)))
                }
            },
            Some(RefusalReason::Fenced) => {
                tracing::warn!(run_id, error = %e, "run refused: its state is fenced");
                let result = report::failure(
                    origin,
                    Attempt::default(),
                    RunOutcome::Failed,
                    Some(ErrorClass::Fenced),
                    e.status_message(),
                    0,
                );
                self.publish_result(&result).await
            }
            _ if e.is_permanent() => {
                tracing::error!(run_id, error = %e, "run refused for good; dropping the request");
                Disposition::Done
            }
            _ => Disposition::Retry(format!("admission refused: {e}")),
        }
    }

    /// Publishes the result of a finished run again, with what the coordinator still knows:
    /// the latest attempt and its base generation, and for a successful plan run its saved
    /// plan's id and sha256 (`GetMaskedPlan`). When it was admitted is not known any more.
    async fn republish(&self, origin: &Origin<'_>, run: &RunStatus) -> Disposition {
        tracing::info!(
            run_id = origin.run_id,
            attempt = run.attempt,
            "run already finished; publishing its result again"
        );
        let attempt = Attempt {
            attempt: run.attempt,
            base_generation: run.base_generation,
            started_at: None,
        };
        let mut result = report::failure(
            origin,
            attempt,
            run.outcome,
            run.outcome_class(),
            format!(
                "run {} (result published again after a redelivery)",
                run.status
            ),
            0,
        );
        if run.kind == Some(RunKind::Plan) && run.outcome == RunOutcome::Succeeded {
            match self.client.masked_plan(origin.run_id).await {
                Ok(Some(plan)) => {
                    result.plan_id = plan.plan_id;
                    result.plan_sha256 = plan.plan_sha256;
                }
                Ok(None) => {}
                Err(e) => {
                    return Disposition::Retry(format!(
                        "cannot read the finished run's saved plan: {}",
                        Chain(&e)
                    ));
                }
            }
        }
        self.publish_result(&result).await
    }

    /// Publishes `result` and waits for the stream's confirmation, retrying a few times.
    async fn publish_result(&self, result: &pb::RunResult) -> Disposition {
        let subject = match self.ns.runres(&result.run_id) {
            Ok(s) => s,
            Err(e) => return Disposition::Retry(format!("no result subject: {e}")),
        };
        let msg_id = report::result_msg_id(&result.run_id, result.attempt);
        self.publish_confirmed(&subject, &msg_id, result, "run result")
            .await
    }

    /// Publishes `msg` and waits for the stream's confirmation, retrying a few times; Done
    /// once confirmed, else Retry (the request is handed back, to be answered again under
    /// the same `msg_id`).
    async fn publish_confirmed<M: prost::Message>(
        &self,
        subject: &str,
        msg_id: &str,
        msg: &M,
        what: &'static str,
    ) -> Disposition {
        let mut delay = Duration::from_millis(200);
        let mut last = String::new();
        for _ in 0..RESULT_PUBLISH_TRIES {
            match cairn_bus::publish_msg(&self.js, subject, msg_id, msg).await {
                Ok(()) => return Disposition::Done,
                Err(e) => {
                    last = Chain(&e).to_string();
                    tracing::warn!(msg_id, what, error = %last, "publishing failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
        Disposition::Retry(format!("the {what} could not be published: {last}"))
    }

    /// A target validation request: checked, answered (the runner's registry and STS) and
    /// the answer published as `target.validated`. One the runner cannot answer at all (no
    /// validation id, another queue's target) is dropped.
    async fn validate_target(
        &self,
        target: &str,
        request: &pb::TargetValidationRequest,
    ) -> Disposition {
        let validation_id = match validate::answerable(target, request) {
            Ok(id) => id,
            Err(e) => {
                tracing::error!(error = %e, "target validation request cannot be answered; dropping it");
                return Disposition::Done;
            }
        };
        tracing::Span::current().record("validation_id", tracing::field::display(validation_id));
        let answer = validate::validate(&self.registry, request, &self.instance).await;
        if answer.ok {
            tracing::info!(
                tenant_id = request.tenant_id,
                account_id = answer.account_id,
                "target validated"
            );
        } else {
            tracing::warn!(
                tenant_id = request.tenant_id,
                transient = answer.transient,
                error = answer.error,
                "target validation failed"
            );
        }
        let event = match validate::event(&request.tenant_id, validation_id, answer) {
            Ok(event) => event,
            Err(e) => {
                tracing::error!(error = %Chain(&e), "the validation's answer cannot be stated; dropping the request");
                return Disposition::Done;
            }
        };
        let subject = match validate::subject(&self.ns, &event) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %Chain(&e), "no subject for the validation's answer; dropping the request");
                return Disposition::Done;
            }
        };
        self.publish_confirmed(&subject, &event.event_id, &event, "validation answer")
            .await
    }
}
