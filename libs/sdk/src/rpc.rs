//! Every RPC the SDK calls, as a typed list ([`Rpc`]) that says which calls are safe to
//! retry ([`Idempotency`]), and one typed client per gRPC service whose methods make the
//! call with a deadline, the caller's access token and, for idempotent calls only, retries
//! on UNAVAILABLE.
use std::fmt;

use cairn_proto::{deployments, drift, runner, state, templates, tenancy};
use tonic::transport::Channel;

use crate::client::Cairn;
use crate::endpoints::Endpoint;
use crate::error::Error;

/// Whether an RPC may be sent again after UNAVAILABLE (the first try may have landed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotency {
    /// Reads nothing but reads: always safe to repeat.
    Read,
    /// A create or write that the server deduplicates by a key in the request (a name, a
    /// content hash, a run id, an idempotency key the SDK fills in when empty).
    ByKey,
    /// A write that sets a state rather than adding to it, so a repeat has the effect of
    /// one and undoes no one else's change (`TriggerScan` marks resources due now; one with
    /// a scan in flight is not queued again). Its answer may differ (a retried
    /// `TriggerScan` may count fewer queued resources).
    Repeatable,
    /// Repeating may do the work twice, or undo a change made in between (a replace-all
    /// like `SetIgnoreRules`): never retried.
    No,
}

impl Idempotency {
    /// Sending it again is safe.
    pub const fn retry_safe(self) -> bool {
        matches!(self, Self::Read | Self::ByKey | Self::Repeatable)
    }
}

/// `c.<method>(r).await`, with the tonic method named explicitly when the SDK's differs.
macro_rules! tonic_call {
    ($c:ident, $r:ident, $tonic:ident ; $method:ident) => {
        $c.$tonic($r).await
    };
    ($c:ident, $r:ident, ; $method:ident) => {
        $c.$method($r).await
    };
}

macro_rules! rpcs {
    ($(
        $svc:ident ($endpoint:ident, $pkg:ident :: $module:ident :: $client:ident, $proto:literal) {
            $( $method:ident $([$tonic:ident])? ($req:ident) -> $resp:ident = $variant:ident, $idem:ident; )*
        } $( [streams: $( $svariant:ident, $sidem:ident; )* ] )?
    )*) => {
        /// Every RPC of Cairn's gRPC services that the SDK calls.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Rpc {
            $( $( $variant, )* $( $( $svariant, )* )? )*
        }

        impl Rpc {
            /// Every RPC.
            pub const ALL: &'static [Rpc] = &[
                $( $( Rpc::$variant, )* $( $( Rpc::$svariant, )* )? )*
            ];

            /// Whether it may be retried.
            pub const fn idempotency(self) -> Idempotency {
                match self {
                    $( $( Rpc::$variant => Idempotency::$idem, )* $( $( Rpc::$svariant => Idempotency::$sidem, )* )? )*
                }
            }

            /// The service that answers it.
            pub const fn endpoint(self) -> Endpoint {
                match self {
                    $( $( Rpc::$variant => Endpoint::$endpoint, )* $( $( Rpc::$svariant => Endpoint::$endpoint, )* )? )*
                }
            }

            /// The fully qualified gRPC service name (`cairn.tenancy.v1.Tenants`).
            pub const fn service(self) -> &'static str {
                match self {
                    $( $( Rpc::$variant => $proto, )* $( $( Rpc::$svariant => $proto, )* )? )*
                }
            }

            /// The method name (`CreateTenant`).
            pub const fn method(self) -> &'static str {
                match self {
                    $( $( Rpc::$variant => stringify!($variant), )* $( $( Rpc::$svariant => stringify!($svariant), )* )? )*
                }
            }
        }

        $(
            #[doc = concat!("The `", $proto, "` service.")]
            #[derive(Clone, Debug)]
            pub struct $svc {
                pub(crate) cairn: Cairn,
            }

            impl $svc {
                /// The generated tonic client on this service's channel, for calls the
                /// typed methods do not cover (no deadline, token or retry added).
                pub fn raw(&self) -> Result<$pkg::$module::$client<Channel>, Error> {
                    Ok($pkg::$module::$client::new(self.cairn.channel(Endpoint::$endpoint)?))
                }

                $(
                    #[doc = concat!("`", $proto, "/", stringify!($variant), "`.")]
                    pub async fn $method(&self, req: $pkg::$req) -> Result<$pkg::$resp, Error> {
                        let channel = self.cairn.channel(Endpoint::$endpoint)?;
                        let max = self.cairn.max_decoding_message_size();
                        self.cairn
                            .unary(Rpc::$variant, req, move |r| {
                                let mut c = $pkg::$module::$client::new(channel.clone())
                                    .max_decoding_message_size(max);
                                async move { tonic_call!(c, r, $($tonic)? ; $method) }
                            })
                            .await
                    }
                )*
            }
        )*
    };
}

rpcs! {
    Tenants(Tenancy, tenancy::tenants_client::TenantsClient, "cairn.tenancy.v1.Tenants") {
        create_tenant(CreateTenantRequest) -> CreateTenantResponse = CreateTenant, No;
        get_tenant(GetTenantRequest) -> GetTenantResponse = GetTenant, Read;
        list_tenants(ListTenantsRequest) -> ListTenantsResponse = ListTenants, Read;
    }
    Users(Tenancy, tenancy::users_client::UsersClient, "cairn.tenancy.v1.Users") {
        add_user(AddUserRequest) -> AddUserResponse = AddUser, No;
        get_user(GetUserRequest) -> GetUserResponse = GetUser, Read;
        list_users(ListUsersRequest) -> ListUsersResponse = ListUsers, Read;
        set_role(SetRoleRequest) -> SetRoleResponse = SetRole, No;
        remove_user(RemoveUserRequest) -> RemoveUserResponse = RemoveUser, No;
        set_password(SetPasswordRequest) -> SetPasswordResponse = SetPassword, No;
    }
    Tokens(Tenancy, tenancy::tokens_client::TokensClient, "cairn.tenancy.v1.Tokens") {
        login(LoginRequest) -> AccessToken = Login, No;
        exchange_api_token(ExchangeApiTokenRequest) -> AccessToken = ExchangeApiToken, Read;
        get_signing_keys(GetSigningKeysRequest) -> GetSigningKeysResponse = GetSigningKeys, Read;
        create_api_token(CreateApiTokenRequest) -> CreateApiTokenResponse = CreateApiToken, No;
        list_api_tokens(ListApiTokensRequest) -> ListApiTokensResponse = ListApiTokens, Read;
        revoke_api_token(RevokeApiTokenRequest) -> RevokeApiTokenResponse = RevokeApiToken, No;
    }
    Targets(Tenancy, tenancy::targets_client::TargetsClient, "cairn.tenancy.v1.Targets") {
        create_target(CreateTargetRequest) -> CreateTargetResponse = CreateTarget, No;
        get_target(GetTargetRequest) -> GetTargetResponse = GetTarget, Read;
        list_targets(ListTargetsRequest) -> ListTargetsResponse = ListTargets, Read;
        update_target(UpdateTargetRequest) -> UpdateTargetResponse = UpdateTarget, No;
        delete_target(DeleteTargetRequest) -> DeleteTargetResponse = DeleteTarget, No;
        // Not deduplicated: each call queues another validation request (superseding the
        // one before), so a retry would ask the runner twice and answer another id.
        validate_target(ValidateTargetRequest) -> ValidateTargetResponse = ValidateTarget, No;
    }
    Audit(Tenancy, tenancy::audit_client::AuditClient, "cairn.tenancy.v1.Audit") {
        list_audit_entries(ListAuditEntriesRequest) -> ListAuditEntriesResponse = ListAuditEntries, Read;
    }
    Webhooks(Tenancy, tenancy::webhooks_client::WebhooksClient, "cairn.tenancy.v1.Webhooks") {
        // Not deduplicated: a retry would create a second subscription with another secret.
        create_webhook(CreateWebhookRequest) -> CreateWebhookResponse = CreateWebhook, No;
        list_webhooks(ListWebhooksRequest) -> ListWebhooksResponse = ListWebhooks, Read;
        // A retry of one that landed is NOT_FOUND.
        delete_webhook(DeleteWebhookRequest) -> DeleteWebhookResponse = DeleteWebhook, No;
        list_webhook_deliveries(ListWebhookDeliveriesRequest) -> ListWebhookDeliveriesResponse = ListWebhookDeliveries, Read;
        // Each call queues one more ping.
        test_webhook(TestWebhookRequest) -> TestWebhookResponse = TestWebhook, No;
    }
    Templates(Templates, templates::templates_client::TemplatesClient, "cairn.templates.v1.Templates") {
        create_template(CreateTemplateRequest) -> CreateTemplateResponse = CreateTemplate, ByKey;
        get_template(GetTemplateRequest) -> GetTemplateResponse = GetTemplate, Read;
        list_templates(ListTemplatesRequest) -> ListTemplatesResponse = ListTemplates, Read;
        publish_version(PublishVersionRequest) -> PublishVersionResponse = PublishVersion, ByKey;
        get_version(GetVersionRequest) -> GetVersionResponse = GetVersion, Read;
        list_versions(ListVersionsRequest) -> ListVersionsResponse = ListVersions, Read;
    }
    Resolver(Templates, templates::resolver_client::ResolverClient, "cairn.templates.v1.Resolver") {
        resolve(ResolveRequest) -> ResolveResponse = Resolve, ByKey;
        diff(DiffRequest) -> DiffResponse = Diff, Read;
        get_snapshot(GetSnapshotRequest) -> GetSnapshotResponse = GetSnapshot, Read;
        validate(ValidateRequest) -> ValidateResponse = Validate, Read;
    }
    States(State, state::states_client::StatesClient, "cairn.state.v1.States") {
        create_state(CreateStateRequest) -> CreateStateResponse = CreateState, ByKey;
        get_state(GetStateRequest) -> GetStateResponse = GetState, Read;
        list_states(ListStatesRequest) -> ListStatesResponse = ListStates, Read;
    }
    Runs(State, state::runs_client::RunsClient, "cairn.state.v1.Runs") {
        register_run(RegisterRunRequest) -> RegisterRunResponse = RegisterRun, ByKey;
        admit_run(AdmitRunRequest) -> AdmitRunResponse = AdmitRun, No;
        renew_run(RenewRunRequest) -> RenewRunResponse = RenewRun, No;
        finish_run(FinishRunRequest) -> FinishRunResponse = FinishRun, No;
        get_run_config(GetRunConfigRequest) -> GetRunConfigResponse = GetRunConfig, Read;
        put_plan(PutPlanRequest) -> PutPlanResponse = PutPlan, No;
        take_plan(TakePlanRequest) -> TakePlanResponse = TakePlan, No;
        quarantine(QuarantineRequest) -> QuarantineResponse = Quarantine, No;
        get_outputs(GetOutputsRequest) -> GetOutputsResponse = GetOutputs, Read;
        get_run(GetRunRequest) -> GetRunResponse = GetRun, Read;
        get_masked_plan(GetMaskedPlanRequest) -> GetMaskedPlanResponse = GetMaskedPlan, Read;
        get_registered_run_config(GetRegisteredRunConfigRequest) -> GetRunConfigResponse = GetRegisteredRunConfig, Read;
    }
    Recovery(State, state::recovery_client::RecoveryClient, "cairn.state.v1.Recovery") {
        list_fenced(ListFencedRequest) -> ListFencedResponse = ListFenced, Read;
        inspect_state(InspectStateRequest) -> InspectStateResponse = InspectState, Read;
        recover(RecoverRequest) -> RecoverResponse = Recover, No;
        set_after_restore(SetAfterRestoreRequest) -> SetAfterRestoreResponse = SetAfterRestore, No;
        force_unlock(ForceUnlockRequest) -> ForceUnlockResponse = ForceUnlock, No;
    } [streams:
        VerifyAll, Read;
    ]
    Instances(Deployments, deployments::instances_client::InstancesClient, "cairn.deployments.v1.Instances") {
        create_instance(CreateInstanceRequest) -> CreateInstanceResponse = CreateInstance, No;
        get_instance(GetInstanceRequest) -> GetInstanceResponse = GetInstance, Read;
        list_instances(ListInstancesRequest) -> ListInstancesResponse = ListInstances, Read;
        update_instance(UpdateInstanceRequest) -> UpdateInstanceResponse = UpdateInstance, No;
        delete_instance(DeleteInstanceRequest) -> DeleteInstanceResponse = DeleteInstance, No;
    }
    Deployments(Deployments, deployments::deployments_client::DeploymentsClient, "cairn.deployments.v1.Deployments") {
        create_deployment_with_key[create_deployment](CreateDeploymentRequest) -> CreateDeploymentResponse = CreateDeployment, ByKey;
        get_deployment(GetDeploymentRequest) -> GetDeploymentResponse = GetDeployment, Read;
        list_deployments(ListDeploymentsRequest) -> ListDeploymentsResponse = ListDeployments, Read;
        get_logs(GetLogsRequest) -> GetLogsResponse = GetLogs, Read;
        approve(ApproveRequest) -> ApproveResponse = Approve, No;
        reject(RejectRequest) -> RejectResponse = Reject, No;
        cancel(CancelRequest) -> CancelResponse = Cancel, No;
        get_plans(GetPlansRequest) -> GetPlansResponse = GetPlans, Read;
    } [streams:
        WatchDeployment, Read;
    ]
    Drift(Drift, drift::drift_client::DriftClient, "cairn.drift.v1.Drift") {
        get_drift_status(GetDriftStatusRequest) -> GetDriftStatusResponse = GetDriftStatus, Read;
        list_findings(ListFindingsRequest) -> ListFindingsResponse = ListFindings, Read;
        trigger_scan(TriggerScanRequest) -> TriggerScanResponse = TriggerScan, Repeatable;
        // Replaces the set: a retry could undo another caller's change made in between.
        set_ignore_rules(SetIgnoreRulesRequest) -> SetIgnoreRulesResponse = SetIgnoreRules, No;
    }
    RunnerAdmin(Runner, runner::runner_admin_client::RunnerAdminClient, "cairn.runner.v1.RunnerAdmin") {
        list_runs(ListRunsRequest) -> ListRunsResponse = ListRuns, Read;
        cancel_run(CancelRunRequest) -> CancelRunResponse = CancelRun, No;
    }
}

impl Rpc {
    /// Public RPCs need no access token (the caller proves itself in the request).
    pub const fn is_public(self) -> bool {
        matches!(
            self,
            Rpc::Login | Rpc::ExchangeApiToken | Rpc::GetSigningKeys
        )
    }
}

impl fmt::Display for Rpc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.service(), self.method())
    }
}

impl Deployments {
    /// `CreateDeployment`. An empty `idempotency_key` is filled with a fresh one, so the
    /// request is safe to retry on UNAVAILABLE (a retry returns the same deployment).
    pub async fn create_deployment(
        &self,
        mut req: deployments::CreateDeploymentRequest,
    ) -> Result<deployments::CreateDeploymentResponse, Error> {
        if req.idempotency_key.is_empty() {
            req.idempotency_key = uuid::Uuid::new_v4().to_string();
        }
        self.create_deployment_with_key(req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reads_and_keyed_creates_are_retried() {
        for rpc in Rpc::ALL {
            let name = rpc.method();
            // `ValidateTarget` queues a request (a write), unlike the resolver's `Validate`.
            let read = ([
                "Get", "List", "Validate", "Diff", "Inspect", "Verify", "Watch",
            ]
            .iter()
            .any(|p| name.starts_with(p))
                && *rpc != Rpc::ValidateTarget)
                || *rpc == Rpc::ExchangeApiToken;
            if read {
                assert_eq!(rpc.idempotency(), Idempotency::Read, "{rpc}");
            }
        }
        for rpc in [
            Rpc::CreateTenant,
            Rpc::AddUser,
            Rpc::CreateApiToken,
            Rpc::CreateTarget,
            Rpc::CreateInstance,
            Rpc::AdmitRun,
            Rpc::FinishRun,
            Rpc::Approve,
            Rpc::Cancel,
            Rpc::Recover,
            Rpc::ForceUnlock,
            Rpc::Login,
            Rpc::CreateWebhook,
            Rpc::DeleteWebhook,
            Rpc::TestWebhook,
            Rpc::SetIgnoreRules,
            Rpc::ValidateTarget,
        ] {
            assert!(!rpc.idempotency().retry_safe(), "{rpc} must not be retried");
        }
        for rpc in [
            Rpc::CreateTemplate,
            Rpc::PublishVersion,
            Rpc::CreateState,
            Rpc::RegisterRun,
            Rpc::CreateDeployment,
        ] {
            assert_eq!(rpc.idempotency(), Idempotency::ByKey, "{rpc}");
        }
        assert_eq!(
            Rpc::CreateTenant.to_string(),
            "cairn.tenancy.v1.Tenants/CreateTenant"
        );
        assert_eq!(Rpc::WatchDeployment.endpoint(), Endpoint::Deployments);
        assert_eq!(Rpc::TriggerScan.idempotency(), Idempotency::Repeatable);
        assert!(Rpc::TriggerScan.idempotency().retry_safe());
        for rpc in [
            Rpc::GetDriftStatus,
            Rpc::ListFindings,
            Rpc::TriggerScan,
            Rpc::SetIgnoreRules,
        ] {
            assert_eq!(rpc.endpoint(), Endpoint::Drift, "{rpc}");
            assert_eq!(rpc.service(), "cairn.drift.v1.Drift");
        }
        assert_eq!(Rpc::TestWebhook.endpoint(), Endpoint::Tenancy);
        assert_eq!(
            Rpc::ListWebhookDeliveries.to_string(),
            "cairn.tenancy.v1.Webhooks/ListWebhookDeliveries"
        );
    }
}
