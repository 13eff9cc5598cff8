//! The JSON shapes of `--output json`: stable, snake_case field names, timestamps as RFC
//! 3339 strings, enums as lower-case words (`succeeded`, `awaiting_approval`), JSON
//! documents (parameters, outputs, audit details) as JSON values.
use cairn_proto::{
    deployments as dpb, runner as rpb, state as spb, templates as tpb, tenancy as tnpb,
};
use serde::Serialize;
use serde_json::Value;

use crate::output::Columns;

/// RFC 3339, or None.
pub fn ts(t: &Option<prost_types::Timestamp>) -> Option<String> {
    let t = t.as_ref()?;
    let nanos = u32::try_from(t.nanos).unwrap_or(0);
    chrono::DateTime::from_timestamp(t.seconds, nanos)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
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
    pub region: Option<String>,
    pub role_arn: Option<String>,
    pub credential_ref: String,
    pub max_concurrent_deployments: u32,
    pub enabled: bool,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}
impl Columns for TargetView {
    const COLUMNS: &'static [&'static str] = &[
        "target_id",
        "name",
        "provider",
        "base_dir",
        "max_concurrent_deployments",
        "enabled",
    ];
}
impl From<tnpb::Target> for TargetView {
    fn from(t: tnpb::Target) -> Self {
        let spec = t.spec.unwrap_or_default();
        let (provider, base_dir, region, role_arn) = match spec.provider {
            Some(tnpb::target_spec::Provider::Local(l)) => ("local", Some(l.base_dir), None, None),
            Some(tnpb::target_spec::Provider::Aws(a)) => {
                ("aws", None, Some(a.region), Some(a.role_arn))
            }
            None => ("none", None, None, None),
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
            credential_ref: spec.credential_ref,
            max_concurrent_deployments: spec.max_concurrent_deployments,
            enabled: spec.enabled,
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
    /// The JSON value; null when sensitive (withheld).
    pub value: Value,
    pub sensitive: bool,
    pub description: String,
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
            outputs: i
                .outputs
                .into_iter()
                .map(|o| OutputView {
                    value: if o.sensitive {
                        Value::Null
                    } else {
                        json_or_string(&o.value_json)
                    },
                    name: o.name,
                    sensitive: o.sensitive,
                    description: o.description,
                })
                .collect(),
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
