//! Running one tofu command of a run: its environment (the backend endpoints and, for an https
//! backend, the CA and client identity that verify it, the run token, the resolved credentials
//! and sensitive variables, the operator's extra variables) and its
//! redacted log lines, copied to the run's log stream and the result's tail as they come.

use std::collections::VecDeque;
use std::path::PathBuf;

use tokio::sync::mpsc;

use super::model::{AdmittedRun, RunConfig};
use super::{Pipeline, PipelineError};
use crate::credentials::CredentialError;
use crate::executor::{CommandOutcome, CommandSpec, ExecutorError, LogLine, OutputStream, Secret};
use crate::sts::{self, AwsRole, BaseCredentials};

/// `TF_HTTP_RETRY_MAX` given to every command.
pub const HTTP_RETRY_MAX: &str = "8";

/// What [`Pipeline::secret_env`] resolves: the environment, and an AWS target's role with its
/// base credentials.
pub(super) type SecretEnv = (Vec<(String, Secret)>, Option<(AwsRole, BaseCredentials)>);

/// One run in progress: what its commands need, and the tail of its log.
pub(super) struct Job<'r> {
    /// The attempt.
    pub admitted: &'r AdmittedRun,
    /// What it does.
    pub config: &'r RunConfig,
    /// The secret environment of every command (run token, credentials, `TF_VAR_*`).
    pub env: Vec<(String, Secret)>,
    /// An AWS target's role and the base credentials that assume it before each command.
    pub aws: Option<(AwsRole, BaseCredentials)>,
    /// The last log lines, for the result.
    pub tail: VecDeque<String>,
}

/// A tofu command to run.
pub(super) struct Command {
    args: Vec<String>,
    /// Whether its stdout may be logged (not for `show -json` and `output -json`, which
    /// print sensitive values in clear).
    logged: bool,
}

impl Command {
    /// A command whose output is logged.
    pub(super) fn logged<S: Into<String>>(args: impl IntoIterator<Item = S>) -> Self {
        Self {
            args: args.into_iter().map(Into::into).collect(),
            logged: true,
        }
    }

    /// A command whose stdout holds values in clear: only its stderr is logged.
    pub(super) fn quiet<S: Into<String>>(args: impl IntoIterator<Item = S>) -> Self {
        Self {
            logged: false,
            ..Self::logged(args)
        }
    }

    /// The tofu subcommand (`init`, `plan`, …).
    pub(super) fn name(&self) -> &str {
        self.args.first().map_or("", String::as_str)
    }

    /// Whether it runs with `-detailed-exitcode`, where exit code 2 is a success with changes.
    pub(super) fn detailed_exitcode(&self) -> bool {
        self.args.iter().any(|a| a == "-detailed-exitcode")
    }
}

/// What one command did.
pub(super) struct Ran {
    /// How it ended.
    pub outcome: CommandOutcome,
    /// Its stdout lines (also those not logged).
    pub stdout: Vec<String>,
    /// Its logged lines, for classifying a failure.
    pub text: String,
}

impl Pipeline<'_> {
    /// The secret environment of the run's commands: the run token, the target's credentials
    /// and the sensitive variables, resolved through the registry. An AWS target's
    /// credentials are base credentials: returned apart, never in the environment.
    pub(super) async fn secret_env(
        &self,
        admitted: &AdmittedRun,
        config: &RunConfig,
    ) -> Result<SecretEnv, CredentialError> {
        let mut env = vec![("TF_HTTP_PASSWORD".to_owned(), admitted.run_token.clone())];
        let reference = config.credential_ref.as_deref().filter(|r| !r.is_empty());
        let aws = self
            .registry
            .resolve_aws_with(
                &config.tenant_id,
                &config.target_id,
                reference,
                &config.target_settings,
                |var| std::env::var(var).ok(),
            )
            .await?;
        if let Some(reference) = reference
            && aws.is_none()
        {
            env.extend(
                self.registry
                    .resolve(&config.tenant_id, &config.target_id, reference)
                    .await?,
            );
        }
        for (name, reference) in &config.sensitive_variable_refs {
            let value = self
                .registry
                .resolve_value_with(&config.tenant_id, &config.target_id, reference, |var| {
                    std::env::var(var).ok()
                })
                .await?;
            env.push((format!("TF_VAR_{name}"), value));
        }
        Ok((env, aws))
    }

    /// An AWS target's session for the next command: its secret variables and `AWS_REGION`.
    /// Assumed afresh for each command, lasting the command's timeout plus a margin.
    async fn aws_session(
        &self,
        job: &Job<'_>,
    ) -> Result<Option<(Vec<(String, Secret)>, String)>, PipelineError> {
        let Some((role, base)) = &job.aws else {
            return Ok(None);
        };
        let session = self
            .registry
            .sts()
            .assume_role(
                base,
                role,
                &sts::session_name(&job.admitted.run_id),
                sts::session_duration(self.settings.timeout),
            )
            .await
            .map_err(PipelineError::AwsSession)?;
        Ok(Some((session.container_env(), role.region.clone())))
    }

    /// Runs `command` to its end, copying its loggable lines to the log sink and the tail.
    #[tracing::instrument(
        name = "tofu",
        skip_all,
        fields(
            run_id = %job.admitted.run_id,
            attempt = job.admitted.attempt,
            kind = %job.config.kind,
            target = %job.config.target_id,
            command = command.name(),
        )
    )]
    pub(super) async fn command(
        &self,
        job: &mut Job<'_>,
        command: Command,
    ) -> Result<Ran, PipelineError> {
        let backend = &job.admitted.backend;
        let name = command.name().to_owned();
        let detailed_exitcode = command.detailed_exitcode();
        let mut plain_env = vec![
            ("TF_IN_AUTOMATION".to_owned(), "1".to_owned()),
            ("TF_HTTP_ADDRESS".to_owned(), backend.address.clone()),
            (
                "TF_HTTP_LOCK_ADDRESS".to_owned(),
                backend.lock_address.clone(),
            ),
            (
                "TF_HTTP_UNLOCK_ADDRESS".to_owned(),
                backend.unlock_address.clone(),
            ),
            ("TF_HTTP_USERNAME".to_owned(), "run".to_owned()),
            ("TF_HTTP_RETRY_MAX".to_owned(), HTTP_RETRY_MAX.to_owned()),
        ];
        plain_env.extend(self.settings.extra_env.iter().cloned());
        let mut env = job.env.clone();
        if backend.is_https() {
            let (tls_plain, tls_secret) = self.settings.backend_tls.env();
            plain_env.extend(tls_plain);
            env.extend(tls_secret);
        }
        if let Some((session, region)) = self.aws_session(job).await? {
            env.extend(session);
            plain_env.push(("AWS_REGION".to_owned(), region));
        }
        let (tx, mut rx) = mpsc::channel::<LogLine>(256);
        let spec = CommandSpec {
            run_id: job.admitted.run_id,
            attempt: job.admitted.attempt,
            args: command.args,
            env,
            plain_env,
            base_dir: job
                .config
                .target_settings
                .get("base_dir")
                .map(PathBuf::from),
            timeout: self.settings.timeout,
            cancel: self.settings.cancel.clone(),
            output: tx,
        };
        let sink = self.settings.log_sink.clone();
        let logged = command.logged;
        let collector = tokio::spawn(async move {
            let mut lines = Vec::new();
            while let Some(line) = rx.recv().await {
                if let Some(sink) = &sink
                    && (logged || line.stream == OutputStream::Stderr)
                {
                    let _ = sink.send(line.clone()).await;
                }
                lines.push(line);
            }
            lines
        });
        let started = std::time::Instant::now();
        let outcome = self.exec.run(spec).await;
        crate::metrics::tofu_command(name, &outcome, detailed_exitcode, started.elapsed());
        let lines = collector
            .await
            .map_err(|e| PipelineError::Executor(ExecutorError::Supervisor(e)))?;
        let outcome = outcome?;
        let mut stdout = Vec::new();
        let mut text = Vec::new();
        for line in lines {
            let loggable = logged || line.stream == OutputStream::Stderr;
            if loggable {
                push_tail(&mut job.tail, self.settings.log_tail, line.text.clone());
                text.push(line.text.clone());
            }
            if line.stream == OutputStream::Stdout {
                stdout.push(line.text);
            }
        }
        Ok(Ran {
            outcome,
            stdout,
            text: text.join("\n"),
        })
    }

    /// A line of the runner's own in the run's log.
    pub(super) async fn note(&self, job: &mut Job<'_>, text: &str) {
        if let Some(sink) = &self.settings.log_sink {
            let _ = sink
                .send(LogLine {
                    stream: OutputStream::Stderr,
                    text: text.to_owned(),
                })
                .await;
        }
        push_tail(&mut job.tail, self.settings.log_tail, text.to_owned());
    }
}

/// Appends `line`, keeping the last `max`.
fn push_tail(tail: &mut VecDeque<String>, max: usize, line: String) {
    if max == 0 {
        return;
    }
    if tail.len() >= max {
        tail.pop_front();
    }
    tail.push_back(line);
}
