//! One admitted run driven through its tofu commands: `init`, `validate`, then `plan` (with
//! `show -json`, summary, risk and masking) or `apply` (of a saved plan) and `output`, with the
//! outcome classified for the coordinator and the workflow.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

use cairn_tofu::{PlanSummary, PublicOutput};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::credentials::{CredentialError, CredentialRegistry};
use crate::executor::{
    CommandOutcome, CommandSpec, Executor, ExecutorError, LogLine, OutputStream, RunId, Secret,
};
use crate::plan_tags::{self, LibraryHashError, PlanTags};

/// The root config file name in the work directory.
pub const ROOT_CONFIG_FILE: &str = "main.tf.json";
/// The saved plan file name in the work directory.
pub const PLAN_FILE: &str = "plan.tfplan";
/// The provider lock file tofu reads and writes.
pub const LOCK_FILE: &str = ".terraform.lock.hcl";
/// The state tofu leaves behind when it cannot persist it.
pub const ERRORED_STATE_FILE: &str = "errored.tfstate";
/// The environment whose stale saved plans fail instead of being planned again.
pub const PRODUCTION: &str = "production";
/// `TF_HTTP_RETRY_MAX` given to every command.
pub const HTTP_RETRY_MAX: &str = "8";

/// What a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// Plan and save the plan for a later apply.
    Plan,
    /// Apply a saved plan (or, with none, plan and apply in one go).
    Apply,
    /// Destroy everything in the state.
    Destroy,
    /// A plan shown to a human, not saved, without locking.
    Preview,
    /// A plan looking for drift, not saved, without locking.
    Drift,
}

impl RunKind {
    fn is_plan_only(self) -> bool {
        matches!(self, Self::Plan | Self::Preview | Self::Drift)
    }
}

/// The state backend endpoints of the run (`TF_HTTP_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendAddresses {
    /// `TF_HTTP_ADDRESS`.
    pub address: String,
    /// `TF_HTTP_LOCK_ADDRESS`.
    pub lock_address: String,
    /// `TF_HTTP_UNLOCK_ADDRESS`.
    pub unlock_address: String,
}

/// What the coordinator's `AdmitRun` granted.
#[derive(Debug, Clone)]
pub struct AdmittedRun {
    /// The run.
    pub run_id: RunId,
    /// This attempt's number (1 for the first).
    pub attempt: u32,
    /// The backend endpoints.
    pub backend: BackendAddresses,
    /// The run token, sent as `TF_HTTP_PASSWORD`.
    pub run_token: Secret,
    /// The state generation the run starts from.
    pub base_generation: u64,
    /// The token only reads state.
    pub read_only: bool,
    /// Attempt 2+ of a production apply or of a destroy: report interrupted, run nothing.
    pub interrupted: bool,
}

/// What the coordinator's `GetRunConfig` returned.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// What the run does.
    pub kind: RunKind,
    /// The environment (`production`, `staging`, …).
    pub environment: String,
    /// The root module, written as `main.tf.json`.
    pub root_config: Vec<u8>,
    /// The hash the coordinator recorded for `root_config`.
    pub config_hash: String,
    /// The tenant owning the run.
    pub tenant_id: String,
    /// The target it runs against.
    pub target_id: String,
    /// Target settings such as `base_dir`.
    pub target_settings: BTreeMap<String, String>,
    /// The credential reference, if the target needs one.
    pub credential_ref: Option<String>,
    /// Root variable name → reference of its sensitive value, given as `TF_VAR_<name>`.
    pub sensitive_variable_refs: BTreeMap<String, String>,
}

/// A saved plan to apply, with the provider lock file it was made with and its tags.
#[derive(Debug, Clone)]
pub struct SavedPlan {
    /// The plan file.
    pub plan: Vec<u8>,
    /// `.terraform.lock.hcl` as it was at plan time.
    pub lock_file: Vec<u8>,
    /// What the plan was made from.
    pub tags: PlanTags,
}

/// How a pipeline is run.
#[derive(Debug, Clone)]
pub struct PipelineSettings {
    /// The limit of each tofu command (`CAIRN_TOFU_TIMEOUT`).
    pub timeout: Duration,
    /// Cancelling this stops the running command and the pipeline.
    pub cancel: CancellationToken,
    /// How many of the last log lines go with the result.
    pub log_tail: usize,
    /// Where every redacted log line is copied as it comes (the run's log stream).
    pub log_sink: Option<mpsc::Sender<LogLine>>,
    /// The module library as the runner sees it, for the plan tags.
    pub module_library: PathBuf,
    /// The operator's `CAIRN_EXECUTOR_EXTRA_ENV`: given to every command (not secret).
    pub extra_env: Vec<(String, String)>,
}

/// How a run ended, as reported to the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every command succeeded.
    Succeeded,
    /// A command failed or the run could not be started.
    Failed,
    /// Cancelled: state may be incomplete; never retried.
    Cancelled,
    /// Timed out: state may be incomplete; never retried.
    TimedOut,
    /// A new attempt of a run that must not be repeated; nothing was run.
    Interrupted,
}

/// Why a run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Network, rate limit, a lock held by another run, a server error: worth retrying.
    Transient,
    /// The configuration is invalid.
    Config,
    /// A provider failed or refused.
    Provider,
    /// The saved plan no longer matches the state or the config.
    StalePlan,
    /// The state is fenced.
    Fenced,
    /// Cancelled.
    Cancelled,
    /// Timed out.
    TimedOut,
    /// Interrupted by a runner restart.
    Interrupted,
}

/// Everything a pipeline produced.
#[derive(Debug)]
pub struct RunResult {
    /// How the run ended.
    pub outcome: RunOutcome,
    /// Why it failed (`None` when it succeeded).
    pub class: Option<ErrorClass>,
    /// A short, redacted description of the end.
    pub message: String,
    /// The plan's summary and risk (plan-like runs, and an apply that planned again).
    pub summary: Option<PlanSummary>,
    /// The saved plan's tags that changed before an apply (empty when none did).
    pub stale_tags: Vec<&'static str>,
    /// The plan JSON with every sensitive value masked.
    pub masked_plan: Option<Value>,
    /// The saved plan and its lock file, for `PutPlan` (plan runs).
    pub saved_plan: Option<SavedPlan>,
    /// The root outputs after an apply, sensitive values withheld.
    pub outputs: Vec<PublicOutput>,
    /// An `errored.tfstate` tofu left behind, for the coordinator's quarantine. Never log it.
    pub errored_state: Option<Vec<u8>>,
    /// The last redacted log lines.
    pub log_tail: Vec<String>,
}

impl RunResult {
    fn new(outcome: RunOutcome, class: Option<ErrorClass>, message: impl Into<String>) -> Self {
        Self {
            outcome,
            class,
            message: message.into(),
            summary: None,
            stale_tags: Vec::new(),
            masked_plan: None,
            saved_plan: None,
            outputs: Vec::new(),
            errored_state: None,
            log_tail: Vec::new(),
        }
    }

    /// Replaces the class of a failed run by the one the coordinator's `refusal_reason`
    /// (from `FinishRun`) gives: what the coordinator recorded wins over tofu's text.
    pub fn apply_refusal_reason(&mut self, refusal_reason: &str) {
        if self.outcome != RunOutcome::Failed {
            return;
        }
        if let Some(class) = class_of_refusal(refusal_reason) {
            self.class = Some(class);
        }
    }
}

/// The class the coordinator's refusal reason names, if any.
pub fn class_of_refusal(reason: &str) -> Option<ErrorClass> {
    let r = reason.to_ascii_lowercase();
    if r.is_empty() {
        None
    } else if r.contains("fenced") {
        Some(ErrorClass::Fenced)
    } else if r.contains("stale") {
        Some(ErrorClass::StalePlan)
    } else {
        Some(ErrorClass::Transient)
    }
}

/// Why a pipeline could not be run at all (as opposed to a tofu command failing).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The executor failed.
    #[error(transparent)]
    Executor(#[from] ExecutorError),
    /// A work directory file could not be written or read.
    #[error("{op} {}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The module library could not be hashed.
    #[error(transparent)]
    LibraryHash(#[from] LibraryHashError),
}

/// Drives one admitted run through an executor.
pub struct Pipeline<'a> {
    exec: &'a dyn Executor,
    registry: &'a CredentialRegistry,
    settings: PipelineSettings,
}

/// The output of one command.
struct Ran {
    outcome: CommandOutcome,
    stdout: Vec<String>,
    text: String,
}

impl<'a> Pipeline<'a> {
    /// A pipeline running on `exec` with credentials from `registry`.
    pub fn new(
        exec: &'a dyn Executor,
        registry: &'a CredentialRegistry,
        settings: PipelineSettings,
    ) -> Self {
        Self {
            exec,
            registry,
            settings,
        }
    }

    /// Runs the run to its end; the work directory is removed afterwards. `saved_plan` is the
    /// plan an apply applies (none: the apply plans itself).
    pub async fn run(
        &self,
        admitted: &AdmittedRun,
        config: &RunConfig,
        saved_plan: Option<&SavedPlan>,
    ) -> Result<RunResult, PipelineError> {
        if admitted.interrupted {
            return Ok(RunResult::new(
                RunOutcome::Interrupted,
                Some(ErrorClass::Interrupted),
                format!(
                    "attempt {} of a run that must not be repeated: nothing was run",
                    admitted.attempt
                ),
            ));
        }
        let env = match self.secret_env(admitted, config).await {
            Ok(env) => env,
            Err(e) => {
                let class = if e.is_transient() {
                    ErrorClass::Transient
                } else {
                    ErrorClass::Config
                };
                return Ok(RunResult::new(RunOutcome::Failed, Some(class), e.chain()));
            }
        };
        let run_id = admitted.run_id;
        self.exec.prepare_run(&run_id).await?;
        let mut tail = VecDeque::new();
        let result = self
            .steps(admitted, config, saved_plan, &env, &mut tail)
            .await;
        let errored = self.read_optional(&run_id, ERRORED_STATE_FILE).await;
        let cleanup = self.exec.cleanup_run(&run_id).await;
        let mut result = result?;
        cleanup?;
        result.errored_state = errored?;
        result.log_tail = tail.into_iter().collect();
        Ok(result)
    }

    async fn secret_env(
        &self,
        admitted: &AdmittedRun,
        config: &RunConfig,
    ) -> Result<Vec<(String, Secret)>, CredentialError> {
        let mut env = vec![("TF_HTTP_PASSWORD".to_owned(), admitted.run_token.clone())];
        if let Some(reference) = config.credential_ref.as_deref().filter(|r| !r.is_empty()) {
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
        Ok(env)
    }

    async fn steps(
        &self,
        admitted: &AdmittedRun,
        config: &RunConfig,
        saved_plan: Option<&SavedPlan>,
        env: &[(String, Secret)],
        tail: &mut VecDeque<String>,
    ) -> Result<RunResult, PipelineError> {
        let run_id = admitted.run_id;
        let dir = self.exec.work_dir(&run_id);
        self.write(&dir.join(ROOT_CONFIG_FILE), &config.root_config)
            .await?;
        if let Some(saved) = saved_plan {
            self.write(&dir.join(PLAN_FILE), &saved.plan).await?;
            self.write(&dir.join(LOCK_FILE), &saved.lock_file).await?;
        }
        let cmd = |args: &[&str]| Command {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            logged: true,
        };

        let ran = self
            .command(admitted, config, env, cmd(&["init", "-input=false"]), tail)
            .await?;
        if let Some(failed) = failure(&ran, "init", Stage::Init) {
            return Ok(failed);
        }
        let ran = self
            .command(admitted, config, env, cmd(&["validate", "-json"]), tail)
            .await?;
        if let Some(failed) = failure(&ran, "validate", Stage::Validate) {
            return Ok(failed);
        }

        if config.kind.is_plan_only() {
            // Preview and drift plans (and read-only tokens) do not lock the state.
            let no_lock = config.kind != RunKind::Plan || admitted.read_only;
            let mut result = match self.plan(admitted, config, env, no_lock, tail).await? {
                Ok(result) => result,
                Err(failed) => return Ok(failed),
            };
            if config.kind == RunKind::Plan {
                let plan = self.read(&dir.join(PLAN_FILE)).await?;
                let lock_file = self
                    .read_optional(&run_id, LOCK_FILE)
                    .await?
                    .unwrap_or_default();
                let tags = match self.current_tags(admitted, config, env, tail).await? {
                    Ok(tags) => tags,
                    Err(failed) => return Ok(failed),
                };
                result.saved_plan = Some(SavedPlan {
                    plan,
                    lock_file,
                    tags,
                });
            }
            return Ok(result);
        }

        let mut replanned = None;
        let mut stale_tags = Vec::new();
        // No saved plan (a resource being created, or attempt 2+ of an apply whose first
        // attempt may have used it): plan afresh and apply exactly that plan, so the result
        // carries its summary. A saved plan is never applied twice.
        let mut apply_fresh_plan = false;
        if config.kind == RunKind::Apply && saved_plan.is_none() {
            if admitted.attempt > 1 {
                self.note(
                    &format!(
                        "attempt {}: planning afresh (an earlier attempt was interrupted)",
                        admitted.attempt
                    ),
                    tail,
                )
                .await;
            }
            match self.plan(admitted, config, env, false, tail).await? {
                Ok(result) => replanned = Some(result),
                Err(failed) => return Ok(failed),
            }
            apply_fresh_plan = true;
        }
        if let Some(saved) = saved_plan
            && config.kind == RunKind::Apply
        {
            let now = match self.current_tags(admitted, config, env, tail).await? {
                Ok(tags) => tags,
                Err(failed) => return Ok(failed),
            };
            stale_tags = saved.tags.changed(&now);
            if !stale_tags.is_empty() {
                let which = stale_tags.join(", ");
                if config.environment == PRODUCTION {
                    let mut failed = RunResult::new(
                        RunOutcome::Failed,
                        Some(ErrorClass::StalePlan),
                        format!("the saved plan is stale ({which} changed): nothing was applied"),
                    );
                    failed.stale_tags = stale_tags;
                    return Ok(failed);
                }
                let warning = format!(
                    "warning: the saved plan is stale ({which} changed): planning again before applying"
                );
                tracing::warn!(run_id = %run_id, changed = %which, "saved plan is stale; planning again");
                self.note(&warning, tail).await;
                match self.plan(admitted, config, env, false, tail).await? {
                    Ok(result) => replanned = Some(result),
                    Err(failed) => return Ok(failed),
                }
            }
        }

        let mut args = vec!["apply", "-input=false", "-auto-approve"];
        if config.kind == RunKind::Destroy {
            args.push("-destroy");
        } else if saved_plan.is_some() || apply_fresh_plan {
            args.push(PLAN_FILE);
        }
        let ran = self
            .command(admitted, config, env, cmd(&args), tail)
            .await?;
        if let Some(failed) = failure(&ran, "apply", Stage::Run) {
            return Ok(failed);
        }
        let output = Command {
            args: vec!["output".into(), "-json".into()],
            logged: false,
        };
        let ran = self.command(admitted, config, env, output, tail).await?;
        let mut result = RunResult::new(RunOutcome::Succeeded, None, "applied");
        result.stale_tags = stale_tags;
        if let Some(replanned) = replanned {
            result.message = if saved_plan.is_some() {
                "planned again and applied".into()
            } else {
                "planned and applied".into()
            };
            result.summary = replanned.summary;
            result.masked_plan = replanned.masked_plan;
        }
        if ran.outcome.success() {
            result.outputs = public_outputs(&ran.stdout.concat());
        } else {
            result.message = "applied; the outputs could not be read".into();
        }
        Ok(result)
    }

    /// `plan -out` and `show -json`: the summary and masked plan, or the failed result.
    async fn plan(
        &self,
        admitted: &AdmittedRun,
        config: &RunConfig,
        env: &[(String, Secret)],
        no_lock: bool,
        tail: &mut VecDeque<String>,
    ) -> Result<Result<RunResult, RunResult>, PipelineError> {
        let mut args = vec![
            "plan".to_owned(),
            "-input=false".to_owned(),
            format!("-out={PLAN_FILE}"),
            "-detailed-exitcode".to_owned(),
        ];
        if no_lock {
            args.push("-lock=false".to_owned());
        }
        let plan = Command { args, logged: true };
        let ran = self.command(admitted, config, env, plan, tail).await?;
        // -detailed-exitcode: 2 is success with changes.
        if (ran.outcome.exit_code != Some(2) || ran.outcome.stopped())
            && let Some(failed) = failure(&ran, "plan", Stage::Run)
        {
            return Ok(Err(failed));
        }
        let show = Command {
            args: vec!["show".into(), "-json".into(), PLAN_FILE.into()],
            logged: false,
        };
        let ran = self.command(admitted, config, env, show, tail).await?;
        if let Some(failed) = failure(&ran, "show", Stage::Run) {
            return Ok(Err(failed));
        }
        let plan_json = ran.stdout.concat();
        let mut result = RunResult::new(RunOutcome::Succeeded, None, "planned");
        result.summary = Some(cairn_tofu::summarize_plan(plan_json.as_bytes()));
        result.masked_plan = serde_json::from_str::<Value>(&plan_json).ok().map(|mut v| {
            cairn_tofu::mask_plan(&mut v);
            v
        });
        Ok(Ok(result))
    }

    /// The tags of what a plan made now in the work directory is made from.
    async fn current_tags(
        &self,
        admitted: &AdmittedRun,
        config: &RunConfig,
        env: &[(String, Secret)],
        tail: &mut VecDeque<String>,
    ) -> Result<Result<PlanTags, RunResult>, PipelineError> {
        let version = Command {
            args: vec!["version".into(), "-json".into()],
            logged: false,
        };
        let ran = self.command(admitted, config, env, version, tail).await?;
        if let Some(failed) = failure(&ran, "version", Stage::Run) {
            return Ok(Err(failed));
        }
        let tofu_version = plan_tags::tofu_version(&ran.stdout.concat()).unwrap_or_default();
        let lock_file = self
            .read_optional(&admitted.run_id, LOCK_FILE)
            .await?
            .unwrap_or_default();
        Ok(Ok(PlanTags {
            config_hash: config.config_hash.clone(),
            base_generation: admitted.base_generation,
            tofu_version,
            provider_lock_hash: plan_tags::sha256_hex(&lock_file),
            module_library_hash: plan_tags::module_library_hash(&self.settings.module_library)?,
        }))
    }

    /// A line of the runner's own in the run's log.
    async fn note(&self, text: &str, tail: &mut VecDeque<String>) {
        if let Some(sink) = &self.settings.log_sink {
            let _ = sink
                .send(LogLine {
                    stream: OutputStream::Stderr,
                    text: text.to_owned(),
                })
                .await;
        }
        push_tail(tail, self.settings.log_tail, text.to_owned());
    }

    async fn command(
        &self,
        admitted: &AdmittedRun,
        config: &RunConfig,
        env: &[(String, Secret)],
        command: Command,
        tail: &mut VecDeque<String>,
    ) -> Result<Ran, PipelineError> {
        let backend = &admitted.backend;
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
        let (tx, mut rx) = mpsc::channel::<LogLine>(256);
        let spec = CommandSpec {
            run_id: admitted.run_id,
            args: command.args.clone(),
            env: env.to_vec(),
            plain_env,
            base_dir: config.target_settings.get("base_dir").map(PathBuf::from),
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
        let outcome = self.exec.run(spec).await;
        let lines = collector
            .await
            .map_err(|e| PipelineError::Executor(ExecutorError::Supervisor(e)))?;
        let outcome = outcome?;
        let mut stdout = Vec::new();
        let mut text = Vec::new();
        for line in lines {
            let loggable = logged || line.stream == OutputStream::Stderr;
            if loggable {
                push_tail(tail, self.settings.log_tail, line.text.clone());
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

    async fn write(&self, path: &std::path::Path, bytes: &[u8]) -> Result<(), PipelineError> {
        tokio::fs::write(path, bytes)
            .await
            .map_err(|source| PipelineError::Io {
                op: "write",
                path: path.to_path_buf(),
                source,
            })
    }

    async fn read(&self, path: &std::path::Path) -> Result<Vec<u8>, PipelineError> {
        tokio::fs::read(path)
            .await
            .map_err(|source| PipelineError::Io {
                op: "read",
                path: path.to_path_buf(),
                source,
            })
    }

    async fn read_optional(
        &self,
        run_id: &RunId,
        name: &str,
    ) -> Result<Option<Vec<u8>>, PipelineError> {
        let path = self.exec.work_dir(run_id).join(name);
        match tokio::fs::read(&path).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(PipelineError::Io {
                op: "read",
                path,
                source,
            }),
        }
    }
}

fn push_tail(tail: &mut VecDeque<String>, max: usize, line: String) {
    if max == 0 {
        return;
    }
    if tail.len() >= max {
        tail.pop_front();
    }
    tail.push_back(line);
}

struct Command {
    args: Vec<String>,
    /// Whether its stdout may be logged (not for `show -json` and `output -json`, which
    /// print sensitive values in clear).
    logged: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Init,
    Validate,
    Run,
}

/// The failed result of a command that did not succeed, or `None` when it did.
fn failure(ran: &Ran, what: &str, stage: Stage) -> Option<RunResult> {
    let o = &ran.outcome;
    if o.timed_out {
        return Some(RunResult::new(
            RunOutcome::TimedOut,
            Some(ErrorClass::TimedOut),
            format!("{what} timed out — state may be incomplete"),
        ));
    }
    if o.cancelled {
        return Some(RunResult::new(
            RunOutcome::Cancelled,
            Some(ErrorClass::Cancelled),
            format!("{what} cancelled — state may be incomplete"),
        ));
    }
    if o.success() {
        return None;
    }
    let class = match stage {
        Stage::Validate => ErrorClass::Config,
        Stage::Init | Stage::Run => classify_text(&ran.text, stage),
    };
    let code = o
        .exit_code
        .map_or_else(|| "no exit code".to_owned(), |c| format!("exit code {c}"));
    Some(RunResult::new(
        RunOutcome::Failed,
        Some(class),
        format!("{what} failed ({code})"),
    ))
}

/// A failure's class from tofu's (redacted) output, when the coordinator recorded none.
fn classify_text(text: &str, stage: Stage) -> ErrorClass {
    let t = text.to_ascii_lowercase();
    const TRANSIENT: &[&str] = &[
        "error acquiring the state lock",
        "connection refused",
        "connection reset",
        "i/o timeout",
        "timeout awaiting",
        "tls handshake timeout",
        "no such host",
        "too many requests",
        "rate limit",
        "throttl",
        "503 service unavailable",
        "502 bad gateway",
        "500 internal server error",
        "504 gateway timeout",
        "http status 5",
    ];
    const CONFIG: &[&str] = &[
        "unsupported argument",
        "missing required argument",
        "reference to undeclared",
        "invalid reference",
        "unsupported block type",
        "argument or block definition required",
        "invalid expression",
        "module not installed",
        "unreadable module directory",
        "no value for required variable",
        "invalid value for",
    ];
    if TRANSIENT.iter().any(|p| t.contains(p)) {
        ErrorClass::Transient
    } else if stage == Stage::Validate || CONFIG.iter().any(|p| t.contains(p)) {
        ErrorClass::Config
    } else {
        ErrorClass::Provider
    }
}

/// The outputs of `tofu output -json` with sensitive values withheld; unreadable output gives
/// none.
fn public_outputs(json: &str) -> Vec<PublicOutput> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(json) else {
        return Vec::new();
    };
    map.into_iter()
        .map(|(name, o)| {
            let sensitive = o.get("sensitive").and_then(Value::as_bool).unwrap_or(true);
            PublicOutput {
                name,
                value: if sensitive {
                    None
                } else {
                    o.get("value").cloned()
                },
                type_json: o.get("type").cloned(),
                sensitive,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_reason_wins_over_text() {
        let mut r = RunResult::new(RunOutcome::Failed, Some(ErrorClass::Provider), "x");
        r.apply_refusal_reason("state is fenced: serial regression");
        assert_eq!(r.class, Some(ErrorClass::Fenced));
        r.apply_refusal_reason("plan is stale: base generation 3, now 4");
        assert_eq!(r.class, Some(ErrorClass::StalePlan));
        r.apply_refusal_reason("");
        assert_eq!(r.class, Some(ErrorClass::StalePlan));
        let mut ok = RunResult::new(RunOutcome::Succeeded, None, "ok");
        ok.apply_refusal_reason("fenced");
        assert_eq!(ok.class, None);
    }

    #[test]
    fn classifies_tofu_text() {
        assert_eq!(
            classify_text("Error: Error acquiring the state lock", Stage::Run),
            ErrorClass::Transient
        );
        assert_eq!(
            classify_text("Error: Unsupported argument", Stage::Run),
            ErrorClass::Config
        );
        assert_eq!(
            classify_text("Error: creating bucket: AccessDenied", Stage::Run),
            ErrorClass::Provider
        );
        assert_eq!(
            classify_text("anything", Stage::Validate),
            ErrorClass::Config
        );
    }

    #[test]
    fn outputs_withhold_sensitive_values() {
        let out = public_outputs(
            r#"{"a":{"sensitive":false,"type":"string","value":"x"},
                "b":{"sensitive":true,"type":"string","value":"hunter2"}}"#,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].value, Some(Value::String("x".into())));
        assert_eq!(out[1].value, None);
        assert!(!format!("{out:?}").contains("hunter2"));
    }
}
