//! The services this one asks, over gRPC with its service token (never their crates):
//! tenancy for targets, templates for versions, resolution and diffs. Answers are turned
//! into this service's values and errors here; a peer's NOT_FOUND, INVALID_ARGUMENT and
//! FAILED_PRECONDITION reach the caller as such, anything else is the peer's trouble.
use std::collections::BTreeMap;

use cairn_contract::TenantId;
use cairn_proto::templates as tpb;
use cairn_proto::tenancy as tnpb;
use cairn_sdk::Cairn;
use tonic::Code;
use uuid::Uuid;

use crate::domain::{Change, Ref, ResourceSpec};
use crate::error::{Error, Result};

/// A target as the workflow needs it.
#[derive(Debug, Clone)]
pub struct TargetInfo {
    pub target_id: Uuid,
    pub name: String,
    /// What the resolver fills module target inputs from (e.g. `base_dir`).
    pub settings: BTreeMap<String, String>,
    pub enabled: bool,
    /// The runner's credential registry reference of the target's credentials.
    pub credential_ref: String,
    /// Deployments running on the target at once (0 = no limit).
    pub max_concurrent_deployments: u32,
}

/// A template and its newest version number (0 when none is published).
#[derive(Debug, Clone)]
pub struct TemplateInfo {
    pub template_id: Uuid,
    pub name: String,
    pub latest_version: u32,
}

/// A stored snapshot: its id and resources in dependency order.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub snapshot_id: Uuid,
    pub resources: Vec<ResourceSpec>,
}

/// What a resolution needs.
#[derive(Debug, Clone)]
pub struct ResolveInput<'a> {
    pub template: &'a TemplateInfo,
    pub version: u32,
    pub instance_id: Uuid,
    pub instance_name: &'a str,
    pub environment: &'a str,
    pub parameters_json: String,
    pub target: &'a TargetInfo,
}

/// Tenancy and templates through the SDK's typed clients, authenticated with the service
/// token.
#[derive(Clone)]
pub struct Peers {
    cairn: Cairn,
}

fn refused(service: &'static str, call: &'static str, what: &str, status: tonic::Status) -> Error {
    match status.code() {
        Code::NotFound => Error::not_found(what),
        Code::InvalidArgument => Error::invalid_argument(format!("{what}: {}", status.message())),
        Code::FailedPrecondition => {
            Error::failed_precondition(format!("{what}: {}", status.message()))
        }
        _ => cairn_service::PeerError::new(service, call, status).into(),
    }
}

fn uuid_of(service: &'static str, call: &'static str, s: &str) -> Result<Uuid> {
    Uuid::parse_str(s).map_err(|_| Error::internal(format!("{service} {call} answered id {s:?}")))
}

impl Peers {
    /// `cairn` names the tenancy and templates endpoints ([`cairn_service::peer_client`]).
    pub fn new(cairn: Cairn) -> Self {
        Peers { cairn }
    }

    /// The tenant's target named by `r` (another tenant's is NOT_FOUND).
    pub async fn target(&self, tenant: TenantId, r: &Ref) -> Result<TargetInfo> {
        let (target_id, name) = match r {
            Ref::Id(id) => (id.to_string(), String::new()),
            Ref::Name(n) => (String::new(), n.clone()),
        };
        let what = format!("target {r}");
        let t = self
            .cairn
            .targets()
            .get_target(tnpb::GetTargetRequest {
                tenant_id: tenant.to_string(),
                target_id,
                name,
            })
            .await
            .map_err(|e| refused("tenancy", "GetTarget", &what, e.into_status()))?
            .target
            .ok_or_else(|| Error::internal("tenancy GetTarget answered no target"))?;
        let spec = t.spec.unwrap_or_default();
        let mut settings = BTreeMap::new();
        match spec.provider {
            Some(tnpb::target_spec::Provider::Local(l)) => {
                settings.insert("base_dir".to_owned(), l.base_dir);
            }
            // The runner assumes the role with these before each tofu command.
            Some(tnpb::target_spec::Provider::Aws(a)) => {
                settings.insert("aws_region".to_owned(), a.region);
                settings.insert("aws_role_arn".to_owned(), a.role_arn);
                settings.insert("aws_external_id".to_owned(), a.external_id);
            }
            None => {}
        }
        Ok(TargetInfo {
            target_id: uuid_of("tenancy", "GetTarget", &t.target_id)?,
            name: t.name,
            settings,
            enabled: spec.enabled,
            credential_ref: spec.credential_ref,
            max_concurrent_deployments: spec.max_concurrent_deployments,
        })
    }

    /// The tenant's template named by `r` (another tenant's is NOT_FOUND: the service
    /// token sees every tenant, so the owner is checked here).
    pub async fn template(&self, tenant: TenantId, r: &Ref) -> Result<TemplateInfo> {
        let (template_id, name) = match r {
            Ref::Id(id) => (id.to_string(), String::new()),
            Ref::Name(n) => (String::new(), n.clone()),
        };
        let what = format!("template {r}");
        let t = self
            .cairn
            .templates()
            .get_template(tpb::GetTemplateRequest {
                template_id,
                tenant_id: tenant.to_string(),
                name,
            })
            .await
            .map_err(|e| refused("templates", "GetTemplate", &what, e.into_status()))?
            .template
            .ok_or_else(|| Error::internal("templates GetTemplate answered no template"))?;
        if t.tenant_id != tenant.to_string() {
            return Err(Error::not_found(what));
        }
        Ok(TemplateInfo {
            template_id: uuid_of("templates", "GetTemplate", &t.template_id)?,
            name: t.name,
            latest_version: t.latest_version,
        })
    }

    /// `version` of `template`, or its newest when 0; NOT_FOUND when it has no such version.
    pub async fn version(&self, template: &TemplateInfo, version: u32) -> Result<u32> {
        if version == 0 {
            if template.latest_version == 0 {
                return Err(Error::failed_precondition(format!(
                    "template {:?} has no published version yet",
                    template.name
                )));
            }
            return Ok(template.latest_version);
        }
        let what = format!("version {version} of template {:?}", template.name);
        self.cairn
            .templates()
            .get_version(tpb::GetVersionRequest {
                template_id: template.template_id.to_string(),
                version: version.to_string(),
            })
            .await
            .map_err(|e| refused("templates", "GetVersion", &what, e.into_status()))?;
        Ok(version)
    }

    /// Resolves a version for an instance into a stored snapshot. Problems with the
    /// parameters are INVALID_ARGUMENT naming each one.
    pub async fn resolve(&self, input: ResolveInput<'_>) -> Result<Resolved> {
        let what = format!(
            "resolving version {} of template {:?}",
            input.version, input.template.name
        );
        let s = self
            .cairn
            .resolver()
            .resolve(tpb::ResolveRequest {
                template_id: input.template.template_id.to_string(),
                version: input.version.to_string(),
                instance_id: input.instance_id.to_string(),
                instance_name: input.instance_name.to_owned(),
                environment: input.environment.to_owned(),
                parameters_json: input.parameters_json,
                target_settings: input.target.settings.clone().into_iter().collect(),
            })
            .await
            .map_err(|e| refused("templates", "Resolve", &what, e.into_status()))?
            .snapshot
            .ok_or_else(|| Error::internal("templates Resolve answered no snapshot"))?;
        resolved(s)
    }

    /// A stored snapshot.
    pub async fn snapshot(&self, snapshot_id: Uuid) -> Result<Resolved> {
        let what = format!("snapshot {snapshot_id}");
        let s = self
            .cairn
            .resolver()
            .get_snapshot(tpb::GetSnapshotRequest {
                snapshot_id: snapshot_id.to_string(),
            })
            .await
            .map_err(|e| refused("templates", "GetSnapshot", &what, e.into_status()))?
            .snapshot
            .ok_or_else(|| Error::internal("templates GetSnapshot answered no snapshot"))?;
        resolved(s)
    }

    /// A stored snapshot as the document the renderer reads.
    pub async fn snapshot_document(&self, snapshot_id: Uuid) -> Result<cairn_templating::Snapshot> {
        let what = format!("snapshot {snapshot_id}");
        let s = self
            .cairn
            .resolver()
            .get_snapshot(tpb::GetSnapshotRequest {
                snapshot_id: snapshot_id.to_string(),
            })
            .await
            .map_err(|e| refused("templates", "GetSnapshot", &what, e.into_status()))?
            .snapshot
            .ok_or_else(|| Error::internal("templates GetSnapshot answered no snapshot"))?;
        cairn_templating::Snapshot::from_json(&s.snapshot_json)
            .map_err(|e| Error::internal(format!("{what}: {e}")))
    }

    /// How each resource changed from `previous` (none: everything is added) to `next`.
    pub async fn diff(
        &self,
        previous: Option<Uuid>,
        next: Uuid,
    ) -> Result<BTreeMap<String, Change>> {
        let what = format!("diff of snapshot {next}");
        let diffs = self
            .cairn
            .resolver()
            .diff(tpb::DiffRequest {
                previous_snapshot_id: previous.map(|p| p.to_string()).unwrap_or_default(),
                snapshot_id: next.to_string(),
            })
            .await
            .map_err(|e| refused("templates", "Diff", &what, e.into_status()))?
            .resources;
        diffs
            .into_iter()
            .map(|d| {
                let change = match tpb::ChangeKind::try_from(d.change) {
                    Ok(tpb::ChangeKind::Add) => Change::Add,
                    Ok(tpb::ChangeKind::Update) => Change::Update,
                    Ok(tpb::ChangeKind::Remove) => Change::Remove,
                    Ok(tpb::ChangeKind::Unchanged) => Change::Unchanged,
                    Ok(tpb::ChangeKind::Unspecified) | Err(_) => {
                        return Err(Error::internal(format!(
                            "templates Diff answered change {} for {:?}",
                            d.change, d.name
                        )));
                    }
                };
                Ok((d.name, change))
            })
            .collect()
    }
}

fn resolved(s: tpb::Snapshot) -> Result<Resolved> {
    Ok(Resolved {
        snapshot_id: uuid_of("templates", "Resolve", &s.snapshot_id)?,
        resources: s
            .resources
            .into_iter()
            .map(|r| ResourceSpec {
                name: r.name,
                depends_on: r.depends_on,
            })
            .collect(),
    })
}
