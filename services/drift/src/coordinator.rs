//! The state coordinator as drift uses it, with the service token: the root config and
//! context an applied run was registered with (`GetRegisteredRunConfig`), the
//! registration of a read-only drift run, and whether its state changed since (`GetRun`).
//! Answers become this service's errors here.
use cairn_proto::state as spb;
use cairn_sdk::{Cairn, CallOptions, Endpoint, TokenSource};
use tonic::Code;
use tonic::transport::Channel;
use uuid::Uuid;

use crate::error::{Error, Result};

/// The coordinator's `Runs` through the SDK's typed client.
#[derive(Clone)]
pub struct CoordinatorClient {
    cairn: Cairn,
}

/// A coordinator refusal as this service's error: what cannot change by retrying is a
/// failed precondition (the scan fails with it), the rest is the peer being unavailable.
fn refused(call: &'static str, what: &str, status: tonic::Status) -> Error {
    match status.code() {
        Code::NotFound => Error::not_found(what),
        Code::InvalidArgument | Code::FailedPrecondition | Code::PermissionDenied => {
            Error::failed_precondition(format!("{what}: {}", status.message()))
        }
        _ => cairn_service::PeerError::new("coordinator", call, status).into(),
    }
}

impl CoordinatorClient {
    /// A client of the coordinator at `url` on `channel`, with the service's `tokens`. A
    /// call is tried once: a scan the coordinator could not be asked about is postponed to
    /// the next tick, which is drift's own retry (the SDK's backoff would hold up the tick
    /// once per scan while the coordinator is away).
    pub fn new(
        url: &str,
        channel: Channel,
        tokens: &TokenSource,
    ) -> std::result::Result<Self, cairn_sdk::Error> {
        let options = CallOptions {
            max_attempts: 1,
            ..cairn_service::peer_call_options()
        };
        let cairn = cairn_service::peer_client(tokens, options, [(Endpoint::State, url, channel)])?;
        Ok(CoordinatorClient { cairn })
    }

    /// The root config and context `run_id` was registered with.
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

    /// Whether the state of the drift run `scan_id` had a state-changing run (plan, apply,
    /// destroy) registered, admitted, live or finished, or a generation committed, since the
    /// scan was registered: decided by the coordinator's database, whatever drift's events
    /// say (`GetRun`'s `state_changed_since_registered`).
    pub async fn scan_overtaken(&self, scan_id: Uuid) -> Result<bool> {
        let what = format!("drift run {scan_id}");
        Ok(self
            .cairn
            .runs()
            .get_run(spb::GetRunRequest {
                run_id: scan_id.to_string(),
            })
            .await
            .map_err(|e| refused("GetRun", &what, e.into_status()))?
            .state_changed_since_registered)
    }

    /// Registers `scan_id` as a read-only drift run of exactly the applied config
    /// (idempotent: the same registration again is a no-op).
    pub async fn register_scan(
        &self,
        scan_id: Uuid,
        applied: spb::GetRunConfigResponse,
    ) -> Result<()> {
        let what = format!("drift run {scan_id}");
        self.cairn
            .runs()
            .register_run(spb::RegisterRunRequest {
                run_id: scan_id.to_string(),
                state_id: applied.state_id,
                kind: spb::RunKind::Drift as i32,
                environment: applied.environment,
                root_config: applied.root_config,
                config_hash: applied.config_hash,
                context: applied.context,
                plan_run_id: String::new(),
            })
            .await
            .map_err(|e| refused("RegisterRun", &what, e.into_status()))?;
        Ok(())
    }
}
