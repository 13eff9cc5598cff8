//! The state coordinator, over gRPC with the service token: states (created idempotently
//! by key), run registration, a run's status (the fallback when its result did not arrive),
//! a plan run's masked plan (service-only; `GetPlans` and that fallback), a state's outputs
//! (the wiring of downstream resources, and the instance's outputs) and the registered
//! config of an applied run (what a destroy runs).
//! Answers become this service's values and errors here.
use std::collections::BTreeMap;

use cairn_proto::state as spb;
use cairn_sdk::Cairn;
use tonic::Code;
use uuid::Uuid;

use crate::domain::outputs::StateOutput;
use crate::error::{Error, Result};

/// A run's status at the coordinator.
#[derive(Debug, Clone)]
pub struct RunStatus {
    /// `registered`, `running`, or the outcome once finished.
    pub status: String,
    pub attempt: u32,
    pub finished: bool,
    pub base_generation: u64,
}

/// A plan run's masked plan as the coordinator stored it.
#[derive(Debug, Clone)]
pub struct MaskedPlan {
    pub plan_sha256: String,
    pub base_generation: u64,
    /// The provider plan JSON with every sensitive value masked (empty when the runner
    /// sent none).
    pub masked_plan_json: String,
}

/// This service's one client of the coordinator (the workflow's calls and the
/// service-only reads of `GetPlans` and the instances' outputs).
#[derive(Clone)]
pub struct CoordinatorClient {
    cairn: Cairn,
}

fn refused(call: &'static str, what: &str, status: tonic::Status) -> Error {
    match status.code() {
        Code::NotFound => Error::not_found(what),
        Code::InvalidArgument => Error::internal(format!(
            "coordinator {call} refused {what}: {}",
            status.message()
        )),
        Code::FailedPrecondition => {
            Error::failed_precondition(format!("{what}: {}", status.message()))
        }
        _ => cairn_service::PeerError::new("coordinator", call, status).into(),
    }
}

impl CoordinatorClient {
    /// `cairn` names the coordinator's endpoint ([`cairn_service::peer_client`]).
    pub fn new(cairn: Cairn) -> Self {
        CoordinatorClient { cairn }
    }

    /// The state of a resource (created on first use; idempotent on its key).
    pub async fn state_for(
        &self,
        tenant: Uuid,
        instance: Uuid,
        physical_name: &str,
    ) -> Result<Uuid> {
        let what = format!("state of {physical_name}");
        let state = self
            .cairn
            .states()
            .create_state(spb::CreateStateRequest {
                tenant_id: tenant.to_string(),
                instance_id: instance.to_string(),
                physical_name: physical_name.to_owned(),
            })
            .await
            .map_err(|e| refused("CreateState", &what, e.into_status()))?
            .state
            .ok_or_else(|| Error::internal("coordinator CreateState answered no state"))?;
        Uuid::parse_str(&state.state_id).map_err(|_| {
            Error::internal(format!(
                "coordinator CreateState answered state id {:?}",
                state.state_id
            ))
        })
    }

    /// Registers a run (idempotent for identical content).
    pub async fn register(&self, req: spb::RegisterRunRequest) -> Result<()> {
        let what = format!("run {}", req.run_id);
        self.cairn
            .runs()
            .register_run(req)
            .await
            .map_err(|e| refused("RegisterRun", &what, e.into_status()))?;
        Ok(())
    }

    /// The run as the coordinator sees it now.
    pub async fn run(&self, run_id: Uuid) -> Result<RunStatus> {
        let what = format!("run {run_id}");
        let r = self
            .cairn
            .runs()
            .get_run(spb::GetRunRequest {
                run_id: run_id.to_string(),
            })
            .await
            .map_err(|e| refused("GetRun", &what, e.into_status()))?;
        Ok(RunStatus {
            status: r.status,
            attempt: r.attempt,
            finished: r.finished,
            base_generation: r.base_generation,
        })
    }

    /// The masked plan of plan run `run_id` (its hash, base generation and masked JSON);
    /// `None` when the run stored no plan (a read-only run, or one that failed before
    /// PutPlan) or the coordinator does not know it.
    pub async fn masked_plan(&self, run_id: Uuid) -> Result<Option<MaskedPlan>> {
        let answer = self
            .cairn
            .runs()
            .get_masked_plan(spb::GetMaskedPlanRequest {
                run_id: run_id.to_string(),
            })
            .await;
        let m = match answer {
            Ok(r) => r,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => {
                return Err(refused(
                    "GetMaskedPlan",
                    &format!("the plan of run {run_id}"),
                    e.into_status(),
                ));
            }
        };
        let masked_plan_json = String::from_utf8(m.masked_plan_json).map_err(|_| {
            Error::internal(format!(
                "coordinator GetMaskedPlan answered a plan of run {run_id} that is not UTF-8"
            ))
        })?;
        Ok(Some(MaskedPlan {
            plan_sha256: m.plan_sha256,
            base_generation: m.base_generation,
            masked_plan_json,
        }))
    }

    /// The non-sensitive outputs of a state's current generation (name → JSON value).
    pub async fn outputs(&self, state_id: Uuid) -> Result<BTreeMap<String, serde_json::Value>> {
        let what = format!("outputs of state {state_id}");
        let r = self
            .cairn
            .runs()
            .get_outputs(spb::GetOutputsRequest {
                state_id: state_id.to_string(),
            })
            .await
            .map_err(|e| refused("GetOutputs", &what, e.into_status()))?;
        let mut out = BTreeMap::new();
        for o in r.outputs {
            if o.sensitive || o.value_json.is_empty() {
                continue;
            }
            let value = serde_json::from_str(&o.value_json).map_err(|e| {
                Error::internal(format!("coordinator output {:?} is not JSON: {e}", o.name))
            })?;
            out.insert(o.name, value);
        }
        Ok(out)
    }

    /// Every output of a state's current generation with its sensitivity (a sensitive one
    /// without its value), for showing them; `None` when the coordinator has no such state.
    pub async fn state_outputs(
        &self,
        state_id: Uuid,
    ) -> Result<Option<BTreeMap<String, StateOutput>>> {
        let what = format!("outputs of state {state_id}");
        let answer = self
            .cairn
            .runs()
            .get_outputs(spb::GetOutputsRequest {
                state_id: state_id.to_string(),
            })
            .await;
        let r = match answer {
            Ok(r) => r,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(refused("GetOutputs", &what, e.into_status())),
        };
        Ok(Some(
            r.outputs
                .into_iter()
                .map(|o| {
                    let output = StateOutput {
                        // Never keep a value the coordinator marks sensitive.
                        value_json: if o.sensitive {
                            String::new()
                        } else {
                            o.value_json
                        },
                        sensitive: o.sensitive,
                    };
                    (o.name, output)
                })
                .collect(),
        ))
    }

    /// The root config and context a run was registered with.
    pub async fn registered_config(&self, run_id: Uuid) -> Result<spb::GetRunConfigResponse> {
        let what = format!("config of run {run_id}");
        self.cairn
            .runs()
            .get_registered_run_config(spb::GetRegisteredRunConfigRequest {
                run_id: run_id.to_string(),
            })
            .await
            .map_err(|e| refused("GetRegisteredRunConfig", &what, e.into_status()))
    }
}
