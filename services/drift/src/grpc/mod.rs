//! `cairn.drift.v1.Drift`: takes the principal the auth layer put in the request, converts
//! the request into domain values, calls the app, converts back.
use cairn_auth::Principal;
use cairn_proto::drift as pb;
use chrono::{DateTime, Utc};
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::app::App;
use crate::domain::verdict::Status as DriftStatus;
use crate::store::findings::FindingRow;
use crate::store::tracking::TrackedRow;

pub struct DriftService {
    pub app: App,
}

fn who<T>(req: &Request<T>) -> Result<Principal, Status> {
    cairn_auth::principal(req).cloned()
}

fn id(field: &str, value: &str) -> Result<Uuid, Status> {
    Uuid::parse_str(value.trim())
        .map_err(|_| Status::invalid_argument(format!("{field} must be a UUID, not {value:?}")))
}

fn optional_id(field: &str, value: &str) -> Result<Option<Uuid>, Status> {
    if value.trim().is_empty() {
        Ok(None)
    } else {
        id(field, value).map(Some)
    }
}

fn time(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

fn status_of(s: DriftStatus) -> pb::DriftStatus {
    match s {
        DriftStatus::Unknown => pb::DriftStatus::Unknown,
        DriftStatus::InSync => pb::DriftStatus::InSync,
        DriftStatus::DriftDetected => pb::DriftStatus::DriftDetected,
        DriftStatus::CheckFailed => pb::DriftStatus::CheckFailed,
    }
}

fn resource(r: &TrackedRow) -> pb::ResourceDrift {
    let never = crate::domain::schedule::never();
    pb::ResourceDrift {
        instance_id: r.instance_id.to_string(),
        resource: r.resource.clone(),
        state_id: r.state_id.to_string(),
        target_id: r.target_id.clone(),
        environment: r.environment.clone(),
        status: status_of(DriftStatus::parse(&r.status)) as i32,
        error_class: r.error_class.clone(),
        message: r.message.clone(),
        last_scan_at: r.last_scan_at.map(time),
        next_scan_at: (r.next_due_at < never).then(|| time(r.next_due_at)),
        finding_id: r.finding_id.map(|f| f.to_string()).unwrap_or_default(),
        scanning: r.scan_id.is_some(),
        applied_run_id: r.applied_run_id.to_string(),
    }
}

fn finding(f: &FindingRow) -> pb::Finding {
    let changes = f
        .changes
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|c| pb::Change {
                    address: c["address"].as_str().unwrap_or_default().to_owned(),
                    action: c["action"].as_str().unwrap_or_default().to_owned(),
                    attributes: c["attributes"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|s| s.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    pb::Finding {
        finding_id: f.finding_id.to_string(),
        instance_id: f.instance_id.to_string(),
        resource: f.resource.clone(),
        status: f.status.clone(),
        fingerprint: f.fingerprint.clone(),
        summary: f.summary.clone(),
        changes,
        scan_id: f.scan_id.to_string(),
        detected_at: Some(time(f.detected_at)),
        resolved_at: f.resolved_at.map(time),
    }
}

#[tonic::async_trait]
impl pb::drift_server::Drift for DriftService {
    async fn get_drift_status(
        &self,
        req: Request<pb::GetDriftStatusRequest>,
    ) -> Result<Response<pb::GetDriftStatusResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        let (tenant, instance) = (
            id("tenant_id", &r.tenant_id)?,
            id("instance_id", &r.instance_id)?,
        );
        let view = self.app.drift_status(&who, tenant, instance).await?;
        let worst = view
            .resources
            .iter()
            .map(|r| DriftStatus::parse(&r.status))
            .max_by_key(|s| s.severity())
            .unwrap_or(DriftStatus::Unknown);
        Ok(Response::new(pb::GetDriftStatusResponse {
            instance_id: instance.to_string(),
            status: status_of(worst) as i32,
            resources: view.resources.iter().map(resource).collect(),
            ignore_rules: view.ignore_rules,
        }))
    }

    async fn list_findings(
        &self,
        req: Request<pb::ListFindingsRequest>,
    ) -> Result<Response<pb::ListFindingsResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        let tenant = id("tenant_id", &r.tenant_id)?;
        let instance = optional_id("instance_id", &r.instance_id)?;
        let after = optional_id("page_token", &r.page_token)?;
        let status = (!r.status.trim().is_empty()).then(|| r.status.trim().to_ascii_lowercase());
        let page = self
            .app
            .list_findings(
                &who,
                tenant,
                instance,
                status.as_deref(),
                r.page_size,
                after,
            )
            .await?;
        Ok(Response::new(pb::ListFindingsResponse {
            findings: page.findings.iter().map(finding).collect(),
            next_page_token: page.next.map(|n| n.to_string()).unwrap_or_default(),
        }))
    }

    async fn trigger_scan(
        &self,
        req: Request<pb::TriggerScanRequest>,
    ) -> Result<Response<pb::TriggerScanResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        let (tenant, instance) = (
            id("tenant_id", &r.tenant_id)?,
            id("instance_id", &r.instance_id)?,
        );
        let one = (!r.resource.trim().is_empty()).then(|| r.resource.trim());
        let queued = self.app.trigger_scan(&who, tenant, instance, one).await?;
        Ok(Response::new(pb::TriggerScanResponse {
            queued: u32::try_from(queued).unwrap_or(u32::MAX),
        }))
    }

    async fn set_ignore_rules(
        &self,
        req: Request<pb::SetIgnoreRulesRequest>,
    ) -> Result<Response<pb::SetIgnoreRulesResponse>, Status> {
        let who = who(&req)?;
        let r = req.get_ref();
        let (tenant, instance) = (
            id("tenant_id", &r.tenant_id)?,
            id("instance_id", &r.instance_id)?,
        );
        let rules = self
            .app
            .set_ignore_rules(&who, tenant, instance, &r.rules)
            .await?;
        Ok(Response::new(pb::SetIgnoreRulesResponse { rules }))
    }
}
