//! Conversions between protobuf messages and the app's values.
use cairn_contract::InvalidId;
use cairn_proto::templates as pb;
use cairn_service::BaseError;
use cairn_templating::{Change, Problem, ResourceDiff, Snapshot};
use tonic::Status;
use uuid::Uuid;

use crate::store::snapshots::SnapshotRow;
use crate::store::templates::TemplateRow;
use crate::store::versions::VersionRow;

/// A required id field of a request (INVALID_ARGUMENT naming the field otherwise).
pub fn uuid<T: From<Uuid>>(field: &'static str, s: &str) -> Result<T, Status> {
    Uuid::parse_str(s.trim())
        .map(T::from)
        .map_err(|_| BaseError::from(InvalidId { field }).into())
}

/// An optional id field: empty is none.
pub fn opt_uuid<T: From<Uuid>>(field: &'static str, s: &str) -> Result<Option<T>, Status> {
    cairn_contract::parse_optional(field, s).map_err(|e| BaseError::from(e).into())
}

pub fn timestamp(t: chrono::DateTime<chrono::Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

fn u32_of(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

pub fn template(r: &TemplateRow) -> pb::Template {
    pb::Template {
        template_id: r.template_id.to_string(),
        tenant_id: r.tenant_id.to_string(),
        name: r.name.clone(),
        description: r.description.clone(),
        created_at: Some(timestamp(r.created_at)),
        latest_version: u32_of(r.latest_version),
    }
}

pub fn version(r: &VersionRow) -> pb::TemplateVersion {
    pb::TemplateVersion {
        template_id: r.template_id.to_string(),
        tenant_id: r.tenant_id.to_string(),
        number: u32_of(r.number),
        content_hash: r.content_hash.clone(),
        document: r.document.clone(),
        created_at: Some(timestamp(r.created_at)),
    }
}

pub fn problem(p: &Problem) -> pb::Problem {
    pb::Problem {
        kind: p.kind.as_str().to_owned(),
        path: p.path.clone(),
        line: p.loc.line,
        column: p.loc.column,
        message: p.message.clone(),
    }
}

pub fn snapshot(row: &SnapshotRow, s: &Snapshot) -> pb::Snapshot {
    pb::Snapshot {
        snapshot_id: row.snapshot_id.to_string(),
        tenant_id: row.tenant_id.to_string(),
        template_id: row.template_id.to_string(),
        template_version: s.template_version.clone(),
        instance_id: row.instance_id.to_string(),
        environment: row.environment.clone(),
        hash: row.hash.clone(),
        snapshot_json: row.document.clone(),
        resources: s
            .resources
            .iter()
            .map(|r| pb::ResolvedResource {
                name: r.name.clone(),
                module: r.module.clone(),
                kind: r.kind.clone(),
                physical_name: r.physical_name.clone(),
                state_key: r.state_key.clone(),
                depends_on: r.depends_on.clone(),
                sensitive_variable_refs: r.sensitive_variables.clone().into_iter().collect(),
            })
            .collect(),
        created_at: Some(timestamp(row.created_at)),
        outputs: s
            .outputs
            .iter()
            .map(|o| pb::OutputDeclaration {
                name: o.name.clone(),
                description: o.description.clone(),
                resource: o.resource.clone(),
                output: o.output.clone(),
                sensitive: o.sensitive,
            })
            .collect(),
    }
}

pub fn resource_diff(d: &ResourceDiff) -> pb::ResourceDiff {
    let (change, changed_inputs, module_changed) = match &d.change {
        Change::Add => (pb::ChangeKind::Add, Vec::new(), false),
        Change::Update {
            changed_inputs,
            module_changed,
        } => (
            pb::ChangeKind::Update,
            changed_inputs.clone(),
            *module_changed,
        ),
        Change::Remove => (pb::ChangeKind::Remove, Vec::new(), false),
        Change::Unchanged => (pb::ChangeKind::Unchanged, Vec::new(), false),
    };
    pb::ResourceDiff {
        name: d.name.clone(),
        change: change as i32,
        changed_inputs,
        module_changed,
    }
}
