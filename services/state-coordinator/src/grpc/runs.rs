//! `cairn.state.v1.Runs`: the run lifecycle used by the workflow and the runners.
use cairn_proto::state as pb;
use tonic::{Request, Response, Status};

use cairn_contract::{Environment, RunId, StateId};

use super::convert::{
    attempt, context_from_pb, context_to_pb, gen_u64, invalid, kind_from_pb, kind_to_pb, optional,
    outcome_from_pb, ts,
};
use super::who;
use crate::app::App;
use crate::app::plans::PlanTags;
use crate::app::runs::{Registration, RunConfig};
use crate::error::Error;

pub struct RunsService {
    pub app: App,
}

fn tags_from_pb(t: Option<pb::PlanTags>) -> Result<PlanTags, Error> {
    let t = t.ok_or_else(|| Error::invalid_argument("tags are required".to_owned()))?;
    Ok(PlanTags {
        config_hash: t.config_hash,
        base_generation: i64::try_from(t.base_generation)
            .map_err(|_| Error::invalid_argument("base_generation out of range".to_owned()))?,
        tofu_version: t.tofu_version,
        provider_lock_hash: t.provider_lock_hash,
        module_library_hash: t.module_library_hash,
    })
}

fn tags_to_pb(t: PlanTags) -> pb::PlanTags {
    pb::PlanTags {
        config_hash: t.config_hash,
        base_generation: gen_u64(t.base_generation),
        tofu_version: t.tofu_version,
        provider_lock_hash: t.provider_lock_hash,
        module_library_hash: t.module_library_hash,
    }
}

/// GetRunConfig and GetRegisteredRunConfig answer the same message.
fn run_config_to_pb(c: RunConfig) -> Result<pb::GetRunConfigResponse, Error> {
    let kind = c
        .run
        .kind
        .parse()
        .map_err(|_| Error::internal("stored run kind".to_owned()))?;
    Ok(pb::GetRunConfigResponse {
        run_id: c.run.run_id.to_string(),
        state_id: c.run.state_id.to_string(),
        kind: kind_to_pb(kind),
        environment: c.run.environment,
        root_config: c.root_config,
        config_hash: c.run.config_hash,
        context: Some(context_to_pb(c.context)),
        plan_run_id: c.run.plan_run_id.map(|p| p.to_string()).unwrap_or_default(),
    })
}

impl RunsService {
    fn backend(&self, state_id: &str) -> pb::BackendAddresses {
        let base = self.app.settings.public_http_url.trim_end_matches('/');
        let address = format!("{base}/v1/states/{state_id}");
        pb::BackendAddresses {
            lock_address: format!("{address}/lock"),
            unlock_address: format!("{address}/lock"),
            address,
        }
    }
}

#[tonic::async_trait]
impl pb::runs_server::Runs for RunsService {
    #[tracing::instrument(skip_all, fields(run_id = %req.get_ref().run_id))]
    async fn register_run(
        &self,
        req: Request<pb::RegisterRunRequest>,
    ) -> Result<Response<pb::RegisterRunResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let plan_run_id = optional(&r.plan_run_id, |s| RunId::parse("plan_run_id", s))?;
        let reg = Registration {
            run_id: RunId::parse("run_id", &r.run_id).map_err(invalid)?,
            state_id: StateId::parse("state_id", &r.state_id).map_err(invalid)?,
            kind: kind_from_pb(r.kind)?,
            environment: Environment::parse(&r.environment).map_err(Error::from)?,
            root_config: r.root_config,
            config_hash: r.config_hash,
            context: context_from_pb(r.context)?,
            plan_run_id,
        };
        let run_id = reg.run_id;
        let created = self.app.register_run(&who, reg).await?;
        Ok(Response::new(pb::RegisterRunResponse {
            run_id: run_id.to_string(),
            created,
        }))
    }

    #[tracing::instrument(skip_all, fields(run_id = %req.get_ref().run_id))]
    async fn admit_run(
        &self,
        req: Request<pb::AdmitRunRequest>,
    ) -> Result<Response<pb::AdmitRunResponse>, Status> {
        let who = who(&req)?;
        let run_id = RunId::parse("run_id", &req.get_ref().run_id).map_err(invalid)?;
        let a = self.app.admit_run(&who, run_id).await?;
        Ok(Response::new(pb::AdmitRunResponse {
            run_id: a.run_id.to_string(),
            attempt: u32::try_from(a.attempt).unwrap_or(0),
            backend: Some(self.backend(&a.state_id.to_string())),
            run_token: a.token.expose().to_owned(),
            lease_expires_at: Some(ts(a.lease_expires_at)),
            base_generation: gen_u64(a.base_generation),
            read_only: a.read_only,
            plan_current: a.plan_current,
            plan_stale_reason: a.plan_stale_reason,
            interrupted: a.interrupted,
        }))
    }

    async fn renew_run(
        &self,
        req: Request<pb::RenewRunRequest>,
    ) -> Result<Response<pb::RenewRunResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let until = self
            .app
            .renew_run(
                &who,
                RunId::parse("run_id", &r.run_id).map_err(invalid)?,
                attempt(r.attempt)?,
            )
            .await?;
        Ok(Response::new(pb::RenewRunResponse {
            lease_expires_at: Some(ts(until)),
        }))
    }

    #[tracing::instrument(skip_all, fields(run_id = %req.get_ref().run_id))]
    async fn finish_run(
        &self,
        req: Request<pb::FinishRunRequest>,
    ) -> Result<Response<pb::FinishRunResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let (generation, refusal) = self
            .app
            .finish_run(
                &who,
                RunId::parse("run_id", &r.run_id).map_err(invalid)?,
                attempt(r.attempt)?,
                outcome_from_pb(r.outcome)?,
                &r.message,
            )
            .await?;
        Ok(Response::new(pb::FinishRunResponse {
            final_generation: gen_u64(generation),
            // The code (`fenced`, `stale`), empty when the LOCKs were not refused.
            refusal_reason: refusal.map(|r| r.code().to_owned()).unwrap_or_default(),
        }))
    }

    async fn get_run_config(
        &self,
        req: Request<pb::GetRunConfigRequest>,
    ) -> Result<Response<pb::GetRunConfigResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let c = self
            .app
            .run_config(
                &who,
                RunId::parse("run_id", &r.run_id).map_err(invalid)?,
                attempt(r.attempt)?,
            )
            .await?;
        Ok(Response::new(run_config_to_pb(c)?))
    }

    async fn get_registered_run_config(
        &self,
        req: Request<pb::GetRegisteredRunConfigRequest>,
    ) -> Result<Response<pb::GetRunConfigResponse>, Status> {
        let who = who(&req)?;
        let run_id = RunId::parse("run_id", &req.get_ref().run_id).map_err(invalid)?;
        let c = self.app.registered_run_config(&who, run_id).await?;
        Ok(Response::new(run_config_to_pb(c)?))
    }

    async fn put_plan(
        &self,
        req: Request<pb::PutPlanRequest>,
    ) -> Result<Response<pb::PutPlanResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let stored = self
            .app
            .put_plan(
                &who,
                RunId::parse("run_id", &r.run_id).map_err(invalid)?,
                attempt(r.attempt)?,
                r.plan,
                tags_from_pb(r.tags)?,
                r.provider_lock_file,
                r.masked_plan_json,
            )
            .await?;
        Ok(Response::new(pb::PutPlanResponse {
            plan_id: stored.plan_id.to_string(),
            plan_sha256: stored.plan_sha256,
        }))
    }

    async fn get_masked_plan(
        &self,
        req: Request<pb::GetMaskedPlanRequest>,
    ) -> Result<Response<pb::GetMaskedPlanResponse>, Status> {
        let who = who(&req)?;
        let run_id = RunId::parse("run_id", &req.get_ref().run_id).map_err(invalid)?;
        let m = self.app.masked_plan(&who, run_id).await?;
        Ok(Response::new(pb::GetMaskedPlanResponse {
            plan_id: m.plan_id.to_string(),
            plan_sha256: m.plan_sha256,
            base_generation: gen_u64(m.base_generation),
            masked_plan_json: m.masked_plan_json,
            created_at: Some(ts(m.created_at)),
        }))
    }

    async fn take_plan(
        &self,
        req: Request<pb::TakePlanRequest>,
    ) -> Result<Response<pb::TakePlanResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let p = self
            .app
            .take_plan(
                &who,
                RunId::parse("run_id", &r.run_id).map_err(invalid)?,
                attempt(r.attempt)?,
            )
            .await?;
        Ok(Response::new(pb::TakePlanResponse {
            plan: p.plan,
            tags: Some(tags_to_pb(p.tags)),
            provider_lock_file: p.provider_lock_file,
            current: p.current,
            stale_reason: p.stale_reason,
        }))
    }

    async fn quarantine(
        &self,
        req: Request<pb::QuarantineRequest>,
    ) -> Result<Response<pb::QuarantineResponse>, Status> {
        let who = who(&req)?;
        let r = req.into_inner();
        let id = self
            .app
            .quarantine(
                &who,
                RunId::parse("run_id", &r.run_id).map_err(invalid)?,
                attempt(r.attempt)?,
                r.state,
            )
            .await?;
        Ok(Response::new(pb::QuarantineResponse {
            quarantine_id: id.to_string(),
        }))
    }

    #[tracing::instrument(skip_all, fields(run_id = %req.get_ref().run_id))]
    async fn get_run(
        &self,
        req: Request<pb::GetRunRequest>,
    ) -> Result<Response<pb::GetRunResponse>, Status> {
        let who = who(&req)?;
        let run_id = RunId::parse("run_id", &req.get_ref().run_id).map_err(invalid)?;
        let r = self.app.get_run(&who, run_id).await?;
        let kind = r
            .kind
            .parse()
            .map_err(|_| Error::internal("stored run kind".to_owned()))?;
        Ok(Response::new(pb::GetRunResponse {
            run_id: r.run_id.to_string(),
            state_id: r.state_id.to_string(),
            kind: kind_to_pb(kind),
            status: r.status,
            attempt: r.attempt.and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
            finished: r.finished_at.is_some(),
            lease_expires_at: r.lease_expires_at.map(ts),
            lease_live: r.lease_live,
            environment: r.environment,
            finished_at: r.finished_at.map(ts),
            read_only: r.read_only.unwrap_or(false),
            base_generation: r.base_generation.map_or(0, gen_u64),
            attempt_revoked: r.attempt_revoked,
            attempt_finished: r.attempt_finished,
            state_changed_since_registered: r.state_changed_since_registered,
        }))
    }

    async fn get_outputs(
        &self,
        req: Request<pb::GetOutputsRequest>,
    ) -> Result<Response<pb::GetOutputsResponse>, Status> {
        let who = who(&req)?;
        let id = StateId::parse("state_id", &req.get_ref().state_id).map_err(invalid)?;
        let (generation, outputs) = self.app.outputs(&who, id).await?;
        Ok(Response::new(pb::GetOutputsResponse {
            generation: gen_u64(generation),
            outputs: outputs
                .into_iter()
                .map(|o| pb::Output {
                    name: o.name,
                    value_json: o.value.map(|v| v.to_string()).unwrap_or_default(),
                    sensitive: o.sensitive,
                    type_json: o.type_json.map(|t| t.to_string()).unwrap_or_default(),
                })
                .collect(),
        }))
    }
}
