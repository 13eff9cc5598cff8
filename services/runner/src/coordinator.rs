//! The runner's side of the state coordinator's `Runs` gRPC service: admitting a run and
//! fetching its config, saved plans (`PutPlan` with the masked plan JSON, `TakePlan`,
//! `GetMaskedPlan`), quarantine and `FinishRun`, with the conversions between the proto
//! messages and the pipeline's types.

use std::time::{Duration, SystemTime};

use cairn_contract::{Environment, InvalidEnvironment, RefusalReason, RunKind};
use cairn_proto::state as pb;
use cairn_sdk::{Cairn, Credential, Endpoint, TokenSource};
use tonic::transport::Channel;

use crate::executor::{RunId, Secret};
use crate::pipeline::{
    AdmittedRun, BackendAddresses, ErrorClass, RunConfig, RunOutcome, SavedPlan,
};
use crate::plan_tags::{self, PlanTags};

/// Why a coordinator call failed.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// The call was refused or did not get through.
    #[error("coordinator {call}: {status}")]
    Call {
        /// The RPC.
        call: &'static str,
        /// The gRPC status.
        status: Box<tonic::Status>,
    },
    /// The response is missing something or is malformed.
    #[error("coordinator {call}: malformed response: {problem}")]
    Malformed {
        /// The RPC.
        call: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The coordinator admitted the attempt, but its config can never be run by any runner:
    /// the attempt is to be finished as a config failure.
    #[error("run {} attempt {}: the config cannot be run", run.run_id, run.attempt)]
    Unrunnable {
        /// The attempt admitted.
        run: Box<AdmittedRun>,
        /// When `AdmitRun` admitted it (by this runner's clock).
        admitted_at: SystemTime,
        /// Why.
        #[source]
        source: InvalidEnvironment,
    },
    /// `PutPlan` stored the plan under another sha256 than the plan's own: what an approval
    /// would be bound to is not what was planned. An internal error, never retried.
    #[error(
        "coordinator PutPlan: the stored plan's sha256 {stored:?} is not the sha256 of the plan sent ({sent})"
    )]
    PlanDigestMismatch {
        /// sha256 (hex) of the plan file the runner sent.
        sent: String,
        /// The coordinator's `PutPlanResponse.plan_sha256`.
        stored: String,
    },
}

/// Why a `GetRunConfigResponse` cannot be turned into a [`RunConfig`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    /// Something is missing or unknown (an unknown run kind may be a newer coordinator's).
    #[error("{0}")]
    Malformed(String),
    /// The environment has no canonical name: no runner can decide its rules.
    #[error(transparent)]
    Environment(#[from] InvalidEnvironment),
}

impl CoordinatorError {
    fn call(call: &'static str) -> impl FnOnce(cairn_sdk::Error) -> Self {
        move |err| Self::Call {
            call,
            status: Box::new(err.into_status()),
        }
    }

    /// A call this runner stopped waiting for after `waited` (DEADLINE_EXCEEDED, as the
    /// SDK reports its own deadline): not a refusal, so the caller may try again.
    pub fn unanswered(call: &'static str, waited: Duration) -> Self {
        Self::Call {
            call,
            status: Box::new(tonic::Status::deadline_exceeded(format!(
                "no answer within {waited:?}"
            ))),
        }
    }

    /// The coordinator's typed refusal reason (`cairn-reason` metadata), if it gave one
    /// this runner knows.
    pub fn refusal(&self) -> Option<RefusalReason> {
        match self {
            Self::Call { status, .. } => cairn_service::reason_of(status),
            Self::Malformed { .. } | Self::Unrunnable { .. } | Self::PlanDigestMismatch { .. } => {
                None
            }
        }
    }

    /// The coordinator's message (or this error's text for a malformed response).
    pub fn status_message(&self) -> String {
        match self {
            Self::Call { status, .. } => status.message().to_owned(),
            Self::Malformed { .. } | Self::Unrunnable { .. } | Self::PlanDigestMismatch { .. } => {
                self.to_string()
            }
        }
    }

    /// Retrying can never succeed: the run does not exist (or is another tenant's), the
    /// request is invalid, or the run's config cannot be run.
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::Call { status, .. } => matches!(
                status.code(),
                tonic::Code::NotFound | tonic::Code::InvalidArgument
            ),
            Self::Malformed { .. } => false,
            Self::Unrunnable { .. } | Self::PlanDigestMismatch { .. } => true,
        }
    }

    /// The coordinator answered and refused for good: the attempt is not live any more (or
    /// never was), so neither a renewal nor a finish of it can succeed by trying again.
    pub fn is_refusal(&self) -> bool {
        match self {
            Self::Call { status, .. } => matches!(
                status.code(),
                tonic::Code::FailedPrecondition
                    | tonic::Code::NotFound
                    | tonic::Code::InvalidArgument
            ),
            Self::Malformed { .. } | Self::Unrunnable { .. } | Self::PlanDigestMismatch { .. } => {
                false
            }
        }
    }

    /// The class of a run that failed because of this error: transient for a call that
    /// failed or a malformed response, a config failure for a config no runner can run, and
    /// none (an internal error, never retried) for a plan stored under the wrong sha256.
    pub fn run_class(&self) -> Option<ErrorClass> {
        match self {
            Self::Call { .. } | Self::Malformed { .. } => Some(ErrorClass::Transient),
            Self::Unrunnable { .. } => Some(ErrorClass::Config),
            Self::PlanDigestMismatch { .. } => None,
        }
    }
}

/// A run as the coordinator sees it now (`GetRun`).
#[derive(Debug, Clone)]
pub struct RunStatus {
    /// `registered`, `running`, or the outcome once finished.
    pub status: String,
    /// The latest attempt (0 when never admitted).
    pub attempt: u32,
    /// Finished for good.
    pub finished: bool,
    /// The latest attempt's lease is live (by the coordinator's clock).
    pub lease_live: bool,
    /// The outcome of a finished run (`Failed` for an unknown status).
    pub outcome: RunOutcome,
    /// What the run does (`None` for a kind this runner does not know).
    pub kind: Option<RunKind>,
    /// The state generation the latest attempt started from (0 when never admitted).
    pub base_generation: u64,
}

impl RunStatus {
    /// The error class the outcome implies, where it implies one.
    pub fn outcome_class(&self) -> Option<ErrorClass> {
        match self.outcome {
            RunOutcome::Cancelled => Some(ErrorClass::Cancelled),
            RunOutcome::TimedOut => Some(ErrorClass::TimedOut),
            RunOutcome::Interrupted => Some(ErrorClass::Interrupted),
            RunOutcome::Succeeded | RunOutcome::Failed => None,
        }
    }
}

/// The coordinator's `Runs` through the SDK's typed client, authenticated with the
/// runner's service token.
#[derive(Clone)]
pub struct CoordinatorClient {
    cairn: Cairn,
}

/// A run the coordinator admitted, with its config.
#[derive(Debug, Clone)]
pub struct Admission {
    /// The attempt granted.
    pub run: AdmittedRun,
    /// The run's config and execution context.
    pub config: RunConfig,
    /// The plan run an apply applies, if any.
    pub plan_run_id: Option<String>,
    /// How long the granted lease lasts from now (renew well before it ends).
    pub lease: Duration,
    /// When `AdmitRun` admitted the attempt (by this runner's clock): the run's start.
    pub admitted_at: SystemTime,
}

/// A saved plan as the coordinator stored it (`PutPlan`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPlan {
    /// The coordinator's id of the saved plan.
    pub plan_id: String,
    /// sha256 (lowercase hex) of the plan file: what an approval is bound to. Checked to be
    /// the sha256 of the bytes sent.
    pub plan_sha256: String,
}

/// The saved plan of a plan run, for review (`GetMaskedPlan`).
#[derive(Debug, Clone)]
pub struct MaskedPlan {
    /// The coordinator's id of the saved plan.
    pub plan_id: String,
    /// sha256 (lowercase hex) of the plan file.
    pub plan_sha256: String,
    /// The state generation the plan was made against.
    pub base_generation: u64,
    /// The plan JSON with every sensitive value masked (empty when none was sent).
    pub masked_plan_json: Vec<u8>,
}

impl CoordinatorClient {
    /// A client of the coordinator at `url` on `channel`, sending the access token `token`
    /// as is.
    pub fn new(url: &str, channel: Channel, token: Secret) -> Result<Self, cairn_sdk::Error> {
        let source = TokenSource::new(Credential::AccessToken(token.expose().to_owned()), None);
        Self::with_source(url, channel, &source)
    }

    /// A client of the coordinator at `url` on `channel`, sending `source`'s current access
    /// token (keep it fresh with [`TokenSource::spawn_refresh`] when it exchanges an API
    /// token).
    pub fn with_source(
        url: &str,
        channel: Channel,
        source: &TokenSource,
    ) -> Result<Self, cairn_sdk::Error> {
        let cairn = cairn_service::peer_client(
            source,
            cairn_service::peer_call_options(),
            [(Endpoint::State, url, channel)],
        )?;
        Ok(Self { cairn })
    }

    /// `AdmitRun` then `GetRunConfig`.
    pub async fn admit(&self, run_id: &str) -> Result<Admission, CoordinatorError> {
        let runs = self.cairn.runs();
        let a = runs
            .admit_run(pb::AdmitRunRequest {
                run_id: run_id.to_owned(),
            })
            .await
            .map_err(CoordinatorError::call("AdmitRun"))?;
        let admitted_at = SystemTime::now();
        let attempt = a.attempt;
        let lease = a
            .lease_expires_at
            .as_ref()
            .map_or(Duration::ZERO, remaining_until);
        let run = admitted_from_proto(a)?;
        let c = runs
            .get_run_config(pb::GetRunConfigRequest {
                run_id: run_id.to_owned(),
                attempt,
            })
            .await
            .map_err(CoordinatorError::call("GetRunConfig"))?;
        let plan_run_id = Some(c.plan_run_id.clone()).filter(|p| !p.is_empty());
        let config = match config_from_proto(c) {
            Ok(config) => config,
            Err(ConfigProblem::Malformed(problem)) => {
                return Err(CoordinatorError::Malformed {
                    call: "GetRunConfig",
                    problem,
                });
            }
            Err(ConfigProblem::Environment(source)) => {
                return Err(CoordinatorError::Unrunnable {
                    run: Box::new(run),
                    admitted_at,
                    source,
                });
            }
        };
        Ok(Admission {
            run,
            config,
            plan_run_id,
            lease,
            admitted_at,
        })
    }

    /// `PutPlan` of a plan run's saved plan, with the plan JSON whose sensitive values are
    /// masked (`masked_plan`, sent serialized; none: the coordinator stores none). The
    /// sha256 the coordinator stored the plan under must be the plan's own, else
    /// [`CoordinatorError::PlanDigestMismatch`].
    pub async fn put_plan(
        &self,
        run: &AdmittedRun,
        saved: &SavedPlan,
        masked_plan: Option<&serde_json::Value>,
    ) -> Result<StoredPlan, CoordinatorError> {
        let t = &saved.tags;
        // A `Value` always serializes (its keys are strings).
        let masked_plan_json = masked_plan
            .map(|v| serde_json::to_vec(v).unwrap_or_default())
            .unwrap_or_default();
        let r = self
            .cairn
            .runs()
            .put_plan(pb::PutPlanRequest {
                run_id: run.run_id.to_string(),
                attempt: run.attempt,
                plan: saved.plan.clone(),
                tags: Some(pb::PlanTags {
                    config_hash: t.config_hash.clone(),
                    base_generation: t.base_generation,
                    tofu_version: t.tofu_version.clone(),
                    provider_lock_hash: t.provider_lock_hash.clone(),
                    module_library_hash: t.module_library_hash.clone(),
                }),
                provider_lock_file: saved.lock_file.clone(),
                masked_plan_json,
            })
            .await
            .map_err(CoordinatorError::call("PutPlan"))?;
        let plan_sha256 = verify_plan_sha256(&saved.plan, r.plan_sha256)?;
        Ok(StoredPlan {
            plan_id: r.plan_id,
            plan_sha256,
        })
    }

    /// `GetMaskedPlan`: the saved plan of plan run `run_id`; `None` when it has none (NOT_FOUND).
    pub async fn masked_plan(&self, run_id: &str) -> Result<Option<MaskedPlan>, CoordinatorError> {
        let r = match self
            .cairn
            .runs()
            .get_masked_plan(pb::GetMaskedPlanRequest {
                run_id: run_id.to_owned(),
            })
            .await
        {
            Ok(r) => r,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(CoordinatorError::call("GetMaskedPlan")(e)),
        };
        Ok(Some(MaskedPlan {
            plan_id: r.plan_id,
            plan_sha256: r.plan_sha256,
            base_generation: r.base_generation,
            masked_plan_json: r.masked_plan_json,
        }))
    }

    /// `TakePlan` for an apply: its saved plan, and whether the coordinator deems it current.
    pub async fn take_plan(
        &self,
        run: &AdmittedRun,
    ) -> Result<(SavedPlan, bool), CoordinatorError> {
        let r = self
            .cairn
            .runs()
            .take_plan(pb::TakePlanRequest {
                run_id: run.run_id.to_string(),
                attempt: run.attempt,
            })
            .await
            .map_err(CoordinatorError::call("TakePlan"))?;
        let t = r.tags.ok_or_else(|| CoordinatorError::Malformed {
            call: "TakePlan",
            problem: "no tags".into(),
        })?;
        let saved = SavedPlan {
            plan: r.plan,
            lock_file: r.provider_lock_file,
            tags: PlanTags {
                config_hash: t.config_hash,
                base_generation: t.base_generation,
                tofu_version: t.tofu_version,
                provider_lock_hash: t.provider_lock_hash,
                module_library_hash: t.module_library_hash,
            },
        };
        Ok((saved, r.current))
    }

    /// `Quarantine` of an `errored.tfstate` that `attempt` of `run_id` left; returns the
    /// quarantine id. The coordinator takes it from any attempt of the run (a revoked or
    /// superseded one too) and stores a re-sent file once.
    pub async fn quarantine(
        &self,
        run_id: RunId,
        attempt: u32,
        state: Vec<u8>,
    ) -> Result<String, CoordinatorError> {
        Ok(self
            .cairn
            .runs()
            .quarantine(pb::QuarantineRequest {
                run_id: run_id.to_string(),
                attempt,
                state,
            })
            .await
            .map_err(CoordinatorError::call("Quarantine"))?
            .quarantine_id)
    }

    /// `RenewRun`: extends the attempt's lease; returns how long the lease lasts from now
    /// (by this runner's clock; zero when the response has no expiry).
    pub async fn renew(&self, run: &AdmittedRun) -> Result<Duration, CoordinatorError> {
        let r = self
            .cairn
            .runs()
            .renew_run(pb::RenewRunRequest {
                run_id: run.run_id.to_string(),
                attempt: run.attempt,
            })
            .await
            .map_err(CoordinatorError::call("RenewRun"))?;
        Ok(r.lease_expires_at
            .as_ref()
            .map_or(Duration::ZERO, remaining_until))
    }

    /// `GetRun`: the run and its latest attempt.
    pub async fn get_run(&self, run_id: &str) -> Result<RunStatus, CoordinatorError> {
        let r = self
            .cairn
            .runs()
            .get_run(pb::GetRunRequest {
                run_id: run_id.to_owned(),
            })
            .await
            .map_err(CoordinatorError::call("GetRun"))?;
        let outcome = match r.status.as_str() {
            "succeeded" => RunOutcome::Succeeded,
            "cancelled" => RunOutcome::Cancelled,
            "timed_out" => RunOutcome::TimedOut,
            "interrupted" => RunOutcome::Interrupted,
            _ => RunOutcome::Failed,
        };
        Ok(RunStatus {
            kind: kind_from_proto(r.kind),
            status: r.status,
            attempt: r.attempt,
            finished: r.finished,
            lease_live: r.lease_live,
            outcome,
            base_generation: r.base_generation,
        })
    }

    /// `FinishRun`: the generation current afterwards and the refusal reason the coordinator
    /// recorded on the attempt (a LOCK it refused), if it names one this runner knows.
    pub async fn finish(
        &self,
        run: &AdmittedRun,
        outcome: RunOutcome,
        message: &str,
    ) -> Result<(u64, Option<RefusalReason>), CoordinatorError> {
        let r = self
            .cairn
            .runs()
            .finish_run(pb::FinishRunRequest {
                run_id: run.run_id.to_string(),
                attempt: run.attempt,
                outcome: outcome_to_proto(outcome) as i32,
                message: message.to_owned(),
            })
            .await
            .map_err(CoordinatorError::call("FinishRun"))?;
        let reason = RefusalReason::from_code(&r.refusal_reason);
        if reason.is_none() && !r.refusal_reason.is_empty() {
            tracing::warn!(
                run_id = %run.run_id,
                code = r.refusal_reason,
                "the coordinator gave a refusal reason this runner does not know; keeping tofu's class"
            );
        }
        Ok((r.final_generation, reason))
    }
}

/// The sha256 the coordinator reported for a stored plan, checked against the sha256 of the
/// plan file bytes sent (`plan`); a coordinator that reports none or another is refused.
pub fn verify_plan_sha256(plan: &[u8], stored: String) -> Result<String, CoordinatorError> {
    let sent = plan_tags::sha256_hex(plan);
    if stored == sent {
        Ok(stored)
    } else {
        Err(CoordinatorError::PlanDigestMismatch { sent, stored })
    }
}

/// The run kind of a proto `RunKind` (`None`: unspecified or unknown).
fn kind_from_proto(kind: i32) -> Option<RunKind> {
    match pb::RunKind::try_from(kind) {
        Ok(pb::RunKind::Plan) => Some(RunKind::Plan),
        Ok(pb::RunKind::Apply) => Some(RunKind::Apply),
        Ok(pb::RunKind::Destroy) => Some(RunKind::Destroy),
        Ok(pb::RunKind::Preview) => Some(RunKind::Preview),
        Ok(pb::RunKind::Drift) => Some(RunKind::Drift),
        Ok(pb::RunKind::Unspecified) | Err(_) => None,
    }
}

/// The time from now until `at` (zero when it has passed or is unreadable).
fn remaining_until(at: &prost_types::Timestamp) -> Duration {
    SystemTime::try_from(*at)
        .ok()
        .and_then(|at| at.duration_since(SystemTime::now()).ok())
        .unwrap_or_default()
}

/// The pipeline's view of an `AdmitRunResponse`.
pub fn admitted_from_proto(a: pb::AdmitRunResponse) -> Result<AdmittedRun, CoordinatorError> {
    let malformed = |problem: &str| CoordinatorError::Malformed {
        call: "AdmitRun",
        problem: problem.to_owned(),
    };
    let backend = a.backend.ok_or_else(|| malformed("no backend addresses"))?;
    let run_id =
        RunId::parse("run_id", &a.run_id).map_err(|_| malformed("the run id is not a UUID"))?;
    Ok(AdmittedRun {
        run_id,
        attempt: a.attempt,
        backend: BackendAddresses {
            address: backend.address,
            lock_address: backend.lock_address,
            unlock_address: backend.unlock_address,
        },
        run_token: Secret::new(a.run_token),
        base_generation: a.base_generation,
        read_only: a.read_only,
        interrupted: a.interrupted,
    })
}

/// The pipeline's view of a `GetRunConfigResponse`; the environment is normalised (an
/// environment that cannot be is a [`ConfigProblem::Environment`]).
pub fn config_from_proto(c: pb::GetRunConfigResponse) -> Result<RunConfig, ConfigProblem> {
    let malformed = ConfigProblem::Malformed;
    let kind =
        kind_from_proto(c.kind).ok_or_else(|| malformed(format!("unknown run kind {}", c.kind)))?;
    let ctx = c
        .context
        .ok_or_else(|| malformed("no execution context".into()))?;
    Ok(RunConfig {
        kind,
        environment: Environment::parse(&c.environment)?,
        root_config: c.root_config,
        config_hash: c.config_hash,
        tenant_id: ctx.tenant_id,
        target_id: ctx.target_id,
        target_settings: ctx.target_settings.into_iter().collect(),
        credential_ref: Some(ctx.credential_ref).filter(|r| !r.is_empty()),
        sensitive_variable_refs: ctx.sensitive_variable_refs.into_iter().collect(),
    })
}

/// The coordinator's (and the run result's) outcome.
pub fn outcome_to_proto(outcome: RunOutcome) -> pb::RunOutcome {
    match outcome {
        RunOutcome::Succeeded => pb::RunOutcome::Succeeded,
        RunOutcome::Failed => pb::RunOutcome::Failed,
        RunOutcome::Cancelled => pb::RunOutcome::Cancelled,
        RunOutcome::TimedOut => pb::RunOutcome::TimedOut,
        RunOutcome::Interrupted => pb::RunOutcome::Interrupted,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config_response(kind: pb::RunKind, environment: &str) -> pb::GetRunConfigResponse {
        pb::GetRunConfigResponse {
            kind: kind as i32,
            environment: environment.to_owned(),
            context: Some(pb::ExecutionContext::default()),
            ..Default::default()
        }
    }

    #[test]
    fn malformed_responses_are_refused() {
        let a = pb::AdmitRunResponse {
            run_id: "not-a-uuid".into(),
            backend: Some(pb::BackendAddresses::default()),
            ..Default::default()
        };
        assert!(matches!(
            admitted_from_proto(a),
            Err(CoordinatorError::Malformed { .. })
        ));
        assert!(matches!(
            admitted_from_proto(pb::AdmitRunResponse::default()),
            Err(CoordinatorError::Malformed { .. })
        ));
        assert!(matches!(
            config_from_proto(config_response(pb::RunKind::Unspecified, "staging")),
            Err(ConfigProblem::Malformed(_))
        ));
        let config = config_from_proto(config_response(pb::RunKind::Drift, "staging")).unwrap();
        assert_eq!(config.kind, RunKind::Drift);
        assert_eq!(config.credential_ref, None);
    }

    #[test]
    fn a_plan_stored_under_another_sha256_is_refused() {
        let plan = b"a saved plan";
        let own = plan_tags::sha256_hex(plan);
        assert_eq!(verify_plan_sha256(plan, own.clone()).unwrap(), own);
        for stored in [
            String::new(),
            plan_tags::sha256_hex(b"another plan"),
            own.to_uppercase(),
        ] {
            let e = verify_plan_sha256(plan, stored.clone()).unwrap_err();
            assert!(
                matches!(&e, CoordinatorError::PlanDigestMismatch { sent, stored: s } if *sent == own && *s == stored),
                "{e:?}"
            );
            // An internal error: the run fails unclassified (never retried).
            assert_eq!(e.run_class(), None);
            assert!(e.to_string().contains(&own), "{e}");
        }
    }

    #[test]
    fn environments_are_normalised_and_an_unusable_one_is_a_config_problem() {
        for name in ["prod", "Production", "production"] {
            let config = config_from_proto(config_response(pb::RunKind::Apply, name)).unwrap();
            assert!(config.environment.is_production(), "{name}");
            assert_eq!(config.environment.as_str(), "production");
        }
        let config = config_from_proto(config_response(pb::RunKind::Apply, "Staging")).unwrap();
        assert_eq!(config.environment.as_str(), "staging");
        for bad in ["", "not an environment", "prod/eu"] {
            assert!(matches!(
                config_from_proto(config_response(pb::RunKind::Apply, bad)),
                Err(ConfigProblem::Environment(_))
            ));
        }
    }
}
