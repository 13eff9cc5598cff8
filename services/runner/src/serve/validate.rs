//! Target validation, asked on the target's validation subject `cairn.runq.<target>.validate`
//! (the run queue stream; a consumer of its own per target): a `TargetValidationRequest`
//! (tenancy's `ValidateTarget` writes it through its outbox). The runner
//! assumes the target's role with the base credentials the request's reference names in its
//! registry — for exactly that tenant and target, like any run's — and asks
//! `sts:GetCallerIdentity` as the session. The answer is the domain event `target.validated`
//! (event id = the validation id): the role's account id and the session's ARN, or the
//! error and whether it is transient. A reference the registry does not hold for that tenant
//! and target is a non-transient failure, answered like any other. No credential is stored,
//! logged or published.

use std::collections::BTreeMap;

use cairn_bus::{Aggregate, Namespace, ServiceRole, validate_token};
use cairn_proto::events::{self as epb, event::Payload};
use cairn_proto::runner as pb;
use uuid::Uuid;

use crate::credentials::CredentialRegistry;
use crate::sts::{self, AwsRole};

/// The event's aggregate and type: `cairn.events.<tenant>.target.validated`, the one event
/// a runner states (`cairn_bus::OWNERS`).
pub const AGGREGATE: Aggregate = Aggregate::Target;
/// See [`AGGREGATE`].
pub const EVENT_TYPE: &str = "validated";
/// Who the event says acted.
pub const ACTOR: &str = "svc:runner";

/// Why a validation request cannot be answered at all (it is dropped, and logged): without
/// a validation id, a tenant that can name a subject, and the subject's own target there is
/// nobody to answer, or the request was put on the wrong subject.
#[derive(Debug, thiserror::Error)]
pub enum Unanswerable {
    /// The validation id is not a UUID.
    #[error("the validation id {0:?} is not a UUID")]
    ValidationId(String),
    /// The request names another target than the subject that carried it.
    #[error("the request names target {named:?}, not the queue's {queue:?}")]
    OtherTarget {
        /// The target the request names.
        named: String,
        /// The queue's target.
        queue: String,
    },
    /// The tenant id cannot be a subject token.
    #[error("the tenant id {0:?} cannot name an event subject")]
    Tenant(String),
}

/// Checks that `req`, taken from `queue_target`'s queue, can be answered; returns its
/// validation id.
pub fn answerable(
    queue_target: &str,
    req: &pb::TargetValidationRequest,
) -> Result<Uuid, Unanswerable> {
    let id = Uuid::parse_str(&req.validation_id)
        .map_err(|_| Unanswerable::ValidationId(req.validation_id.clone()))?;
    if req.target_id != queue_target {
        return Err(Unanswerable::OtherTarget {
            named: req.target_id.clone(),
            queue: queue_target.to_owned(),
        });
    }
    if req.tenant_id.is_empty() || validate_token("tenant", &req.tenant_id).is_err() {
        return Err(Unanswerable::Tenant(req.tenant_id.clone()));
    }
    Ok(id)
}

/// The session name of a validation: `cairn-validate-<target id>` (at most 64 characters),
/// so that CloudTrail shows which target was checked.
pub fn session_name(target_id: &str) -> String {
    format!("cairn-validate-{target_id}")
        .chars()
        .take(64)
        .collect()
}

/// Validates the target `req` names: the account id, or the error and whether it is
/// transient. Reads the registry's base credentials for exactly the request's tenant,
/// target and reference (`runner_env` resolves the registry's runner variables).
pub async fn validate_with(
    registry: &CredentialRegistry,
    req: &pb::TargetValidationRequest,
    instance: &str,
    runner_env: impl Fn(&str) -> Option<String>,
) -> epb::TargetValidated {
    let answer = |ok: bool, error: String, transient: bool| epb::TargetValidated {
        validation_id: req.validation_id.clone(),
        target_id: req.target_id.clone(),
        ok,
        error,
        transient,
        runner_instance: instance.to_owned(),
        ..Default::default()
    };
    if req.role_arn.is_empty() {
        return answer(
            false,
            "the request names no role: only an AWS target can be validated".into(),
            false,
        );
    }
    let settings = BTreeMap::from([
        (sts::SETTING_REGION.to_owned(), req.region.clone()),
        (sts::SETTING_ROLE_ARN.to_owned(), req.role_arn.clone()),
        (sts::SETTING_EXTERNAL_ID.to_owned(), req.external_id.clone()),
    ]);
    let resolved = registry
        .resolve_aws_with(
            &req.tenant_id,
            &req.target_id,
            Some(req.credential_ref.as_str()),
            &settings,
            runner_env,
        )
        .await;
    let (role, base): (AwsRole, _) = match resolved {
        Ok(Some(pair)) => pair,
        Ok(None) => return answer(false, "the request names no role".into(), false),
        Err(e) => return answer(false, e.chain(), e.is_transient()),
    };
    match registry
        .sts()
        .validate(&base, &role, &session_name(&req.target_id))
        .await
    {
        Ok(identity) => epb::TargetValidated {
            account_id: identity.account_id,
            arn: identity.arn,
            ..answer(true, String::new(), false)
        },
        Err(e) => answer(false, e.chain(), e.is_transient()),
    }
}

/// [`validate_with`] reading the runner's own environment.
pub async fn validate(
    registry: &CredentialRegistry,
    req: &pb::TargetValidationRequest,
    instance: &str,
) -> epb::TargetValidated {
    validate_with(registry, req, instance, |var| std::env::var(var).ok()).await
}

/// The `target.validated` event of `tenant_id` carrying `answer`; its id is the validation
/// id, so a request redelivered after its answer was published is answered under the same
/// `Nats-Msg-Id` (the stream drops the copy) and consumers record it once.
pub fn event(
    tenant_id: &str,
    validation_id: Uuid,
    answer: epb::TargetValidated,
) -> Result<epb::Event, cairn_bus::BusError> {
    let target_id = answer.target_id.clone();
    let mut event = cairn_bus::new_event(
        ServiceRole::Runner,
        tenant_id,
        AGGREGATE,
        target_id,
        EVENT_TYPE,
        ACTOR,
        Payload::TargetValidated(answer),
    )?;
    event.event_id = validation_id.to_string();
    Ok(event)
}

/// The subject the event goes to (`[<prefix>.]cairn.events.<tenant>.target.validated`).
pub fn subject(ns: &Namespace, event: &epb::Event) -> Result<String, cairn_bus::BusError> {
    cairn_bus::event_subject(ns, event)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn request() -> pb::TargetValidationRequest {
        pb::TargetValidationRequest {
            validation_id: Uuid::new_v4().to_string(),
            tenant_id: Uuid::new_v4().to_string(),
            target_id: "aws-t".into(),
            credential_ref: "platform".into(),
            region: "eu-west-1".into(),
            role_arn: "arn:aws:iam::210987654321:role/cairn-deploy".into(),
            external_id: "cairn-x".into(),
        }
    }

    #[test]
    fn only_requests_for_the_queues_target_with_ids_are_answerable() {
        let r = request();
        assert_eq!(
            answerable("aws-t", &r).unwrap().to_string(),
            r.validation_id
        );
        assert!(matches!(
            answerable("other", &r),
            Err(Unanswerable::OtherTarget { .. })
        ));
        let bad_id = pb::TargetValidationRequest {
            validation_id: "v1".into(),
            ..request()
        };
        assert!(matches!(
            answerable("aws-t", &bad_id),
            Err(Unanswerable::ValidationId(_))
        ));
        for tenant in ["", "a.b", "a*"] {
            let bad = pb::TargetValidationRequest {
                tenant_id: tenant.into(),
                ..request()
            };
            assert!(
                matches!(answerable("aws-t", &bad), Err(Unanswerable::Tenant(_))),
                "{tenant:?}"
            );
        }
    }

    #[test]
    fn the_event_is_the_validations_own() {
        let r = request();
        let id = Uuid::parse_str(&r.validation_id).unwrap();
        let e = event(
            &r.tenant_id,
            id,
            epb::TargetValidated {
                validation_id: r.validation_id.clone(),
                target_id: r.target_id.clone(),
                ok: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(e.event_id, r.validation_id);
        assert_eq!(
            (
                e.aggregate.as_str(),
                e.aggregate_id.as_str(),
                e.event_type.as_str()
            ),
            ("target", "aws-t", "validated")
        );
        let subject = subject(&Namespace::root(), &e).unwrap();
        assert_eq!(
            subject,
            format!("cairn.events.{}.target.validated", r.tenant_id)
        );
    }

    #[test]
    fn session_names_fit_sts() {
        let name = session_name(&Uuid::new_v4().to_string());
        assert!(
            name.len() <= 64 && name.starts_with("cairn-validate-"),
            "{name}"
        );
        assert_eq!(session_name(&"x".repeat(100)).len(), 64);
    }
}
