//! `cairn.runner.v1.RunnerTargets`: target validation. The runner assumes the target's role
//! with the base credentials of the target's reference in its registry and asks
//! `sts:GetCallerIdentity` as the session; the answer is the account id or why not. Platform
//! admins and services (tenancy) may ask; a reference not registered for exactly that
//! tenant and target is refused like any run's.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_proto::runner as pb;
use tonic::{Request, Response, Status};

use crate::credentials::CredentialRegistry;
use crate::sts::{self, AwsRole};

/// The target validation service of one runner instance.
#[derive(Debug, Clone)]
pub struct ValidateService {
    /// The credential registry (with its STS client).
    pub registry: Arc<CredentialRegistry>,
}

fn require_admin_or_service<T>(req: &Request<T>) -> Result<(), Status> {
    let principal = cairn_auth::principal(req)?;
    if principal.is_platform_admin() || principal.is_service() {
        Ok(())
    } else {
        Err(Status::permission_denied(format!(
            "needs a service or an admin with scope {}",
            cairn_auth::PLATFORM_ADMIN_SCOPE
        )))
    }
}

impl ValidateService {
    /// Validates one target: the account id, or the error and whether it is transient.
    pub async fn validate(&self, req: &pb::ValidateTargetRequest) -> pb::ValidateTargetResponse {
        let settings = BTreeMap::from([
            (sts::SETTING_REGION.to_owned(), req.region.clone()),
            (sts::SETTING_ROLE_ARN.to_owned(), req.role_arn.clone()),
            (sts::SETTING_EXTERNAL_ID.to_owned(), req.external_id.clone()),
        ]);
        let failed = |error: String, transient: bool| pb::ValidateTargetResponse {
            ok: false,
            error,
            transient,
            ..Default::default()
        };
        let resolved = self
            .registry
            .resolve_aws_with(
                &req.tenant_id,
                &req.target_id,
                Some(req.credential_ref.as_str()),
                &settings,
                |var| std::env::var(var).ok(),
            )
            .await;
        let (role, base): (AwsRole, _) = match resolved {
            Ok(Some(pair)) => pair,
            Ok(None) => return failed("the request names no role".into(), false),
            Err(e) => return failed(e.chain(), e.is_transient()),
        };
        let session = format!("cairn-validate-{}", req.target_id);
        let session: String = session.chars().take(64).collect();
        match self.registry.sts().validate(&base, &role, &session).await {
            Ok(identity) => pb::ValidateTargetResponse {
                ok: true,
                account_id: identity.account_id,
                arn: identity.arn,
                ..Default::default()
            },
            Err(e) => failed(e.chain(), e.is_transient()),
        }
    }
}

#[tonic::async_trait]
impl pb::runner_targets_server::RunnerTargets for ValidateService {
    async fn validate_target(
        &self,
        request: Request<pb::ValidateTargetRequest>,
    ) -> Result<Response<pb::ValidateTargetResponse>, Status> {
        require_admin_or_service(&request)?;
        let req = request.get_ref();
        for (field, value) in [
            ("tenant_id", &req.tenant_id),
            ("target_id", &req.target_id),
            ("credential_ref", &req.credential_ref),
            ("region", &req.region),
            ("role_arn", &req.role_arn),
            ("external_id", &req.external_id),
        ] {
            if value.is_empty() {
                return Err(Status::invalid_argument(format!("{field} is required")));
            }
        }
        let answer = self.validate(req).await;
        tracing::info!(
            tenant_id = req.tenant_id,
            target_id = req.target_id,
            ok = answer.ok,
            account_id = answer.account_id,
            "target validated"
        );
        Ok(Response::new(answer))
    }
}
