//! The JSON shapes of `--output json`: stable, snake_case field names, timestamps as RFC
//! 3339 strings, enums as lower-case words (`succeeded`, `awaiting_approval`), JSON
//! documents (parameters, outputs, audit details) as JSON values.
use cairn_proto::{
    deployments as dpb, drift as drpb, runner as rpb, state as spb, templates as tpb,
    tenancy as tnpb,
};
use serde::Serialize;
use serde_json::Value;

use crate::output::Columns;

/// A protobuf timestamp as a UTC time; None for one out of range (a negative `nanos`, or a
/// time chrono cannot hold), never a time it does not say.
pub fn utc(t: &prost_types::Timestamp) -> Option<chrono::DateTime<chrono::Utc>> {
    let nanos = u32::try_from(t.nanos).ok()?;
    chrono::DateTime::from_timestamp(t.seconds, nanos)
}

/// RFC 3339, or None.
pub fn ts(t: &Option<prost_types::Timestamp>) -> Option<String> {
    utc(t.as_ref()?).map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// `DEPLOYMENT_STATUS_AWAITING_APPROVAL` → `awaiting_approval`.
pub fn enum_word(full: &str, prefix: &str) -> String {
    full.strip_prefix(prefix).unwrap_or(full).to_lowercase()
}

macro_rules! word {
    ($ty:ty, $prefix:literal, $v:expr) => {
        <$ty>::try_from($v)
            .map(|e| enum_word(e.as_str_name(), $prefix))
            .unwrap_or_else(|_| format!("unknown({})", $v))
    };
}

pub fn deployment_status(v: i32) -> String {
    word!(dpb::DeploymentStatus, "DEPLOYMENT_STATUS_", v)
}
pub fn step_status(v: i32) -> String {
    word!(dpb::StepStatus, "STEP_STATUS_", v)
}
pub fn step_kind(v: i32) -> String {
    word!(dpb::StepKind, "STEP_KIND_", v)
}

fn json_or_string(s: &str) -> Value {
    if s.is_empty() {
        return Value::Null;
    }
    serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_owned()))
}

#[derive(Debug, Serialize)]
pub struct TenantView {
    pub tenant_id: String,
    pub slug: String,
    pub display_name: String,
    pub created_at: Option<String>,
}
impl Columns for TenantView {
    const COLUMNS: &'static [&'static str] = &["tenant_id", "slug", "display_name", "created_at"];
}
impl From<tnpb::Tenant> for TenantView {
    fn from(t: tnpb::Tenant) -> Self {
        TenantView {
            created_at: ts(&t.created_at),
            tenant_id: t.tenant_id,
            slug: t.slug,
            display_name: t.display_name,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct MemberView {
    pub user_id: String,
    pub tenant_id: String,
    pub email: String,
    pub display_name: String,
    pub role: String,
    pub added_at: Option<String>,
}
impl Columns for MemberView {
    const COLUMNS: &'static [&'static str] =
        &["user_id", "email", "display_name", "role", "added_at"];
}
impl From<tnpb::Member> for MemberView {
    fn from(m: tnpb::Member) -> Self {
        MemberView {
            added_at: ts(&m.added_at),
            user_id: m.user_id,
            tenant_id: m.tenant_id,
            email: m.email,
            display_name: m.display_name,
            role: m.role,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ApiTokenView {
    pub token_id: String,
    pub tenant_id: String,
    pub user_id: String,
    pub name: String,
    pub role: String,
    pub scopes: Vec<String>,
    pub created_at: Option<String>,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
    pub last_used_at: Option<String>,
}
impl Columns for ApiTokenView {
    const COLUMNS: &'static [&'static str] = &[
        "token_id",
        "name",
        "role",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ];
}
impl From<tnpb::ApiToken> for ApiTokenView {
    fn from(t: tnpb::ApiToken) -> Self {
        ApiTokenView {
            created_at: ts(&t.created_at),
            expires_at: ts(&t.expires_at),
            revoked_at: ts(&t.revoked_at),
            last_used_at: ts(&t.last_used_at),
            token_id: t.token_id,
            tenant_id: t.tenant_id,
            user_id: t.user_id,
            name: t.name,
            role: t.role,
            scopes: t.scopes,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct CreatedTokenView {
    #[serde(flatten)]
    pub token: ApiTokenView,
    /// Shown once.
    pub secret: String,
}

#[derive(Debug, Serialize)]
pub struct TargetView {
    pub target_id: String,
    pub tenant_id: String,
    pub name: String,
    /// `local` or `aws`.
    pub provider: String,
    pub base_dir: Option<String>,
    /// AWS: the region, the role assumed and the external id its trust policy must require.
    pub region: Option<String>,
    pub role_arn: Option<String>,
    pub external_id: Option<String>,
    pub credential_ref: String,
    pub max_concurrent_deployments: u32,
    pub enabled: bool,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    /// The newest validation requested and its result (`cairn targets validate`).
    pub last_validation: Option<TargetValidationView>,
}
impl Columns for TargetView {
    const COLUMNS: &'static [&'static str] = &[
        "target_id",
        "name",
        "provider",
        "base_dir",
        "region",
        "role_arn",
        "external_id",
        "max_concurrent_deployments",
        "enabled",
        "validation=last_validation.status",
    ];
}
impl From<tnpb::Target> for TargetView {
    fn from(t: tnpb::Target) -> Self {
        let spec = t.spec.unwrap_or_default();
        let (provider, base_dir, aws) = match spec.provider {
            Some(tnpb::target_spec::Provider::Local(l)) => ("local", Some(l.base_dir), None),
            Some(tnpb::target_spec::Provider::Aws(a)) => ("aws", None, Some(a)),
            None => ("none", None, None),
        };
        let (region, role_arn, external_id) = match aws {
            Some(a) => (Some(a.region), Some(a.role_arn), Some(a.external_id)),
            None => (None, None, None),
        };
        TargetView {
            created_at: ts(&t.created_at),
            updated_at: ts(&t.updated_at),
            target_id: t.target_id,
            tenant_id: t.tenant_id,
            name: t.name,
            provider: provider.to_owned(),
            base_dir,
            region,
            role_arn,
            external_id,
            credential_ref: spec.credential_ref,
            max_concurrent_deployments: spec.max_concurrent_deployments,
            enabled: spec.enabled,
            last_validation: t.last_validation.map(TargetValidationView::from),
        }
    }
}

/// `TARGET_VALIDATION_STATUS_SUCCEEDED` → `succeeded`.
pub fn validation_status(v: i32) -> String {
    word!(tnpb::TargetValidationStatus, "TARGET_VALIDATION_STATUS_", v)
}

#[derive(Debug, Serialize)]
pub struct TargetValidationView {
    pub validation_id: String,
    /// `pending`, `succeeded` or `failed`.
    pub status: String,
    /// Succeeded: the role's account and the validation session's ARN.
    pub account_id: Option<String>,
    pub arn: Option<String>,
    /// Failed: why, and whether trying again later may help.
    pub error: Option<String>,
    pub transient: bool,
    /// The runner instance that answered.
    pub runner_instance: Option<String>,
    pub requested_at: Option<String>,
    pub finished_at: Option<String>,
}
impl From<tnpb::TargetValidation> for TargetValidationView {
    fn from(v: tnpb::TargetValidation) -> Self {
        let some = |s: String| (!s.is_empty()).then_some(s);
        TargetValidationView {
            status: validation_status(v.status),
            requested_at: ts(&v.requested_at),
            finished_at: ts(&v.finished_at),
            validation_id: v.validation_id,
            account_id: some(v.account_id),
            arn: some(v.arn),
            error: some(v.error),
            transient: v.transient,
            runner_instance: some(v.runner_instance),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct TemplateView {
    pub template_id: String,
    pub tenant_id: String,
    pub name: String,
    pub description: String,
    pub latest_version: u32,
    pub created_at: Option<String>,
}
impl Columns for TemplateView {
    const COLUMNS: &'static [&'static str] = &[
        "template_id",
        "name",
        "latest_version",
        "description",
        "created_at",
    ];
}
impl From<tpb::Template> for TemplateView {
    fn from(t: tpb::Template) -> Self {
        TemplateView {
            created_at: ts(&t.created_at),
            template_id: t.template_id,
            tenant_id: t.tenant_id,
            name: t.name,
            description: t.description,
            latest_version: t.latest_version,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct VersionView {
    pub template_id: String,
    pub number: u32,
    pub content_hash: String,
    pub created_at: Option<String>,
}
impl Columns for VersionView {
    const COLUMNS: &'static [&'static str] = &["number", "content_hash", "created_at"];
}
impl From<tpb::TemplateVersion> for VersionView {
    fn from(v: tpb::TemplateVersion) -> Self {
        VersionView {
            created_at: ts(&v.created_at),
            template_id: v.template_id,
            number: v.number,
            content_hash: v.content_hash,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct PublishedView {
    pub template: TemplateView,
    pub version: VersionView,
    /// false when this exact content was already published.
    pub created: bool,
}

#[derive(Debug, Serialize)]
pub struct ProblemView {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub kind: String,
    pub path: String,
    pub message: String,
}

#[derive(Debug, Serialize)]
pub struct ValidationView {
    pub file: String,
    pub valid: bool,
    pub content_hash: String,
    pub problems: Vec<ProblemView>,
}

#[derive(Debug, Serialize)]
pub struct ResourceView {
    pub name: String,
    pub module: String,
    pub status: String,
    pub last_generation: u64,
    pub drift_status: String,
    pub state_id: String,
    pub last_applied_run_id: String,
}

#[derive(Debug, Serialize)]
pub struct OutputView {
    pub name: String,
    /// The JSON value; null when sensitive (withheld) or unavailable.
    pub value: Value,
    pub sensitive: bool,
    /// Why no value could be read (no state yet, or the state lacks the output); null when
    /// the value was read.
    pub unavailable_reason: Option<String>,
    pub description: String,
}
impl OutputView {
    /// The value as a table shows it: the value, `(sensitive)` or `(unavailable: reason)`.
    pub fn display(&self) -> String {
        if self.sensitive {
            "(sensitive)".to_owned()
        } else if let Some(reason) = &self.unavailable_reason {
            format!("(unavailable: {reason})")
        } else {
            match &self.value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }
        }
    }
}
impl From<dpb::InstanceOutput> for OutputView {
    fn from(o: dpb::InstanceOutput) -> Self {
        let unavailable_reason = non_empty(o.unavailable_reason);
        OutputView {
            value: if o.sensitive || unavailable_reason.is_some() {
                Value::Null
            } else {
                json_or_string(&o.value_json)
            },
            unavailable_reason,
            name: o.name,
            sensitive: o.sensitive,
            description: o.description,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct InstanceView {
    pub instance_id: String,
    pub tenant_id: String,
    pub name: String,
    pub template_id: String,
    pub template_version: u32,
    pub target_id: String,
    pub environment: String,
    pub status: String,
    pub parameters: Value,
    pub active_deployment_id: Option<String>,
    pub last_applied_snapshot_id: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    pub resources: Vec<ResourceView>,
    pub outputs: Vec<OutputView>,
}
impl Columns for InstanceView {
    const COLUMNS: &'static [&'static str] = &[
        "instance_id",
        "name",
        "environment",
        "status",
        "template_version",
        "active_deployment_id",
    ];
}
fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}
impl From<dpb::Instance> for InstanceView {
    fn from(i: dpb::Instance) -> Self {
        InstanceView {
            status: word!(dpb::InstanceStatus, "INSTANCE_STATUS_", i.status),
            parameters: json_or_string(&i.parameters_json),
            created_at: ts(&i.created_at),
            updated_at: ts(&i.updated_at),
            resources: i
                .resources
                .into_iter()
                .map(|r| ResourceView {
                    status: word!(dpb::ResourceStatus, "RESOURCE_STATUS_", r.status),
                    drift_status: word!(dpb::DriftStatus, "DRIFT_STATUS_", r.drift_status),
                    name: r.name,
                    module: r.module,
                    last_generation: r.last_generation,
                    state_id: r.state_id,
                    last_applied_run_id: r.last_applied_run_id,
                })
                .collect(),
            outputs: i.outputs.into_iter().map(OutputView::from).collect(),
            instance_id: i.instance_id,
            tenant_id: i.tenant_id,
            name: i.name,
            template_id: i.template_id,
            template_version: i.template_version,
            target_id: i.target_id,
            environment: i.environment,
            active_deployment_id: non_empty(i.active_deployment_id),
            last_applied_snapshot_id: non_empty(i.last_applied_snapshot_id),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct PlanView {
    pub add: u32,
    pub change: u32,
    pub destroy: u32,
    pub replaced: Vec<String>,
    pub risk: String,
}
impl From<dpb::PlanSummary> for PlanView {
    fn from(p: dpb::PlanSummary) -> Self {
        PlanView {
            add: p.add,
            change: p.change,
            destroy: p.destroy,
            replaced: p.replaced,
            risk: p.risk,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct StepView {
    pub step_id: String,
    pub kind: String,
    pub resource: String,
    pub status: String,
    pub reason: String,
    pub run_id: String,
    pub tries: u32,
    pub error_class: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub depends_on: Vec<String>,
    pub plan: Option<PlanView>,
}
impl From<dpb::Step> for StepView {
    fn from(s: dpb::Step) -> Self {
        StepView {
            kind: step_kind(s.kind),
            status: step_status(s.status),
            started_at: ts(&s.started_at),
            finished_at: ts(&s.finished_at),
            plan: s.plan.map(PlanView::from),
            step_id: s.step_id,
            resource: s.resource,
            reason: s.reason,
            run_id: s.run_id,
            tries: s.tries,
            error_class: s.error_class,
            depends_on: s.depends_on,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ApprovalView {
    pub decision: String,
    pub by: String,
    pub plan_set_hash: String,
    pub comment: String,
    pub at: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct DeploymentView {
    pub deployment_id: String,
    pub tenant_id: String,
    pub instance_id: String,
    pub instance_name: String,
    pub kind: String,
    pub status: String,
    pub requested_by: String,
    pub environment: String,
    pub target_id: String,
    pub template_version: u32,
    pub snapshot_id: String,
    pub plan_set_hash: String,
    pub summary: String,
    pub created_at: Option<String>,
    pub finished_at: Option<String>,
    pub steps: Vec<StepView>,
    pub approvals: Vec<ApprovalView>,
}
impl Columns for DeploymentView {
    const COLUMNS: &'static [&'static str] = &[
        "deployment_id",
        "instance_name",
        "kind",
        "status",
        "requested_by",
        "created_at",
        "summary",
    ];
}
impl From<dpb::Deployment> for DeploymentView {
    fn from(d: dpb::Deployment) -> Self {
        DeploymentView {
            kind: word!(dpb::DeploymentKind, "DEPLOYMENT_KIND_", d.kind),
            status: deployment_status(d.status),
            created_at: ts(&d.created_at),
            finished_at: ts(&d.finished_at),
            steps: d.steps.into_iter().map(StepView::from).collect(),
            approvals: d
                .approvals
                .into_iter()
                .map(|a| ApprovalView {
                    at: ts(&a.at),
                    decision: a.decision,
                    by: a.by,
                    plan_set_hash: a.plan_set_hash,
                    comment: a.comment,
                })
                .collect(),
            deployment_id: d.deployment_id,
            tenant_id: d.tenant_id,
            instance_id: d.instance_id,
            instance_name: d.instance_name,
            requested_by: d.requested_by,
            environment: d.environment,
            target_id: d.target_id,
            template_version: d.template_version,
            snapshot_id: d.snapshot_id,
            plan_set_hash: d.plan_set_hash,
            summary: d.summary,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ResourcePlanView {
    pub resource: String,
    pub run_id: String,
    pub plan_sha256: String,
    pub base_generation: u64,
    pub summary: Option<PlanView>,
    pub masked_plan: Value,
}

#[derive(Debug, Serialize)]
pub struct PlansView {
    pub deployment_id: String,
    pub plan_set_hash: String,
    pub plans: Vec<ResourcePlanView>,
}
impl PlansView {
    pub fn new(deployment_id: String, p: dpb::GetPlansResponse) -> Self {
        PlansView {
            deployment_id,
            plan_set_hash: p.plan_set_hash,
            plans: p
                .plans
                .into_iter()
                .map(|r| ResourcePlanView {
                    summary: r.summary.map(PlanView::from),
                    masked_plan: json_or_string(&r.masked_plan_json),
                    resource: r.resource,
                    run_id: r.run_id,
                    plan_sha256: r.plan_sha256,
                    base_generation: r.base_generation,
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct LogLineView {
    pub step_id: String,
    pub attempt: u32,
    pub seq: u64,
    pub stream: String,
    pub text: String,
}
impl Columns for LogLineView {
    const COLUMNS: &'static [&'static str] = &["step_id", "attempt", "seq", "stream", "text"];
}
impl From<dpb::LogLine> for LogLineView {
    fn from(l: dpb::LogLine) -> Self {
        LogLineView {
            step_id: l.step_id,
            attempt: l.attempt,
            seq: l.seq,
            stream: l.stream,
            text: l.text,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct StateView {
    pub state_id: String,
    pub tenant_id: String,
    pub instance_id: String,
    pub key: String,
    pub status: String,
    pub current_generation: u64,
    pub fence_reason: String,
    pub created_at: Option<String>,
}
impl Columns for StateView {
    const COLUMNS: &'static [&'static str] = &[
        "state_id",
        "key",
        "status",
        "current_generation",
        "fence_reason",
    ];
}
impl From<spb::State> for StateView {
    fn from(s: spb::State) -> Self {
        StateView {
            status: word!(spb::StateStatus, "STATE_STATUS_", s.status),
            created_at: ts(&s.created_at),
            state_id: s.state_id,
            tenant_id: s.tenant_id,
            instance_id: s.instance_id,
            key: s.key,
            current_generation: s.current_generation,
            fence_reason: s.fence_reason,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct GenerationView {
    pub generation: u64,
    pub r#final: bool,
    pub tofu_serial: i64,
    pub lineage: String,
    pub size: u64,
    pub key_id: String,
    pub run_id: String,
    pub attempt: u32,
    pub recovered_from: u64,
    pub created_at: Option<String>,
    pub verified: bool,
    pub verify_error: String,
}

#[derive(Debug, Serialize)]
pub struct InspectView {
    pub state: StateView,
    pub generations: Vec<GenerationView>,
}
impl From<spb::InspectStateResponse> for InspectView {
    fn from(r: spb::InspectStateResponse) -> Self {
        InspectView {
            state: StateView::from(r.state.unwrap_or_default()),
            generations: r
                .generations
                .into_iter()
                .map(|g| GenerationView {
                    created_at: ts(&g.created_at),
                    generation: g.generation,
                    r#final: g.r#final,
                    tofu_serial: g.tofu_serial,
                    lineage: g.lineage,
                    size: g.size,
                    key_id: g.key_id,
                    run_id: g.run_id,
                    attempt: g.attempt,
                    recovered_from: g.recovered_from,
                    verified: g.verified,
                    verify_error: g.verify_error,
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct VerifyItemView {
    pub state_id: String,
    pub tenant_id: String,
    pub generation: u64,
    pub ok: bool,
    pub problem: String,
    pub unknown_object_key: String,
}
impl Columns for VerifyItemView {
    const COLUMNS: &'static [&'static str] = &[
        "state_id",
        "generation",
        "ok",
        "problem",
        "unknown_object_key",
    ];
}
impl From<spb::VerifyReportItem> for VerifyItemView {
    fn from(i: spb::VerifyReportItem) -> Self {
        VerifyItemView {
            state_id: i.state_id,
            tenant_id: i.tenant_id,
            generation: i.generation,
            ok: i.ok,
            problem: i.problem,
            unknown_object_key: i.unknown_object_key,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct AuditView {
    pub entry_id: String,
    pub tenant_id: String,
    pub actor: String,
    pub action: String,
    pub object_type: String,
    pub object_id: String,
    pub occurred_at: Option<String>,
    pub recorded_at: Option<String>,
    pub source: String,
    pub detail: Value,
}
impl Columns for AuditView {
    const COLUMNS: &'static [&'static str] =
        &["occurred_at", "actor", "action", "object_type", "object_id"];
}
impl From<tnpb::AuditEntry> for AuditView {
    fn from(e: tnpb::AuditEntry) -> Self {
        AuditView {
            occurred_at: ts(&e.occurred_at),
            recorded_at: ts(&e.recorded_at),
            detail: json_or_string(&e.detail_json),
            entry_id: e.entry_id,
            tenant_id: e.tenant_id,
            actor: e.actor,
            action: e.action,
            object_type: e.object_type,
            object_id: e.object_id,
            source: e.source,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ActiveRunView {
    pub run_id: String,
    pub attempt: u32,
    pub target_id: String,
    pub kind: String,
    pub started_at: Option<String>,
    pub cancelling: bool,
}
impl Columns for ActiveRunView {
    const COLUMNS: &'static [&'static str] = &[
        "run_id",
        "attempt",
        "target_id",
        "kind",
        "started_at",
        "cancelling",
    ];
}
impl From<rpb::ActiveRun> for ActiveRunView {
    fn from(r: rpb::ActiveRun) -> Self {
        ActiveRunView {
            started_at: ts(&r.started_at),
            run_id: r.run_id,
            attempt: r.attempt,
            target_id: r.target_id,
            kind: r.kind,
            cancelling: r.cancelling,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct WhoamiView {
    pub context: String,
    pub subject: String,
    pub tenant_id: Option<String>,
    pub tenant_slug: Option<String>,
    pub email: Option<String>,
    pub role: String,
    pub scopes: Vec<String>,
    pub expires_at: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct ContextView {
    pub name: String,
    pub current: bool,
    pub tenancy: String,
    pub templates: String,
    pub state: String,
    pub runner: String,
    pub deployments: String,
    pub drift: String,
}
impl Columns for ContextView {
    const COLUMNS: &'static [&'static str] = &["name", "current", "tenancy", "deployments"];
}

pub fn drift_status(v: i32) -> String {
    word!(drpb::DriftStatus, "DRIFT_STATUS_", v)
}

#[derive(Debug, Serialize)]
pub struct ResourceDriftView {
    pub resource: String,
    /// `unknown` (never scanned, or applied again since), `in_sync`, `drift_detected` or
    /// `check_failed`.
    pub status: String,
    /// A scan is in flight.
    pub scanning: bool,
    pub last_scan_at: Option<String>,
    pub next_scan_at: Option<String>,
    /// For `check_failed`: the run's error class (`transient`, `provider`, `timed_out`, …).
    pub error_class: Option<String>,
    pub message: Option<String>,
    /// The open finding, when `drift_detected`.
    pub finding_id: Option<String>,
    pub state_id: String,
    pub target_id: String,
    pub environment: String,
    pub applied_run_id: String,
}
impl Columns for ResourceDriftView {
    const COLUMNS: &'static [&'static str] = &[
        "resource",
        "status",
        "scanning",
        "last_scan_at",
        "next_scan_at",
        "error_class",
        "finding_id",
    ];
}
impl From<drpb::ResourceDrift> for ResourceDriftView {
    fn from(r: drpb::ResourceDrift) -> Self {
        ResourceDriftView {
            status: drift_status(r.status),
            last_scan_at: ts(&r.last_scan_at),
            next_scan_at: ts(&r.next_scan_at),
            error_class: non_empty(r.error_class),
            message: non_empty(r.message),
            finding_id: non_empty(r.finding_id),
            resource: r.resource,
            scanning: r.scanning,
            state_id: r.state_id,
            target_id: r.target_id,
            environment: r.environment,
            applied_run_id: r.applied_run_id,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct DriftStatusView {
    pub instance_id: String,
    pub instance_name: String,
    /// The worst status of its resources.
    pub status: String,
    pub ignore_rules: Vec<String>,
    pub resources: Vec<ResourceDriftView>,
}
impl DriftStatusView {
    pub fn new(instance_name: String, r: drpb::GetDriftStatusResponse) -> Self {
        DriftStatusView {
            status: drift_status(r.status),
            resources: r
                .resources
                .into_iter()
                .map(ResourceDriftView::from)
                .collect(),
            instance_id: r.instance_id,
            instance_name,
            ignore_rules: r.ignore_rules,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ChangeView {
    pub address: String,
    /// `update`, `delete` (gone outside), `replace` or `remove`.
    pub action: String,
    /// Attribute paths (never values).
    pub attributes: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct FindingView {
    pub finding_id: String,
    pub instance_id: String,
    pub resource: String,
    /// `open` or `resolved`.
    pub status: String,
    pub summary: String,
    pub fingerprint: String,
    pub scan_id: String,
    pub detected_at: Option<String>,
    pub resolved_at: Option<String>,
    pub changes: Vec<ChangeView>,
}
impl Columns for FindingView {
    const COLUMNS: &'static [&'static str] = &[
        "finding_id",
        "instance_id",
        "resource",
        "status",
        "detected_at",
        "resolved_at",
        "summary",
    ];
}
impl From<drpb::Finding> for FindingView {
    fn from(f: drpb::Finding) -> Self {
        FindingView {
            detected_at: ts(&f.detected_at),
            resolved_at: ts(&f.resolved_at),
            changes: f
                .changes
                .into_iter()
                .map(|c| ChangeView {
                    address: c.address,
                    action: c.action,
                    attributes: c.attributes,
                })
                .collect(),
            finding_id: f.finding_id,
            instance_id: f.instance_id,
            resource: f.resource,
            status: f.status,
            summary: f.summary,
            fingerprint: f.fingerprint,
            scan_id: f.scan_id,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ScanView {
    pub instance_id: String,
    pub instance_name: String,
    /// The one resource asked for; null for all.
    pub resource: Option<String>,
    /// Resources queued now (those with a scan in flight are not queued again).
    pub queued: u32,
}

#[derive(Debug, Serialize)]
pub struct IgnoreRulesView {
    pub instance_id: String,
    pub instance_name: String,
    /// The rules now in force (checked, trimmed, deduplicated).
    pub ignore_rules: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct WebhookView {
    pub webhook_id: String,
    pub tenant_id: String,
    pub url: String,
    pub event_types: Vec<String>,
    pub description: String,
    /// False once disabled after too many failures in a row.
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub consecutive_failures: u32,
    pub created_at: Option<String>,
    pub disabled_at: Option<String>,
}
impl Columns for WebhookView {
    const COLUMNS: &'static [&'static str] = &[
        "webhook_id",
        "url",
        "event_types",
        "enabled",
        "consecutive_failures",
        "created_at",
    ];
}
impl From<tnpb::Webhook> for WebhookView {
    fn from(w: tnpb::Webhook) -> Self {
        WebhookView {
            created_at: ts(&w.created_at),
            disabled_at: ts(&w.disabled_at),
            disabled_reason: non_empty(w.disabled_reason),
            webhook_id: w.webhook_id,
            tenant_id: w.tenant_id,
            url: w.url,
            event_types: w.event_types,
            description: w.description,
            enabled: w.enabled,
            consecutive_failures: w.consecutive_failures,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct CreatedWebhookView {
    #[serde(flatten)]
    pub webhook: WebhookView,
    /// The signing secret; shown once.
    pub secret: String,
}

#[derive(Debug, Serialize)]
pub struct AttemptView {
    pub attempt: u32,
    pub started_at: Option<String>,
    pub latency_ms: u64,
    /// The HTTP status; null when no response came.
    pub response_code: Option<u32>,
    /// `in_flight`, `delivered`, `retry`, `failed` or `abandoned`.
    pub outcome: String,
    /// A short classification (`timeout`, `HTTP 503`); never the response body.
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct DeliveryView {
    pub delivery_id: String,
    pub webhook_id: String,
    pub sequence: u64,
    pub event_id: String,
    pub event_type: String,
    /// `pending`, `delivered` or `failed` (given up).
    pub status: String,
    pub attempts: u32,
    pub created_at: Option<String>,
    pub next_attempt_at: Option<String>,
    pub finished_at: Option<String>,
    pub attempt_log: Vec<AttemptView>,
}
impl From<tnpb::WebhookDelivery> for DeliveryView {
    fn from(d: tnpb::WebhookDelivery) -> Self {
        DeliveryView {
            created_at: ts(&d.created_at),
            next_attempt_at: ts(&d.next_attempt_at),
            finished_at: ts(&d.finished_at),
            attempt_log: d
                .attempt_log
                .into_iter()
                .map(|a| AttemptView {
                    started_at: ts(&a.started_at),
                    response_code: (a.response_code != 0).then_some(a.response_code),
                    error: non_empty(a.error),
                    attempt: a.attempt,
                    latency_ms: a.latency_ms,
                    outcome: a.outcome,
                })
                .collect(),
            delivery_id: d.delivery_id,
            webhook_id: d.webhook_id,
            sequence: d.sequence,
            event_id: d.event_id,
            event_type: d.event_type,
            status: d.status,
            attempts: d.attempts,
        }
    }
}

/// One line of `webhooks deliveries` as a table: a delivery with one of its attempts (or
/// none yet).
#[derive(Debug, Serialize)]
pub struct DeliveryAttemptRow {
    pub sequence: u64,
    pub delivery_id: String,
    pub event_type: String,
    pub status: String,
    pub attempt: Option<u32>,
    pub outcome: Option<String>,
    pub response_code: Option<u32>,
    pub latency_ms: Option<u64>,
    pub started_at: Option<String>,
    pub error: Option<String>,
}
impl Columns for DeliveryAttemptRow {
    const COLUMNS: &'static [&'static str] = &[
        "sequence",
        "delivery_id",
        "event_type",
        "status",
        "attempt",
        "outcome",
        "response_code",
        "latency_ms",
        "started_at",
        "error",
    ];
}
impl DeliveryAttemptRow {
    /// The rows of `d`: one per attempt, newest attempt first, or one without an attempt.
    pub fn rows(d: &DeliveryView) -> Vec<DeliveryAttemptRow> {
        let row = |a: Option<&AttemptView>| DeliveryAttemptRow {
            sequence: d.sequence,
            delivery_id: d.delivery_id.clone(),
            event_type: d.event_type.clone(),
            status: d.status.clone(),
            attempt: a.map(|a| a.attempt),
            outcome: a.map(|a| a.outcome.clone()),
            response_code: a.and_then(|a| a.response_code),
            latency_ms: a.map(|a| a.latency_ms),
            started_at: a.and_then(|a| a.started_at.clone()),
            error: a.and_then(|a| a.error.clone()),
        };
        if d.attempt_log.is_empty() {
            return vec![row(None)];
        }
        let mut attempts: Vec<&AttemptView> = d.attempt_log.iter().collect();
        attempts.sort_by_key(|a| std::cmp::Reverse(a.attempt));
        attempts.into_iter().map(|a| row(Some(a))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_out_of_range_are_none_not_another_time() {
        let at = |seconds, nanos| prost_types::Timestamp { seconds, nanos };
        assert_eq!(
            ts(&Some(at(1_700_000_000, 0))).as_deref(),
            Some("2023-11-14T22:13:20Z")
        );
        assert_eq!(ts(&None), None);
        assert_eq!(ts(&Some(at(1_700_000_000, -1))), None);
        assert_eq!(ts(&Some(at(1_700_000_000, 1_000_000_000))), None);
        assert_eq!(ts(&Some(at(i64::MAX, 0))), None);
    }

    fn aws_target(validation: Option<tnpb::TargetValidation>) -> tnpb::Target {
        tnpb::Target {
            target_id: "t-1".into(),
            tenant_id: "tenant-1".into(),
            name: "aws-prod".into(),
            spec: Some(tnpb::TargetSpec {
                provider: Some(tnpb::target_spec::Provider::Aws(tnpb::AwsProvider {
                    region: "eu-west-1".into(),
                    role_arn: "arn:aws:iam::210987654321:role/cairn-deploy".into(),
                    external_id: "cairn-0123".into(),
                })),
                credential_ref: "platform-aws".into(),
                max_concurrent_deployments: 2,
                enabled: true,
            }),
            created_at: None,
            updated_at: None,
            last_validation: validation,
        }
    }

    #[test]
    fn aws_targets_show_their_role_external_id_and_last_validation() {
        let failed = tnpb::TargetValidation {
            validation_id: "v-1".into(),
            status: tnpb::TargetValidationStatus::Failed as i32,
            error: "AccessDenied".into(),
            transient: false,
            requested_at: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            finished_at: Some(prost_types::Timestamp {
                seconds: 1_700_000_005,
                nanos: 0,
            }),
            runner_instance: "runner-1".into(),
            ..Default::default()
        };
        let json = serde_json::to_value(TargetView::from(aws_target(Some(failed)))).unwrap();
        // The stable field names of `targets get/list -o json`.
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut want = vec![
            "target_id",
            "tenant_id",
            "name",
            "provider",
            "base_dir",
            "region",
            "role_arn",
            "external_id",
            "credential_ref",
            "max_concurrent_deployments",
            "enabled",
            "created_at",
            "updated_at",
            "last_validation",
        ];
        let mut got = keys.clone();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want);
        assert_eq!(json["provider"], "aws");
        assert_eq!(json["region"], "eu-west-1");
        assert_eq!(json["external_id"], "cairn-0123");
        assert_eq!(json["base_dir"], Value::Null);
        let v = &json["last_validation"];
        assert_eq!(
            v,
            &serde_json::json!({
                "validation_id": "v-1",
                "status": "failed",
                "account_id": null,
                "arn": null,
                "error": "AccessDenied",
                "transient": false,
                "runner_instance": "runner-1",
                "requested_at": "2023-11-14T22:13:20Z",
                "finished_at": "2023-11-14T22:13:25Z",
            })
        );

        // The list's table columns, nested validation status included.
        let headers: Vec<&str> = TargetView::COLUMNS
            .iter()
            .map(|c| crate::output::column(c, &Value::Null).0)
            .collect();
        assert!(headers.contains(&"external_id") && headers.contains(&"validation"));
        let cells: Vec<String> = TargetView::COLUMNS
            .iter()
            .map(|c| crate::output::cell(crate::output::column(c, &json).1))
            .collect();
        assert!(cells.contains(&"failed".to_owned()), "{cells:?}");
        assert!(cells.contains(&"cairn-0123".to_owned()), "{cells:?}");

        // Never validated: null, and "-" in the table.
        let json = serde_json::to_value(TargetView::from(aws_target(None))).unwrap();
        assert_eq!(json["last_validation"], Value::Null);
        let (_, status) = crate::output::column("validation=last_validation.status", &json);
        assert_eq!(crate::output::cell(status), "-");
    }

    #[test]
    fn local_targets_have_no_aws_fields() {
        let mut t = aws_target(None);
        t.spec.as_mut().unwrap().provider =
            Some(tnpb::target_spec::Provider::Local(tnpb::LocalProvider {
                base_dir: "/srv/x".into(),
            }));
        let json = serde_json::to_value(TargetView::from(t)).unwrap();
        assert_eq!(json["provider"], "local");
        assert_eq!(json["base_dir"], "/srv/x");
        for k in ["region", "role_arn", "external_id"] {
            assert_eq!(json[k], Value::Null, "{k}");
        }
    }

    fn output(value_json: &str, sensitive: bool, unavailable: &str) -> dpb::InstanceOutput {
        dpb::InstanceOutput {
            name: "url".into(),
            description: "where it answers".into(),
            value_json: value_json.into(),
            sensitive,
            unavailable_reason: unavailable.into(),
        }
    }

    #[test]
    fn outputs_show_their_value_or_why_not() {
        let read = OutputView::from(output(r#""http://127.0.0.1:8080""#, false, ""));
        assert_eq!(read.value, Value::String("http://127.0.0.1:8080".into()));
        assert_eq!(read.unavailable_reason, None);
        assert_eq!(read.display(), "http://127.0.0.1:8080");
        let port = OutputView::from(output("5432", false, ""));
        assert_eq!(port.display(), "5432");
        let object = OutputView::from(output(r#"{"a":[1,2]}"#, false, ""));
        assert_eq!(object.display(), r#"{"a":[1,2]}"#);

        // A server that sent a value with the flag anyway: still withheld.
        let secret = OutputView::from(output(r#""admin""#, true, ""));
        assert_eq!(secret.value, Value::Null);
        assert_eq!(secret.display(), "(sensitive)");
        let json = serde_json::to_value(&secret).unwrap();
        assert!(!json.to_string().contains("admin"), "{json}");

        let missing = OutputView::from(output("", false, "resource web has no state yet"));
        assert_eq!(missing.value, Value::Null);
        assert_eq!(
            missing.display(),
            "(unavailable: resource web has no state yet)"
        );
        let json = serde_json::to_value(&missing).unwrap();
        assert_eq!(json["unavailable_reason"], "resource web has no state yet");
        assert_eq!(
            serde_json::to_value(&read).unwrap()["unavailable_reason"],
            Value::Null
        );
    }

    #[test]
    fn instance_resources_carry_their_drift_status() {
        let view = InstanceView::from(dpb::Instance {
            resources: vec![dpb::InstanceResource {
                name: "web".into(),
                status: dpb::ResourceStatus::Applied as i32,
                drift_status: dpb::DriftStatus::DriftDetected as i32,
                ..Default::default()
            }],
            outputs: vec![output("", true, "")],
            ..Default::default()
        });
        assert_eq!(view.resources[0].drift_status, "drift_detected");
        assert_eq!(view.resources[0].status, "applied");
        assert!(view.outputs[0].sensitive);
    }

    #[test]
    fn delivery_rows_list_every_attempt_newest_first() {
        let d = DeliveryView::from(tnpb::WebhookDelivery {
            delivery_id: "d1".into(),
            event_type: "ping".into(),
            status: "delivered".into(),
            attempts: 2,
            attempt_log: vec![
                tnpb::WebhookAttempt {
                    attempt: 1,
                    latency_ms: 10_000,
                    response_code: 0,
                    outcome: "retry".into(),
                    error: "timeout".into(),
                    ..Default::default()
                },
                tnpb::WebhookAttempt {
                    attempt: 2,
                    latency_ms: 12,
                    response_code: 200,
                    outcome: "delivered".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        let rows = DeliveryAttemptRow::rows(&d);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].attempt, Some(2));
        assert_eq!(rows[0].response_code, Some(200));
        assert_eq!(rows[1].response_code, None);
        assert_eq!(rows[1].error.as_deref(), Some("timeout"));
        let pending = DeliveryView::from(tnpb::WebhookDelivery {
            delivery_id: "d2".into(),
            status: "pending".into(),
            ..Default::default()
        });
        let rows = DeliveryAttemptRow::rows(&pending);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].attempt, None);
    }

    #[test]
    fn drift_statuses_are_words() {
        assert_eq!(
            drift_status(drpb::DriftStatus::CheckFailed as i32),
            "check_failed"
        );
        assert_eq!(drift_status(drpb::DriftStatus::InSync as i32), "in_sync");
        assert_eq!(drift_status(99), "unknown(99)");
    }
}
