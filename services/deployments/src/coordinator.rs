//! The state coordinator as the workflow uses it, over gRPC with the service token: states
//! (created idempotently by key), run registration, a run's status (the fallback when its
//! result did not arrive), a state's outputs (the wiring of downstream resources, and the
//! instance's outputs) and the registered config of an applied run (what a destroy runs).
//! Answers become this service's values and errors here.
use std::collections::BTreeMap;

use cairn_proto::state as spb;
use cairn_sdk::{TokenInterceptor, TokenSource};
use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use uuid::Uuid;

use crate::domain::outputs::StateOutput;
use crate::error::{Error, Result};

type Authed = InterceptedService<Channel, TokenInterceptor>;

/// A run's status at the coordinator.
#[derive(Debug, Clone)]
pub struct RunStatus {
    /// `registered`, `running`, or the outcome once finished.
    pub status: String,
    pub attempt: u32,
    pub finished: bool,
    pub base_generation: u64,
}

/// The workflow's client of the coordinator.
#[derive(Clone)]
pub struct CoordinatorClient {
    states: spb::states_client::StatesClient<Authed>,
    runs: spb::runs_client::RunsClient<Authed>,
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
    pub fn new(channel: Channel, tokens: &TokenSource) -> Self {
        CoordinatorClient {
            states: spb::states_client::StatesClient::with_interceptor(
                channel.clone(),
                tokens.interceptor(),
            ),
            runs: spb::runs_client::RunsClient::with_interceptor(channel, tokens.interceptor())
                .max_decoding_message_size(usize::MAX),
        }
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
            .states
            .clone()
            .create_state(spb::CreateStateRequest {
                tenant_id: tenant.to_string(),
                instance_id: instance.to_string(),
                physical_name: physical_name.to_owned(),
            })
            .await
            .map_err(|s| refused("CreateState", &what, s))?
            .into_inner()
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
        self.runs
            .clone()
            .register_run(req)
            .await
            .map_err(|s| refused("RegisterRun", &what, s))?;
        Ok(())
    }

    /// The run as the coordinator sees it now.
    pub async fn run(&self, run_id: Uuid) -> Result<RunStatus> {
        let what = format!("run {run_id}");
        let r = self
            .runs
            .clone()
            .get_run(spb::GetRunRequest {
                run_id: run_id.to_string(),
            })
            .await
            .map_err(|s| refused("GetRun", &what, s))?
            .into_inner();
        Ok(RunStatus {
            status: r.status,
            attempt: r.attempt,
            finished: r.finished,
            base_generation: r.base_generation,
        })
    }

    /// The plan hash and base generation of a plan run's saved plan, if it stored one.
    pub async fn plan_of(&self, run_id: Uuid) -> Result<Option<(String, u64)>> {
        let answer = self
            .runs
            .clone()
            .get_masked_plan(spb::GetMaskedPlanRequest {
                run_id: run_id.to_string(),
            })
            .await;
        match answer {
            Ok(r) => {
                let r = r.into_inner();
                Ok(Some((r.plan_sha256, r.base_generation)))
            }
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(refused(
                "GetMaskedPlan",
                &format!("plan of run {run_id}"),
                s,
            )),
        }
    }

    /// The non-sensitive outputs of a state's current generation (name → JSON value).
    pub async fn outputs(&self, state_id: Uuid) -> Result<BTreeMap<String, serde_json::Value>> {
        let what = format!("outputs of state {state_id}");
        let r = self
            .runs
            .clone()
            .get_outputs(spb::GetOutputsRequest {
                state_id: state_id.to_string(),
            })
            .await
            .map_err(|s| refused("GetOutputs", &what, s))?
            .into_inner();
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
            .runs
            .clone()
            .get_outputs(spb::GetOutputsRequest {
                state_id: state_id.to_string(),
            })
            .await;
        let r = match answer {
            Ok(r) => r.into_inner(),
            Err(s) if s.code() == Code::NotFound => return Ok(None),
            Err(s) => return Err(refused("GetOutputs", &what, s)),
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
        Ok(self
            .runs
            .clone()
            .get_registered_run_config(spb::GetRegisteredRunConfigRequest {
                run_id: run_id.to_string(),
            })
            .await
            .map_err(|s| refused("GetRegisteredRunConfig", &what, s))?
            .into_inner())
    }
}
